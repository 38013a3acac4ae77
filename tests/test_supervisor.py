"""The pool under real processes and real signals; the network is the stand-in site."""

import os
import signal
import time

import psutil
import pytest

from tests.helpers import (
    in_process,
    jobs_in,
    rows,
    run_on_a_terminal,
    scraper,
    scraper_env,
    start_scraper,
    status_json,
    wait_until,
)

pytestmark = pytest.mark.slow


def seeded(standin, tmp_path, templates=60, **site_options):
    site = standin(templates=templates, **site_options)
    db = tmp_path / "jobs.db"
    in_process(site, db, "seed", "--from-search", check=0)
    return site, db


def workers_of(proc):
    return [c for c in psutil.Process(proc.pid).children() if c.status() != psutil.STATUS_ZOMBIE]


def assert_each_template_once(site, db):
    ids = sorted(site.corpus()["ids"])
    stored = rows(db, "SELECT id FROM workflows ORDER BY id")
    assert [r["id"] for r in stored] == ids
    assert jobs_in(db, "done") == len(ids)
    assert jobs_in(db, "running") == 0 and jobs_in(db, "pending") == 0


@pytest.mark.timing
def test_four_workers_never_exceed_the_servers_limit(standin, tmp_path):
    site, db = seeded(standin, tmp_path, templates=120, rate=20, burst=5, latency_ms=40)   # 6 s at the limit
    # three jobs in flight in each worker: twelve takers of the one shared slot
    done = scraper(site, db, "run", "--workers", "4", "--inflight", "3", "--rate", "20", "--burst", "5")
    assert done.returncode == 0, done.stderr[-2000:]
    stats = site.stats()
    assert stats["http_429"] == 0
    assert stats["max_in_1s"] <= 20 + 5
    assert_each_template_once(site, db)
    assert "progress" in done.stderr     # not a terminal: periodic log lines


def test_a_second_run_on_the_same_database_exits_75(standin, tmp_path):
    site, db = seeded(standin, tmp_path, rate=5, burst=1)
    first = start_scraper(site, db, "run", "--workers", "1", "--rate", "5", "--burst", "1")
    try:
        wait_until(lambda: jobs_in(db, "done") > 0)
        second = scraper(site, db, "run", timeout=20)
        assert second.returncode == 75
        assert "another `scraper run`" in second.stderr and "Traceback" not in second.stderr
        assert status_json(site, db)["total"] == 60        # status works beside a run
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(20) == 143


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_hands_back_jobs_and_exits(standin, tmp_path, sig, code):
    site, db = seeded(standin, tmp_path, rate=10, burst=2, latency_ms=200)
    proc = start_scraper(site, db, "run", "--workers", "4", "--rate", "10", "--burst", "2")
    wait_until(lambda: jobs_in(db, "done") >= 5)
    proc.send_signal(sig)
    assert proc.wait(15) == code
    assert "next: run again to resume" in proc.stderr.read().strip().splitlines()[-1]
    assert jobs_in(db, "running") == 0
    assert jobs_in(db, "done") + jobs_in(db, "pending") == 60
    assert rows(db, "SELECT exit_code FROM runs")[-1]["exit_code"] == code
    # what was stored is what was done, once
    assert len(rows(db, "SELECT id FROM workflows")) == jobs_in(db, "done")


def test_a_second_ctrl_c_stops_at_once(standin, tmp_path):
    site, db = seeded(standin, tmp_path, rate=50, burst=5)
    site.slow(factor=1, seconds=600, base_ms=20000)     # from now on every answer hangs (the listing did not)
    proc = start_scraper(site, db, "run", "--workers", "2", "--rate", "50", "--timeout", "60")
    wait_until(lambda: jobs_in(db, "running") >= 2)    # each worker keeps several in flight
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    code = proc.wait(4)                 # well before the 5 s grace and the 20 s answers
    assert code == 130, proc.stderr.read()[-3000:]
    assert jobs_in(db, "running") == 0 and jobs_in(db, "pending") == 60


def test_a_killed_worker_loses_nothing(standin, tmp_path):
    site, db = seeded(standin, tmp_path, templates=150, rate=40, burst=5, latency_ms=30)
    proc = start_scraper(site, db, "run", "--workers", "4", "--rate", "40", "--burst", "5")
    wait_until(lambda: jobs_in(db, "done") >= 30)
    victim = wait_until(lambda: next((w for w in workers_of(proc)
                                      if rows(db, "SELECT 1 FROM jobs WHERE status='running' AND worker LIKE ?",
                                              f"%-{w.pid}")), None))
    victim.kill()
    # within about a second its job is back and a replacement runs
    wait_until(lambda: not rows(db, "SELECT 1 FROM jobs WHERE status='running' AND worker LIKE ?",
                                f"%-{victim.pid}"), timeout=2)
    wait_until(lambda: len(workers_of(proc)) == 4 and victim.pid not in [w.pid for w in workers_of(proc)],
               timeout=2)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert "died" in err
    assert_each_template_once(site, db)


def test_a_worker_keeps_several_jobs_in_flight_and_a_hanging_answer_holds_back_none_of_the_others(standin, tmp_path):
    # one worker, four lanes; two templates answer only after 3 s (and a 1 s timeout ends them), once each
    site, db = seeded(standin, tmp_path, templates=40, rate=40, burst=5, latency_ms=20, faults="slow:0.05",
                      slow_s=3.0)
    hung = [int(t) for t, f in site.corpus()["faults"].items() if f["kind"] == "slow"]
    assert hung
    done = scraper(site, db, "run", "--workers", "1", "--inflight", "4", "--rate", "40", "--timeout", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert_each_template_once(site, db)
    # while each hanging answer was awaited (up to its 1 s timeout), the worker's other lanes got answers
    timeouts = rows(db, "SELECT at, ms FROM requests WHERE kind = 'timeout' ORDER BY at")
    assert len(timeouts) == len(hung)
    for t in timeouts:
        began = t["at"] - t["ms"] / 1000
        others = rows(db, "SELECT COUNT(*) AS n FROM requests WHERE kind = 'ok' AND at > ? AND at < ?",
                      began, t["at"])[0]["n"]
        assert others >= 5, (t, others)     # one lane alone would have none


def test_a_killed_worker_with_several_jobs_in_flight_loses_and_doubles_nothing(standin, tmp_path):
    site, db = seeded(standin, tmp_path, templates=120, rate=40, burst=5, latency_ms=150)
    proc = start_scraper(site, db, "run", "--workers", "2", "--inflight", "4", "--rate", "40", "--burst", "5")
    victim = wait_until(lambda: next((w for w in workers_of(proc)
                                      if len(rows(db, "SELECT 1 FROM jobs WHERE status='running' AND worker LIKE ?",
                                                  f"%-{w.pid}")) >= 2), None))
    victim.kill()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert "died" in err
    assert_each_template_once(site, db)


def test_a_killed_supervisor_is_resumed_by_the_next_run(standin, tmp_path):
    site, db = seeded(standin, tmp_path, templates=100, rate=40, burst=5, latency_ms=100)
    proc = start_scraper(site, db, "run", "--workers", "4", "--rate", "40", "--burst", "5")
    wait_until(lambda: jobs_in(db, "done") >= 20 and jobs_in(db, "running") > 0)
    family = [proc.pid] + [w.pid for w in workers_of(proc)]
    for pid in family:
        os.kill(pid, signal.SIGKILL)
    proc.wait(10)
    assert jobs_in(db, "running") > 0                       # left behind, as after a power cut
    again = scraper(site, db, "run", "--workers", "4", "--rate", "40", "--burst", "5")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "took back" in again.stderr
    assert_each_template_once(site, db)


def test_a_503_storm_opens_the_breaker_then_the_run_finishes(standin, tmp_path):
    site, db = seeded(standin, tmp_path, templates=80, rate=50, burst=5, latency_ms=10)
    proc = start_scraper(site, db, "run", "--workers", "4", "--rate", "50", "--burst", "5",
                         "--breaker-failures", "5", "--breaker-open", "1", "--max-attempts", "6",
                         "--backoff-base", "0.2")
    wait_until(lambda: jobs_in(db, "done") >= 10)
    site.storm(2.5)
    # the breaker leaves `closed` during the storm (wait_until raises if it never does)
    state = wait_until(lambda: (s := status_json(site, db)["domains"]["127.0.0.1"]["state"]) != "closed" and s)
    assert state in ("open", "half_open")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert "breaker of 127.0.0.1 open" in err and "closed (was half_open)" in err
    assert_each_template_once(site, db)
    # the breaker kept the storm short: a handful of 503s, not one per job and retry
    assert site.stats()["by_status"].get("503", 0) <= 5 + 4 + 6
    assert status_json(site, db)["domains"]["127.0.0.1"]["state"] == "closed"


@pytest.mark.cold        # PSS of a new interpreter
def test_a_small_memory_share_recycles_workers_and_the_run_completes(standin, tmp_path):
    site, db = seeded(standin, tmp_path, templates=120, rate=50, burst=5, latency_ms=50)
    # the ceiling counts PSS: a worker holds 10-16 MB of it, the supervisor about as much
    done = scraper(site, db, "run", "--workers", "3", "--rate", "50", "--memory-limit", "56")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "over --memory-limit" in done.stderr
    assert_each_template_once(site, db)


def test_workers_recycle_after_their_quota_of_jobs(standin, tmp_path):
    site, db = seeded(standin, tmp_path, templates=30, rate=100, burst=5)
    done = scraper(site, db, "run", "--workers", "2", "--rate", "100", "--max-jobs-per-worker", "4")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.count("recycling after 4 jobs") >= 5
    assert_each_template_once(site, db)


def test_workers_that_cannot_start_end_the_run_with_70_not_a_spin(standin, tmp_path):
    site, db = seeded(standin, tmp_path, templates=10)
    for leftover in tmp_path.glob("jobs.db-limiter*"):
        leftover.unlink()
    (tmp_path / "jobs.db-limiter").mkdir()          # the shared bucket cannot be opened
    done = scraper(site, db, "run", "--workers", "2", timeout=60)
    assert done.returncode == 70, done.stderr[-2000:]
    assert "cannot start" in done.stderr and "giving up" in done.stderr
    assert "Traceback" not in done.stderr
    assert jobs_in(db, "running") == 0 and jobs_in(db, "pending") == 10


def test_on_a_terminal_the_run_draws_a_progress_bar(standin, tmp_path):
    site, db = seeded(standin, tmp_path, templates=30, rate=50, burst=5, latency_ms=20)
    code, text = run_on_a_terminal(["--log-level", "WARNING", "run", "--rate", "50"], scraper_env(site, db))
    assert code == 0
    assert "\r[" in text and "30/30 (100%)" in text and "ETA" in text and "/min" in text


@pytest.mark.timing
def test_the_defaults_hold_n8n_io_s_limit_of_2_per_second_with_burst_5(standin, tmp_path):
    site, db = seeded(standin, tmp_path, templates=16, rate=2, burst=5)
    site_stats_before = site.stats()["requests"]
    done = scraper(site, db, "run")                       # no --rate, no --burst, 4 workers
    assert done.returncode == 0, done.stderr[-2000:]
    stats = site.stats()
    assert stats["http_429"] == 0
    assert stats["requests"] - site_stats_before == 16
    assert stats["max_in_1s"] <= 2 + 5
    assert_each_template_once(site, db)
