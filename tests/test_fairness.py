"""Fair claims between domains (issue 21): the pure plan, the claim that follows it, the slot wait in
`status`, and the request log's new column on an older database."""


import pytest

from scraper.db import requestlog, store
from scraper.db.queue import Queue
from scraper.policy import fairness
from scraper.policy.fairness import Demand
from scraper.products import status

NOW = 1_700_000_000.0
N8N, YT, SLOW = Demand(0.0, 2.0, 1), Demand(0.0, 0.2, 3), Demand(0.0, 0.5, 1)


def test_a_transcript_counts_as_three_requests_and_a_job_in_flight_owes_them():
    assert YT.sleeps and not N8N.sleeps and not SLOW.sleeps
    assert fairness.ready_in_s(YT, 0) == 0.0
    assert fairness.ready_in_s(YT, 1) == pytest.approx(15.0)
    assert fairness.ready_in_s(Demand(0.25, 2.0, 1), 2) == pytest.approx(1.25)


def test_the_plan_keeps_workers_on_domains_that_can_send_soon():
    demands = {"n8n.io": N8N, "youtube.com": YT, "slow.test": SLOW}
    p = fairness.plan(demands, {}, workers=4)
    assert p.now == ("n8n.io", "slow.test", "youtube.com") and p.later == () and p.held == ()
    # one transcript in flight: youtube takes no second job, even with its slot free
    p = fairness.plan(demands, {"youtube.com": 1, "n8n.io": 2, "slow.test": 1}, workers=4)
    assert p.now == ("n8n.io",) and p.later == () and p.held == ()
    # n8n's slot is 0.4 s off with two in flight: 1.4 s, not ready; it already has jobs, so none later
    p = fairness.plan({"n8n.io": Demand(0.4, 2.0, 1), "slow.test": SLOW}, {"n8n.io": 2}, workers=4)
    assert p.now == ("slow.test",) and p.later == ()
    # a domain that must wait and has nothing in flight comes later, soonest first
    p = fairness.plan({"youtube.com": Demand(4.0, 0.2, 3), "slow.test": Demand(1.5, 0.5, 1)}, {}, workers=4)
    assert p.now == () and p.later == ("slow.test", "youtube.com")


def test_domains_whose_jobs_sleep_never_take_every_worker():
    many = {f"slow{i}.test": Demand(0.0, 0.2, 3) for i in range(6)} | {"n8n.io": N8N}
    p = fairness.plan(many, {"slow0.test": 1, "slow1.test": 1, "slow2.test": 1}, workers=4)
    assert p.now == ("n8n.io",) and p.later == ()
    assert p.held == ("slow3.test", "slow4.test", "slow5.test")      # only when nothing else is runnable
    assert fairness.plan(many, {"slow0.test": 1}, workers=4).now == ("n8n.io", "slow1.test", "slow2.test",
                                                                      "slow3.test", "slow4.test", "slow5.test")
    assert fairness.plan({"youtube.com": YT, "n8n.io": N8N}, {}, workers=1).held == ("youtube.com",)


@pytest.fixture
def q(tmp_path):
    queue = Queue(store.open_db(str(tmp_path / "jobs.db")))
    yield queue
    queue.conn.close()


def seed(q, domain, n, priority=0):
    q.seed([(f"{domain}:{i}", "x", "u", domain) for i in range(n)], now=NOW - 10)
    q.conn.execute("UPDATE jobs SET priority = ? WHERE domain = ?", (priority, domain))


def test_priority_orders_claims_between_domains_that_can_both_send(q):
    seed(q, "n8n.io", 3)
    seed(q, "youtube.com", 3, priority=1)
    demands = {"n8n.io": N8N, "youtube.com": YT}
    claimed = [q.claim(f"w{i}", NOW, 60, demands=demands, workers=4) for i in range(4)]
    # the child job first (priority 1), then youtube owes 15 s: every other worker serves n8n
    assert [j.domain for j in claimed] == ["youtube.com", "n8n.io", "n8n.io", "n8n.io"]
    assert q.in_flight() == {"youtube.com": 1, "n8n.io": 3}


def test_the_held_domain_gets_a_worker_when_nothing_else_is_runnable(q):
    seed(q, "youtube.com", 2, priority=1)
    demands = {"n8n.io": N8N, "youtube.com": YT}
    assert q.claim("w0", NOW, 60, demands=demands, workers=1).domain == "youtube.com"
    assert q.claim("w1", NOW, 60, demands=demands, workers=1) is None


def test_a_paused_domain_is_never_claimed_even_when_ready(q):
    seed(q, "youtube.com", 1)
    q.conn.execute("INSERT INTO domains (domain, state, failures, open_until, probe_until, paused_until, pause_s, "
                   "updated_at) VALUES ('youtube.com', 'closed', 0, 0, 0, ?, 1, ?)", (NOW + 30, NOW))
    assert q.claim("w0", NOW, 60, demands={"n8n.io": N8N, "youtube.com": YT}, workers=4) is None


def test_status_shows_each_domains_jobs_in_flight_and_slot_wait(q):
    seed(q, "youtube.com", 2)
    q.claim("w0", NOW, 60)
    requestlog.record(q.conn, NOW - 5, "youtube.com", "ok", 200, 40, slot_wait_s=4.5)
    requestlog.record(q.conn, NOW - 2, "youtube.com", "ok", 200, 40, slot_wait_s=5.0)
    requestlog.record(q.conn, NOW - 90, "n8n.io", "ok", 200, 40, slot_wait_s=9.0)     # older than the minute
    report = status.report(q, NOW)
    assert report["domains"]["youtube.com"]["in_flight"] == 1
    assert report["domains"]["youtube.com"]["slot_wait_s"] == 9.5
    assert "n8n.io" not in report["domains"]
    assert "youtube.com: 1 in flight, 9.5 s waiting for its slot" in status.render(report)


def test_the_request_log_of_an_older_database_gains_the_slot_wait_column(tmp_path):
    path = str(tmp_path / "old.db")
    conn = store.connect(path)
    store.migrate(conn, store.SCHEMA_VERSION - 1)
    conn.execute("INSERT INTO requests (at, domain, kind, status, ms) VALUES (1, 'n8n.io', 'ok', 200, 40)")
    conn.commit()
    conn.close()
    conn = store.open_db(path)
    assert [tuple(r) for r in conn.execute("SELECT at, domain, ms, slot_wait_ms FROM requests")] == \
        [(1.0, "n8n.io", 40, 0)]
    conn.close()


def test_a_worker_gives_the_claim_each_domains_rate_and_requests_per_job(tmp_path):
    from scraper.base import settings
    from scraper.politeness import limiter
    from scraper.pool import worker

    s = settings.build(db_path=str(tmp_path / "jobs.db"), api_url="http://127.0.0.1:9/api",
                       site_url="http://127.0.0.1:9", youtube_url="http://127.0.0.1:9", with_page=True,
                       transcripts=True)
    conn = store.open_db(s.db_path)
    w = worker.Worker(s, "w1", Queue(conn), limiter.NoLimiter(), None)
    assert w._demands() == {"127.0.0.1": Demand(0.0, 2.0, 2), "youtube.com": Demand(0.0, 0.2, 3)}
    w = worker.Worker(settings.build(db_path=s.db_path, transcripts=False), "w2", Queue(conn), limiter.NoLimiter(),
                      None)
    assert w._demands() is None         # one domain: claims as before
    conn.close()
