"""The ETL API (issue 41, item 5): a run reports to `etl_url` from the outbox as the source system does (one
ETL run per run, created with its items under an idempotency key, batched item updates, finalized with counts
that add up), continues an unfinished run after a kill -9, reads both field spellings, and takes a hostile
answer as a failed attempt; against the stand-in (scripts/standin/etl.py) on 127.0.0.1, on both backends."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from scraper.base import settings as settings_mod
from scraper.db import deliveries, runrecord, store
from scraper.db import etl as etl_db
from scraper.db.queue import Queue
from scraper.mirror import delivery, etl
from scraper.net import etl as etl_net
from scraper.products import status
from scripts.standin.etl import EtlApi
from tests.helpers import invoke, trickling_server

T0 = 1_780_000_000.0
KEY = "etl-secret-key-123"


def _seed(conn, n, source="n8n"):
    Queue(conn).seed([(f"{source}:{i}", source, f"http://site.test/t/{i}", "site.test") for i in range(n)], now=T0)


def _work(conn, run_id, done, failed=0, invalid=0, at=T0):
    """End jobs as a run's workers do: `done` done, then `failed` failed, then `invalid` invalid."""
    q = Queue(conn, run_id=run_id)
    for k in range(done + failed + invalid):
        job = q.claim("w1", at + k, 60)
        if k < done:
            assert q.complete(job, "w1", at + k, 5)
        else:
            status = "failed" if k < done + failed else "invalid"
            assert q.fail(job, "w1", at + k, status, "http" if status == "failed" else "gone",
                          "HTTP 500" if status == "failed" else "HTTP 404: removed", http_status=500)


def _settings(db, api):
    return settings_mod.build(db_path=db, etl_url=api.url, etl_key=KEY)


def _deliver(conn, s, now=T0 + 10_000):
    reporter = etl.Reporter.of(conn, s)
    return delivery.deliver(conn, [], clock=lambda: now, etl=(etl.endpoint(s), reporter))


@pytest.mark.parametrize("spelling", ["camel", "snake"])
def test_a_run_is_one_etl_run_with_batched_updates_and_counts_that_add_up(backend, spelling):
    conn = store.open_db(backend)
    with EtlApi(spelling=spelling, key=KEY) as api:
        s = _settings(backend, api)
        etl.begin(conn, s)
        _seed(conn, 250)
        run_id = runrecord.start_run(conn, 1, T0, 1, "{}", "host", ["n8n"])
        _work(conn, run_id, done=230, failed=15, invalid=5)
        runrecord.finish_run(conn, run_id, T0 + 300, {"done": 230, "failed": 15, "invalid": 5}, 1)
        made = _deliver(conn, s)
        again = _deliver(conn, s)           # nothing new: nothing sent, no second run
        state = api.snapshot()
    assert made and all(a["ok"] for a in made) and again == []
    (run,) = state["runs"]
    assert run["domain"] == "n8n" and run["status"] == "finished"
    statuses = [i["status"] for i in run["items"].values()]
    assert len(statuses) == 250 and statuses.count("done") == 230
    assert statuses.count("failed") == 15 and statuses.count("invalid") == 5
    assert run["items"]["n8n:240"]["reason"] == "http: HTTP 500"
    counts = run["counts"]
    assert counts == {"total": 250, "done": 230, "failed": 15, "invalid": 5}
    assert counts["done"] + counts["failed"] + counts["invalid"] == counts["total"]
    # batched: 250 updates in a few requests of at most 100
    assert state["counters"]["item_updates"] == 250 and state["counters"]["item_posts"] == 4
    assert state["counters"]["creates"] == 1 and state["counters"]["unauthorized"] == 0
    (shown,) = status.endpoints(conn, T0, s)          # `status --json` lists it beside the webhooks
    assert shown["url"] == api.url and shown["backlog"] == 0 and not shown["disabled"]
    conn.close()


def test_a_create_retried_after_a_timeout_makes_one_run_and_a_hostile_answer_fails_the_attempt(tmp_path):
    db = str(tmp_path / "jobs.db")
    conn = store.open_db(db)
    with EtlApi(spelling="snake") as api:
        s = settings_mod.build(db_path=db, etl_url=api.url)
        etl.begin(conn, s)
        _seed(conn, 3)
        run_id = runrecord.start_run(conn, 1, T0, 1, "{}", "host", ["n8n"])
        _work(conn, run_id, done=3)
        runrecord.finish_run(conn, run_id, T0 + 9, {"done": 3, "failed": 0, "invalid": 0}, 0)
        reporter = etl.Reporter(conn, etl_net.Client(api.url, timeout_s=0.3))
        ep = etl.endpoint(s)
        api.control(slow=1, slow_s=1.0, only="POST /runs")      # the create is made, its answer comes too late
        first = delivery.deliver_once(conn, [ep], T0, send=reporter.send, unit_random=lambda: 0.5)
        api.control(hostile=1, only="")
        second = delivery.deliver_once(conn, [ep], T0 + 10_000, send=reporter.send)
        third = delivery.deliver_once(conn, [ep], T0 + 20_000, send=reporter.send)
        state = api.snapshot()
    assert not first[0]["ok"] and "Timeout" in first[0]["error"]
    assert not second[0]["ok"] and second[0]["status"] is None and "not a run" in second[0]["error"]
    assert third[0]["ok"]
    (run,) = state["runs"]                          # one run, though the create was sent more than once
    assert run["status"] == "finished" and run["counts"]["done"] == 3
    assert deliveries.state(conn, ep.shown)["attempts"] == 0
    conn.close()


def test_done_items_go_at_each_progress_and_the_run_is_finalized_at_its_end(tmp_path):
    db = str(tmp_path / "jobs.db")
    conn = store.open_db(db)
    with EtlApi(spelling="camel") as api:
        s = settings_mod.build(db_path=db, etl_url=api.url)
        etl.begin(conn, s)
        _seed(conn, 5)
        run_id = runrecord.start_run(conn, 1, T0, 1, "{}", "host", ["n8n"])
        _work(conn, run_id, done=3)
        with store.transaction(conn) as c:
            runrecord.progress(c, run_id, T0 + 60)
        _deliver(conn, s)
        (running,) = api.snapshot()["runs"]
        _work(conn, run_id, done=1, invalid=1, at=T0 + 100)
        runrecord.finish_run(conn, run_id, T0 + 200, {"done": 4, "failed": 0, "invalid": 1}, 0)
        _deliver(conn, s)
        (finished,) = api.snapshot()["runs"]
    assert running["status"] == "running"
    assert sorted(k for k, v in running["items"].items() if v["status"] == "done") == ["n8n:0", "n8n:1", "n8n:2"]
    assert finished["status"] == "finished" and finished["items"]["n8n:4"]["status"] == "invalid"
    assert finished["counts"] == {"total": 5, "done": 4, "failed": 0, "invalid": 1}
    conn.close()


def test_the_etl_key_is_never_shown_nor_stored(tmp_path, monkeypatch):
    db = str(tmp_path / "jobs.db")
    store.open_db(db).close()
    monkeypatch.setenv("SCRAPER_ETL_KEY", KEY)
    monkeypatch.setenv("SCRAPER_ETL_URL", "http://127.0.0.1:9/api")
    shown = invoke("config", "--json", db=db)
    assert shown.exit_code == 0 and KEY not in shown.output and '"***"' in shown.output
    s = settings_mod.load()[0]
    assert s.etl_key.value == KEY and KEY not in repr(s)


SCRIPT = textwrap.dedent("""
    import sys, time
    from scraper.base import settings
    from scraper.db import runrecord, store
    from scraper.db.queue import Queue
    from scraper.pool import relay
    db, url, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    s = settings.build(db_path=db, etl_url=url)
    conn = store.open_db(db)
    with relay.beside(s):
        run_id = runrecord.start_run(conn, 1, time.time(), 1, "{}", "host", ["n8n"])
        q = Queue(conn, run_id=run_id)
        for k in range(n):
            job = q.claim("w1", time.time(), 60)
            q.complete(job, "w1", time.time(), 5)
        print("worked", flush=True)
        time.sleep(60)
""")


@pytest.mark.slow
def test_an_unfinished_run_is_continued_after_a_kill_9(tmp_path):
    """A run reporting beside itself is killed with SIGKILL; the next run continues its ETL run."""
    db = str(tmp_path / "jobs.db")
    conn = store.open_db(db)
    _seed(conn, 20)
    with EtlApi(spelling="camel") as api:
        proc = subprocess.Popen([sys.executable, "-c", SCRIPT, db, api.url, "8"], stdout=subprocess.PIPE, text=True,
                                cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        try:
            assert proc.stdout.readline().strip() == "worked"
            deadline = time.monotonic() + 10
            while not api.snapshot()["runs"] and time.monotonic() < deadline:
                time.sleep(0.05)        # the relay reports the run.started it sees (a real process: no clock)
            assert api.snapshot()["runs"], "the killed run's relay created no ETL run"
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait()
            proc.stdout.close()
        s = settings_mod.build(db_path=db, etl_url=api.url)
        run2 = runrecord.start_run(conn, 2, time.time(), 1, "{}", "host", ["n8n"])
        _work(conn, run2, done=12, at=time.time())
        runrecord.finish_run(conn, run2, time.time(), {"done": 20, "failed": 0, "invalid": 0}, 0)
        assert all(a["ok"] for a in _deliver(conn, s, time.time()))
        state = api.snapshot()
    (run,) = state["runs"]                                  # continued, not duplicated
    assert run["status"] == "finished" and len(run["items"]) == 20
    assert all(i["status"] == "done" for i in run["items"].values())
    assert run["counts"] == {"total": 20, "done": 20, "failed": 0, "invalid": 0}
    assert len({etl_db.mapped(conn, r, "n8n") for r in (1, run2)}) == 1
    conn.close()


def test_run_reports_beside_itself_with_the_key_and_stores_it_nowhere(tmp_path, monkeypatch):
    """`scraper run` (in-process): the relay reports the run before the command returns; the key is sent as
    a bearer token and is in no row of the database."""
    db = str(tmp_path / "jobs.db")
    conn = store.open_db(db)
    _seed(conn, 2)
    with EtlApi(spelling="snake", key=KEY) as api:
        monkeypatch.setenv("SCRAPER_ETL_URL", api.url)
        monkeypatch.setenv("SCRAPER_ETL_KEY", KEY)
        # both jobs are made invalid before the run: it has nothing to fetch, and ends at once
        conn.execute("UPDATE jobs SET status = 'invalid'")
        done = invoke("run", "--workers", "1", db=db)
        state = api.snapshot()
    assert done.exit_code == 0, done.output
    (run,) = state["runs"]
    assert run["status"] == "finished" and state["counters"]["unauthorized"] == 0
    dumped = "\n".join(str(tuple(r)) for t in ("runs", "webhook_endpoints", "deliveries", "etl_runs", "events")
                       for r in conn.execute(f"SELECT * FROM {t}"))
    assert KEY not in dumped and "etl_key" not in dumped
    conn.close()


HOSTILE_ANSWERS = [
    (b"\xff\xfe\x00not utf-8", "not JSON"),                               # not UTF-8
    (b'{"_id": ', "not JSON"),                                           # malformed
    (b'["a", "list"]', "not a run"),                                     # a wrong type
    (b'{"_id": {"nested": 1}, "status": 7}', "without a usable id"),       # wrong types inside
    (b"x" * (etl_net.ANSWER_MAX_BYTES + 10), "larger than"),             # huge
]


@pytest.mark.parametrize("body,said", HOSTILE_ANSWERS, ids=["not-utf8", "malformed", "list", "types", "huge"])
def test_a_hostile_answer_is_an_etl_error_with_a_reason_never_a_crash(body, said):
    import responses
    with responses.RequestsMock() as rsps:
        rsps.post("http://etl.test/runs", body=body, status=200, content_type="application/json")
        with pytest.raises(etl_net.EtlError) as caught:
            etl_net.Client("http://etl.test", timeout_s=2.0).create("n8n", [], "2026-11-27T10:00:00+00:00", "k")
    assert said in str(caught.value)


def test_an_answer_that_trickles_is_cut_at_the_calls_deadline():
    """Each byte within the timeout, the whole not: the call ends at its deadline with a reason."""
    started = time.monotonic()
    with trickling_server(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{") as url:
        with pytest.raises(etl_net.EtlError) as caught:
            etl_net.Client(url, timeout_s=1.0).latest("n8n")
    assert "no whole answer within 1 s" in str(caught.value) and time.monotonic() - started < 3.0
