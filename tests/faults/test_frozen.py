"""Issue 44, a frozen worker: a real worker process stopped (SIGSTOP) for twice its lease while it holds a job,
then resumed (SIGCONT). Its job is taken and done by another, its late write refused (every job write is
fenced: `WHERE worker = ? AND status = 'running'`) and logged once, one stored version per template, and the
supervisor, which saw it stop beating, put a new worker in its place."""

import json
import os
import signal
import time
from types import SimpleNamespace

import psutil
import pytest

from scraper.db import holders, store
from scraper.db.queue import Queue
from scraper.sites import n8n
from tests.helpers import API, DOMAIN, SITE, in_process, jobs_in, rows, start_scraper, wait_until

pytestmark = pytest.mark.faults

LEASE_S = 0.5
NO_SITE = SimpleNamespace(api_url=API, url=SITE)     # the in-process status reads the database only


def stop(run):
    """The run and its workers gone, whatever the test did: a worker left frozen by a failed test would
    outlive its supervisor (frozen, it cannot notice it is gone); SIGKILL ends a stopped process too."""
    try:
        workers = psutil.Process(run.pid).children()
    except psutil.Error:
        workers = []
    run.kill()
    run.wait()
    for w in workers:
        try:
            w.kill()
        except psutil.Error:
            pass


def integrity(db):
    return rows(db, "PRAGMA integrity_check")[0]["integrity_check"]


def held_by(db, name):
    return [r["key"] for r in rows(db, "SELECT key FROM jobs WHERE status = 'running' AND worker = ?", name)]


def freeze_one_holding_a_job(run, db):
    """SIGSTOP a worker of `run` while it holds a job: (pid, worker name, the job's key)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for r in rows(db, "SELECT worker FROM jobs WHERE status = 'running'"):
            pid = int(r["worker"].split("-")[1])
            if pid not in {c.pid for c in psutil.Process(run.pid).children()}:
                continue
            os.kill(pid, signal.SIGSTOP)
            keys = held_by(db, r["worker"])
            if keys:
                return pid, r["worker"], keys[0]
            os.kill(pid, signal.SIGCONT)       # it finished that job meanwhile: another try
        time.sleep(0.01)
    raise AssertionError("no worker was seen holding a job")


@pytest.mark.slow
@pytest.mark.timing     # a 0.5 s lease against the scheduler: on a loaded machine a worker can be late for it
def test_a_worker_frozen_past_its_lease_is_fenced_and_replaced(standin, tmp_path):
    site = standin(templates=24, latency_ms=100)
    db = tmp_path / "jobs.db"
    in_process(site, db, "seed", "--from-search", check=0)
    # 2 s of work at 12/s: the run outlasts the freeze, and the woken worker has time to write late
    run = start_scraper(site, db, "run", "--workers", "2", "--inflight", "1", "--rate", "12", "--burst", "2",
                        "--lease", str(LEASE_S), "--timeout", "0.4")
    try:
        wait_until(lambda: jobs_in(db, "done") >= 3)
        before = {c.pid for c in psutil.Process(run.pid).children()}
        pid, name, key = freeze_one_holding_a_job(run, db)
        stopped_at = time.monotonic()
        # its job, back with the lease sweep, is done by another worker while it is frozen, and a new worker
        # takes its place (the supervisor looks once a second: silent for a lease, it is replaced)
        wait_until(lambda: rows(db, "SELECT status, worker FROM jobs WHERE key = ?", key)[0]["status"] == "done",
                   timeout=10)
        wait_until(lambda: {c.pid for c in psutil.Process(run.pid).children()} - before, timeout=10)
        time.sleep(max(0.0, 2 * LEASE_S - (time.monotonic() - stopped_at)))
        os.kill(pid, signal.SIGCONT)
        assert run.wait(30) == 0
    finally:
        stop(run)
    stderr = run.stderr.read()
    print(f"froze {name} holding {key} for {time.monotonic() - stopped_at:.1f} s (the lease: {LEASE_S:g} s);",
          [ln[24:] for ln in stderr.splitlines() if name in ln])
    assert "Traceback" not in stderr
    replaced = [ln for ln in stderr.splitlines() if f"{name} stopped beating" in ln]
    assert len(replaced) == 1 and "takes its place" in replaced[0] and "no worker" not in replaced[0], stderr
    # woken in its request (the result refused) or in its wait for a rate slot (the hand-back refused)
    late = [ln for ln in stderr.splitlines() if name in ln and key in ln and ln.split(" ", 3)[2] != "DEBUG"]
    assert len(late) == 1 and f"{name} lost the lease of {key}" in late[0], stderr[-3000:]
    # gone: it woke and stopped, or it was still finishing as the run ended and was killed
    assert f"{name}, replaced while frozen, woke and stopped" in stderr or \
        f"{name}, replaced while frozen, killed at the run's end" in stderr
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    # one stored version per template, every job done
    assert jobs_in(db, "done") == 24
    assert rows(db, "SELECT COUNT(*) AS n FROM workflows")[0]["n"] == 24
    assert rows(db, "SELECT COUNT(*) AS n FROM answers WHERE source = 'n8n' AND kind = 'api' AND version > 1"
                ) == [{"n": 0}]


def test_status_names_the_workers_holding_jobs_past_their_lease(tmp_path):
    db = tmp_path / "jobs.db"
    conn = store.open_db(str(db))
    q = Queue(conn)
    q.seed([(n8n.job_key(i), n8n.SITE, n8n.page_url(SITE, i), DOMAIN) for i in (1, 2)], now=time.time() - 100)
    q.claim("w0-4242", time.time() - 50, 10.0)     # its lease ran out 40 s ago
    conn.close()
    report = json.loads(in_process(NO_SITE, db, "status", "--json", check=0).stdout)["database"]
    text = in_process(NO_SITE, db, "status", check=0).stdout
    print(report["past_lease"], [ln for ln in text.splitlines() if ln.startswith("lease")])
    assert report["past_lease"] == ["w0-4242"]
    assert "lease     w0-4242 hold(s) jobs past their lease (frozen or stuck)" in text


def freeze_one_holding_the_write_lock(run, db):
    """SIGSTOP a worker of `run` caught holding the database's write lock: (pid, worker name)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        workers = {c.pid for c in psutil.Process(run.pid).children()}
        for h in holders.holders(str(db)):
            if h.pid in workers and h.holds == holders.WRITER:
                os.kill(h.pid, signal.SIGSTOP)
                if any(g.pid == h.pid and g.holds == holders.WRITER for g in holders.holders(str(db))):
                    return h.pid
                os.kill(h.pid, signal.SIGCONT)      # it let go meanwhile: another try
    raise AssertionError("no worker was caught holding the write lock")


@pytest.mark.slow
@pytest.mark.timing     # a 0.5 s lease against the scheduler: on a loaded machine a worker can be late for it
def test_a_worker_frozen_holding_the_write_lock_is_killed_and_the_run_goes_on(standin, tmp_path):
    site = standin(templates=20, latency_ms=20)
    db = tmp_path / "jobs.db"
    in_process(site, db, "seed", "--from-search", check=0)
    run = start_scraper(site, db, "run", "--workers", "2", "--inflight", "1", "--rate", "20", "--burst", "5",
                        "--lease", str(LEASE_S), "--timeout", "0.4")
    try:
        wait_until(lambda: jobs_in(db, "done") >= 2)
        pid = freeze_one_holding_the_write_lock(run, db)
        frozen_at = time.monotonic()
        # every writer waits on it; the supervisor kills it once it has been silent for a lease
        wait_until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
                   timeout=10)
        freed = time.monotonic() - frozen_at
        assert run.wait(30) == 0
    finally:
        stop(run)
    stderr = run.stderr.read()
    said = [ln[24:] for ln in stderr.splitlines() if "holding the database's write lock" in ln]
    print(f"a worker frozen holding the write lock was killed after {freed:.1f} s (the lease: {LEASE_S:g} s):", said)
    assert len(said) == 1 and "killed, its jobs go back" in said[0], stderr[-3000:]
    assert "Traceback" not in stderr
    assert jobs_in(db, "done") == 20 and rows(db, "SELECT COUNT(*) AS n FROM workflows")[0]["n"] == 20
    assert rows(db, "SELECT COUNT(*) AS n FROM jobs WHERE error_kind IS NOT NULL")[0]["n"] == 0
    assert integrity(db) == "ok"
