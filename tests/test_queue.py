"""The queue on real SQLite files: migrations, seeding, claims with leases, finishing, taking back, breaker."""

import json
import multiprocessing

import pytest

from scraper.base.errors import IntegrityError
from scraper.db import dialect, jobcounts, runrecord, schema, store
from scraper.db.queue import Queue
from scraper.policy import breaker

NOW = 1_700_000_000.0
LEASE = 60.0
DOMAIN = "n8n.io"


def job_rows(ids, domain=DOMAIN):
    return [(f"n8n:{i}", "n8n", f"https://{domain}/workflows/{i}", domain) for i in ids]


@pytest.fixture
def db(backend):
    """Every test here is a contract test: it runs on SQLite and on PostgreSQL."""
    return backend


@pytest.fixture
def q(db):
    conn = store.open_db(db)
    yield Queue(conn)
    conn.close()


def job_row(q, key):
    return dict(q.conn.execute("SELECT * FROM jobs WHERE key = ?", (key,)).fetchone())


def workflow_ids(q):
    return [r[0] for r in q.conn.execute("SELECT id FROM workflows ORDER BY id")]


def write_workflow(template_id):
    return lambda c: c.execute("INSERT INTO workflows (id, name) VALUES (?, ?)", (template_id, f"t{template_id}"))


def template_id(job):
    return int(job.key.split(":")[1])


# --- store ---------------------------------------------------------------------------------------

def test_open_db_migrates_to_the_schema_version(db):
    conn = store.open_db(db)
    assert store.schema_version(conn) == store.SCHEMA_VERSION >= 1
    assert {"jobs", "workflows", "domains", "runs", "counters"} <= schema.tables(conn)
    if not store.is_postgres(conn):
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_open_db_twice_is_idempotent_and_keeps_data(db):
    conn = store.open_db(db)
    Queue(conn).seed(job_rows([1, 2]), now=NOW)
    conn.close()
    conn = store.open_db(db)
    assert store.migrate(conn) == store.SCHEMA_VERSION
    assert store.schema_version(conn) == store.SCHEMA_VERSION
    assert Queue(conn).counts()["pending"] == 2
    conn.close()


# --- seeding -------------------------------------------------------------------------------------

def test_seed_returns_new_and_known(q):
    assert q.seed(job_rows([1, 2, 3]), now=NOW) == (3, 0)
    assert q.seed(job_rows([2, 3, 4, 5]), now=NOW) == (2, 2)
    assert q.counts()["pending"] == 5


def test_seed_over_a_batch_boundary(q, monkeypatch):
    monkeypatch.setattr("scraper.db.queue.SEED_BATCH", 7)
    assert q.seed(job_rows(range(1, 21)), now=NOW) == (20, 0)
    assert q.seed(job_rows(range(15, 31)), now=NOW) == (10, 6)


def test_seeding_again_never_resets_a_done_row(q):
    q.seed(job_rows([1]), now=NOW)
    job = q.claim("w1", NOW, LEASE)
    assert q.complete(job, "w1", NOW + 1, 5)
    assert q.seed(job_rows([1]), now=NOW + 2) == (0, 1)
    row = job_row(q, "n8n:1")
    assert row["status"] == "done" and row["attempts"] == 1 and row["finished_at"] == NOW + 1


# --- claiming ------------------------------------------------------------------------------------

def test_claim_takes_jobs_in_order_with_a_lease(q):
    q.seed(job_rows([10, 11, 12]), now=NOW)
    q.conn.execute("UPDATE jobs SET priority = 5 WHERE key = 'n8n:12'")
    q.conn.execute("UPDATE jobs SET available_at = ? WHERE key = 'n8n:10'", (NOW - 1,))
    q.conn.execute("UPDATE jobs SET available_at = ? WHERE key = 'n8n:11'", (NOW - 5,))
    keys = [q.claim("w1", NOW, LEASE).key for _ in range(3)]
    assert keys == ["n8n:12", "n8n:11", "n8n:10"]      # priority first, then the longest waiting
    row = job_row(q, "n8n:10")
    assert row["status"] == "running" and row["worker"] == "w1"
    assert row["lease_until"] == NOW + LEASE and row["attempts"] == 1 and row["started_at"] == NOW


def test_claim_breaks_ties_by_id(q):
    q.seed(job_rows([30, 20, 10]), now=NOW)
    assert [q.claim("w1", NOW, LEASE).key for _ in range(3)] == ["n8n:30", "n8n:20", "n8n:10"]


def test_claim_returns_the_job(q):
    q.seed(job_rows([7]), now=NOW)
    job = q.claim("w1", NOW, LEASE)
    assert (job.key, job.site, job.url, job.domain, job.attempts, job.probe) == (
        "n8n:7", "n8n", "https://n8n.io/workflows/7", DOMAIN, 1, False)


def test_claim_leaves_the_skipped_keys_to_other_workers(q):
    """A worker that handed jobs back for want of a browser slot leaves them to a slot holder."""
    q.seed(job_rows([1, 2, 3]), now=NOW)
    assert q.claim("w1", NOW, LEASE, skip_keys=["n8n:1", "n8n:2"]).key == "n8n:3"
    assert q.claim("w1", NOW, LEASE, skip_keys=["n8n:1", "n8n:2"]) is None
    assert q.claim("w2", NOW, LEASE).key == "n8n:1"


def test_claim_of_an_empty_queue_is_none(q):
    assert q.claim("w1", NOW, LEASE) is None


def test_claim_skips_running_and_finished_rows(q):
    q.seed(job_rows([1]), now=NOW)
    q.claim("w1", NOW, LEASE)
    assert q.claim("w2", NOW, LEASE) is None


def test_claim_waits_for_available_at(q):
    q.seed(job_rows([1]), now=NOW)
    q.conn.execute("UPDATE jobs SET available_at = ?", (NOW + 10,))
    assert q.claim("w1", NOW + 9.9, LEASE) is None
    assert q.claim("w1", NOW + 10, LEASE).key == "n8n:1"


def claim_all(db, name, out_path, ready):
    """A worker process: open its own connection, claim and complete until the queue is empty."""
    import time
    conn = store.open_db(db)
    queue = Queue(conn)
    claimed = []
    ready.wait()
    while True:
        job = queue.claim(name, time.time(), LEASE)
        if job is None:
            break
        claimed.append(job.key)
        # a plain INSERT: a second write of the same template would raise
        assert queue.complete(job, name, time.time(), 1, write=write_workflow(template_id(job)))
    conn.close()
    with open(out_path, "w") as f:
        json.dump(claimed, f)


@pytest.mark.slow
def test_claims_are_atomic_across_processes(db, tmp_path):
    conn = store.open_db(db)
    Queue(conn).seed(job_rows(range(1, 3001)), now=NOW)
    conn.close()
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    outs = [tmp_path / f"claimed-{i}.json" for i in range(4)]
    procs = [ctx.Process(target=claim_all, args=(db, f"w{i}", str(outs[i]), ready)) for i in range(4)]
    for p in procs:
        p.start()
    ready.set()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]

    claimed = [key for out in outs for key in json.loads(out.read_text())]
    assert len(claimed) == 3000 and len(set(claimed)) == 3000
    assert sum(1 for out in outs if json.loads(out.read_text())) >= 2    # really concurrent
    conn = store.connect(db)
    assert Queue(conn).counts() == {"pending": 0, "running": 0, "done": 3000, "failed": 0, "invalid": 0}
    assert tuple(conn.execute("SELECT COUNT(*), COUNT(DISTINCT id) FROM workflows").fetchone()) == (3000, 3000)
    assert conn.execute("SELECT MAX(attempts) FROM jobs").fetchone()[0] == 1
    conn.close()


# --- leases --------------------------------------------------------------------------------------

def test_heartbeat_extends_the_lease(q):
    q.seed(job_rows([1]), now=NOW)
    job = q.claim("w1", NOW, LEASE)
    assert q.heartbeat(job, "w1", NOW + 30, LEASE)
    assert job_row(q, "n8n:1")["lease_until"] == NOW + 30 + LEASE


def test_heartbeat_is_false_after_the_lease_was_taken_back(q):
    q.seed(job_rows([1]), now=NOW)
    job = q.claim("w1", NOW, LEASE)
    assert q.requeue(NOW + LEASE + 1, expired=True) == 1
    assert not q.heartbeat(job, "w1", NOW + LEASE + 2, LEASE)


def test_complete_by_a_worker_that_lost_its_lease_writes_nothing(q):
    q.seed(job_rows([1]), now=NOW)
    stale = q.claim("w1", NOW, LEASE)
    q.requeue(NOW + LEASE + 1, expired=True)
    fresh = q.claim("w2", NOW + LEASE + 2, LEASE)
    assert not q.complete(stale, "w1", NOW + LEASE + 3, 5, write=write_workflow(1))
    assert workflow_ids(q) == []
    assert job_row(q, "n8n:1")["worker"] == "w2"
    assert q.complete(fresh, "w2", NOW + LEASE + 4, 5, write=write_workflow(1))
    assert workflow_ids(q) == [1]


def test_complete_writes_result_and_done_together(q):
    q.seed(job_rows([1]), now=NOW)
    job = q.claim("w1", NOW, LEASE)
    assert q.complete(job, "w1", NOW + 2, 1500, write=write_workflow(1), http_status=200)
    row = job_row(q, "n8n:1")
    assert (row["status"], row["worker"], row["lease_until"], row["finished_at"], row["duration_ms"]) == (
        "done", None, None, NOW + 2, 1500)
    assert workflow_ids(q) == [1]


def test_a_write_that_raises_rolls_back_result_and_done(q):
    q.seed(job_rows([1]), now=NOW)
    job = q.claim("w1", NOW, LEASE)

    def broken_write(c):
        write_workflow(1)(c)
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        q.complete(job, "w1", NOW + 1, 5, write=broken_write)
    assert workflow_ids(q) == []
    row = job_row(q, "n8n:1")
    assert row["status"] == "running" and row["worker"] == "w1"
    assert q.complete(job, "w1", NOW + 2, 5, write=write_workflow(1))     # the connection is still usable


# --- failing -------------------------------------------------------------------------------------

def test_fail_to_pending_schedules_a_retry(q):
    q.seed(job_rows([1]), now=NOW)
    job = q.claim("w1", NOW, LEASE)
    assert q.fail(job, "w1", NOW + 1, "pending", "http_5xx", "HTTP 503", 503, available_at=NOW + 3)
    row = job_row(q, "n8n:1")
    assert (row["status"], row["available_at"], row["attempts"], row["finished_at"], row["worker"]) == (
        "pending", NOW + 3, 1, None, None)
    assert (row["error_kind"], row["last_error"], row["http_status"]) == ("http_5xx", "HTTP 503", 503)
    assert q.claim("w1", NOW + 2, LEASE) is None
    assert q.claim("w1", NOW + 3, LEASE).attempts == 2


@pytest.mark.parametrize("status", ["failed", "invalid"])
def test_fail_to_a_final_status(q, status):
    q.seed(job_rows([1]), now=NOW)
    job = q.claim("w1", NOW, LEASE)
    assert q.fail(job, "w1", NOW + 1, status, "http_4xx", "HTTP 404", 404)
    row = job_row(q, "n8n:1")
    assert (row["status"], row["finished_at"], row["http_status"]) == (status, NOW + 1, 404)
    assert q.claim("w1", NOW + 100, LEASE) is None


def test_fail_bumps_the_counter_of_its_kind(q):
    q.seed(job_rows([1, 2, 3]), now=NOW)
    for kind in ("http_429", "http_429", "network"):
        job = q.claim("w1", NOW, LEASE)
        q.fail(job, "w1", NOW, "failed", kind, "x")
    assert q.counters() == {"error:http_429": 2, "error:network": 1}


def test_fail_by_a_worker_that_lost_its_lease_changes_nothing(q):
    q.seed(job_rows([1]), now=NOW)
    job = q.claim("w1", NOW, LEASE)
    q.requeue(NOW + 1, workers=["w1"])
    assert not q.fail(job, "w1", NOW + 2, "failed", "network", "x")
    assert job_row(q, "n8n:1")["status"] == "pending"
    assert q.counters() == {}


def test_fail_keeps_a_long_message_short(q):
    q.seed(job_rows([1]), now=NOW)
    job = q.claim("w1", NOW, LEASE)
    q.fail(job, "w1", NOW, "failed", "parse", "x" * 5000)
    assert len(job_row(q, "n8n:1")["last_error"]) == 1000


# --- handing back --------------------------------------------------------------------------------

def test_release_hands_the_job_back_without_counting_the_attempt(q):
    q.seed(job_rows([1]), now=NOW)
    job = q.claim("w1", NOW, LEASE)
    assert q.release(job, "w1", NOW + 1)
    row = job_row(q, "n8n:1")
    assert (row["status"], row["attempts"], row["worker"], row["lease_until"]) == ("pending", 0, None, None)
    assert not q.release(job, "w1", NOW + 2)      # not ours any more


def test_requeue_by_worker_names(q):
    q.seed(job_rows([1, 2, 3]), now=NOW)
    for name in ("w1", "w2", "w3"):
        q.claim(name, NOW, LEASE)
    assert q.requeue(NOW + 1, workers=["w1", "w3"]) == 2
    assert [r[0] for r in q.conn.execute("SELECT worker FROM jobs WHERE status = 'running'")] == ["w2"]
    assert [r["attempts"] for r in q.conn.execute("SELECT attempts FROM jobs WHERE status = 'pending'")] == [0, 0]
    assert q.requeue(NOW + 1, workers=[]) == 0
    assert q.counts()["running"] == 1


def test_requeue_expired_takes_back_only_expired_leases(q):
    q.seed(job_rows([1, 2]), now=NOW)
    q.claim("w1", NOW, 10)
    q.claim("w2", NOW, 100)
    assert q.requeue(NOW + 50, expired=True) == 1
    assert job_row(q, "n8n:1")["status"] == "pending" and job_row(q, "n8n:1")["attempts"] == 0
    assert job_row(q, "n8n:2")["status"] == "running"


def test_requeue_without_arguments_takes_back_every_running_row(q):
    q.seed(job_rows([1, 2, 3]), now=NOW)
    first = q.claim("w1", NOW, LEASE)
    q.claim("w2", NOW, LEASE)
    q.complete(first, "w1", NOW, 1)
    assert q.requeue(NOW + 1) == 1
    assert q.counts() == {"pending": 2, "running": 0, "done": 1, "failed": 0, "invalid": 0}
    assert job_row(q, "n8n:2")["attempts"] == 0


# --- retry, counts -------------------------------------------------------------------------------

@pytest.fixture
def finished(q):
    """Two failed, one invalid, one done, one pending; each failed/invalid after 3 attempts."""
    q.seed(job_rows([1, 2, 3, 4, 5]), now=NOW)
    for key, status in [("n8n:1", "failed"), ("n8n:2", "failed"), ("n8n:3", "invalid")]:
        q.conn.execute("UPDATE jobs SET status = ?, attempts = 3, finished_at = ? WHERE key = ?", (status, NOW, key))
    q.conn.execute("UPDATE jobs SET status = 'done', attempts = 1, finished_at = ? WHERE key = 'n8n:4'", (NOW,))
    return q


def statuses(q):
    return {r["key"]: (r["status"], r["attempts"]) for r in q.conn.execute("SELECT key, status, attempts FROM jobs")}


def test_retry_failed_moves_only_failed_rows(finished):
    assert finished.retry(("failed",), now=NOW + 5) == 2
    assert statuses(finished) == {
        "n8n:1": ("pending", 0), "n8n:2": ("pending", 0), "n8n:3": ("invalid", 3),
        "n8n:4": ("done", 1), "n8n:5": ("pending", 0)}
    row = job_row(finished, "n8n:1")
    assert row["available_at"] == NOW + 5 and row["finished_at"] is None


def test_retry_invalid_moves_only_invalid_rows(finished):
    assert finished.retry(("invalid",), now=NOW) == 1
    assert statuses(finished)["n8n:3"] == ("pending", 0)
    assert statuses(finished)["n8n:1"] == ("failed", 3)


def test_retry_failed_and_invalid_never_touches_done(finished):
    assert finished.retry(("failed", "invalid"), now=NOW) == 3
    assert finished.counts() == {"pending": 4, "running": 0, "done": 1, "failed": 0, "invalid": 0}


def test_counts_has_every_status(q):
    assert q.counts() == {"pending": 0, "running": 0, "done": 0, "failed": 0, "invalid": 0}
    q.seed(job_rows([1, 2]), now=NOW)
    q.claim("w1", NOW, LEASE)
    assert q.counts() == {"pending": 1, "running": 1, "done": 0, "failed": 0, "invalid": 0}


def test_finished_since_counts_every_finished_row_from_a_time(q):
    q.seed(job_rows([1, 2, 3, 4]), now=NOW)
    for t, how in [(NOW + 10, "done"), (NOW + 20, "failed"), (NOW + 30, "pending")]:
        job = q.claim("w1", t, LEASE)
        if how == "done":
            q.complete(job, "w1", t, 1)
        else:
            q.fail(job, "w1", t, how, "network", "x", available_at=t + 100)
    assert q.finished_since(NOW) == 2
    assert q.finished_since(NOW + 10) == 2
    assert q.finished_since(NOW + 11) == 1
    assert q.finished_since(NOW + 21) == 0       # a scheduled retry has not finished


# --- the breaker and the 429 pause inside claim --------------------------------------------------

def open_domain(q, domain, open_until):
    q.update_domain(domain, lambda b: breaker.Breaker(breaker.OPEN, 10, open_until), NOW)


def test_an_open_domain_yields_no_job(q):
    q.seed(job_rows([1, 2]), now=NOW)
    open_domain(q, DOMAIN, NOW + 60)
    assert q.claim("w1", NOW, LEASE) is None
    assert q.claim("w1", NOW + 59.9, LEASE) is None


def test_an_open_domain_does_not_block_other_domains(q):
    q.seed(job_rows([1]) + job_rows([2], domain="other.test"), now=NOW)
    open_domain(q, DOMAIN, NOW + 60)
    assert q.claim("w1", NOW, LEASE).domain == "other.test"
    assert q.claim("w1", NOW, LEASE) is None


def test_after_open_until_exactly_one_probe_is_handed_out(q):
    q.seed(job_rows([1, 2, 3]), now=NOW)
    open_domain(q, DOMAIN, NOW + 60)
    probe = q.claim("w1", NOW + 60, LEASE)
    assert probe is not None and probe.probe
    assert q.claim("w2", NOW + 60, LEASE) is None
    assert q.claim("w3", NOW + 61, LEASE) is None
    b = q.domains()[DOMAIN]
    assert b.state == breaker.HALF_OPEN and b.probe_until == NOW + 60 + LEASE


def test_a_dead_probe_lets_another_probe_through_after_its_lease(q):
    q.seed(job_rows([1, 2]), now=NOW)
    open_domain(q, DOMAIN, NOW + 60)
    q.claim("w1", NOW + 60, LEASE)
    later = q.claim("w2", NOW + 60 + LEASE, LEASE)
    assert later is not None and later.probe


def test_a_closed_domain_after_the_probe_gives_jobs_again(q):
    q.seed(job_rows([1, 2, 3]), now=NOW)
    open_domain(q, DOMAIN, NOW + 60)
    probe = q.claim("w1", NOW + 60, LEASE)
    q.update_domain(DOMAIN, breaker.on_success, NOW + 61)
    q.complete(probe, "w1", NOW + 61, 1)
    assert [q.claim("w1", NOW + 61, LEASE).probe for _ in range(2)] == [False, False]


def test_a_paused_domain_yields_no_job(q):
    q.seed(job_rows([1]), now=NOW)
    q.update_domain(DOMAIN, lambda b: breaker.on_429(b, NOW, 7.0, 1.0, 300.0), NOW)
    assert q.domains()[DOMAIN].paused_until == NOW + 7
    assert q.claim("w1", NOW, LEASE) is None
    assert q.claim("w1", NOW + 6.9, LEASE) is None
    assert q.claim("w1", NOW + 7, LEASE).key == "n8n:1"


def test_domain_state_survives_in_the_database(db, q):
    open_domain(q, DOMAIN, NOW + 60)
    other = store.connect(db)
    assert Queue(other).domains()[DOMAIN] == breaker.Breaker(breaker.OPEN, 10, NOW + 60)
    other.close()


def test_the_hot_path_sends_postgresqls_own_text_untranslated(pg_migrated_url):
    """claim, heartbeat, complete, fail and release are written in both dialects (db/dialect.Sql): on
    PostgreSQL none of their statements goes through the translation by pattern."""
    conn = store.connect(pg_migrated_url)
    q = Queue(conn, run_id=runrecord.start_run(conn, 1, NOW, 1, "{}"))
    q.seed(job_rows([1, 2, 3]), now=NOW)
    dialect.translate.cache_clear()
    first = q.claim("w", NOW, LEASE)
    assert q.heartbeat(first, "w", NOW, LEASE) and q.complete(first, "w", NOW, 5)
    second = q.claim("w", NOW, LEASE)
    assert q.fail(second, "w", NOW, "failed", "http_5xx", "boom", http_status=503)
    third = q.claim("w", NOW, LEASE)
    assert q.release(third, "w", NOW)
    calls = dialect.translate.cache_info()
    assert calls.hits + calls.misses == 0
    assert [job_row(q, f"n8n:{i}")["status"] for i in (1, 2, 3)] == ["done", "failed", "pending"]
    assert job_row(q, "n8n:3")["attempts"] == 0
    conn.close()


def test_jobs_check_constraint_refuses_an_unknown_status(q):
    q.seed(job_rows([1]), now=NOW)
    with pytest.raises(IntegrityError):
        q.conn.execute("UPDATE jobs SET status = 'lost'")


# --- kept counts (db/jobcounts.py, migration 22) -----------------------------------------------------------

def grouped(conn):
    """What the kept counts must equal: one GROUP BY over every job."""
    return sorted(tuple(r) for r in conn.execute(
        "SELECT site, source, domain, status, COUNT(*) FROM jobs GROUP BY site, source, domain, status"))


def test_counts_follow_every_change_of_a_job(q):
    q.seed(job_rows(range(1, 8)), now=NOW)
    q.seed([(f"yt:{i}", "youtube", f"https://y/{i}", "y.test", "videos") for i in range(3)], now=NOW)
    done, failed, invalid, released, kept = (q.claim(f"w{i}", NOW, LEASE) for i in range(5))
    q.complete(done, "w0", NOW + 1, 5)
    q.fail(failed, "w1", NOW + 1, "failed", "http_5xx", "HTTP 503")
    q.fail(invalid, "w2", NOW + 1, "invalid", "http_4xx", "HTTP 404")
    q.release(released, "w3", NOW + 1)
    q.retry(["invalid"], now=NOW + 2)
    counted = sorted(jobcounts.rows(q.conn))
    assert counted == grouped(q.conn)
    assert jobcounts.by_status(counted) == {"pending": 7, "running": 1, "done": 1, "failed": 1, "invalid": 0}
    assert jobcounts.by(counted, "source")["videos"]["pending"] == 3
    assert q.counts_by_site()["youtube"] == {"pending": 3, "running": 0, "done": 0, "failed": 0, "invalid": 0}
    assert job_row(q, kept.key)["status"] == "running"


def test_jobs_written_by_another_tool_are_counted(q):
    """Rows inserted, changed and deleted by plain SQL (sqlite-utils, a script) count as the queue's own."""
    q.seed(job_rows([1, 2, 3]), now=NOW)
    with store.transaction(q.conn) as c:
        c.execute("INSERT INTO jobs (key, site, url, domain, status, created_at, updated_at) "
                  "VALUES ('other:1', 'other', 'u', 'o.test', 'done', 0, 0)")
        c.execute("UPDATE jobs SET status = 'failed' WHERE key IN ('n8n:1', 'other:1')")
        c.execute("DELETE FROM jobs WHERE key = 'n8n:2'")
    assert sorted(jobcounts.rows(q.conn)) == grouped(q.conn)
    q.seed(job_rows([4]), now=NOW)             # takes the other tool's row into the kept counts
    with store.transaction(q.conn) as c:
        c.execute("DELETE FROM jobs WHERE key IN ('other:1', 'n8n:4')")
        c.execute("INSERT INTO jobs (key, site, url, domain, created_at, updated_at) "
                  "VALUES ('n8n:5', 'n8n', 'u', 'n8n.io', 0, 0)")
    assert sorted(jobcounts.rows(q.conn)) == grouped(q.conn) == [
        ("n8n", "n8n", "n8n.io", "failed", 1), ("n8n", "n8n", "n8n.io", "pending", 2)]


def test_an_id_is_never_used_twice():
    """The kept counts take the rows above the mark as new: a deleted last id must not come back."""
    conn = store.open_db(":memory:")
    q = Queue(conn)
    q.seed(job_rows([1, 2]), now=NOW)
    with store.transaction(conn) as c:
        c.execute("DELETE FROM jobs WHERE key = 'n8n:2'")
    q.seed(job_rows([3]), now=NOW)
    assert [r[0] for r in conn.execute("SELECT id FROM jobs ORDER BY id")] == [1, 3]
    assert sorted(jobcounts.rows(conn)) == grouped(conn) == [("n8n", "n8n", DOMAIN, "pending", 2)]
