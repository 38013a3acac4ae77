"""Issue 44, a frozen worker: a real worker process stopped (SIGSTOP) for twice its lease while it holds a job,
then resumed (SIGCONT). Its job is taken and done by another, its late write refused (every job write is
fenced: `WHERE worker = ? AND status = 'running'`) and logged once, one stored version per template, and the
supervisor, which saw it stop beating, put a new worker in its place."""

import os
import signal
import time

import psutil
import pytest

from tests.helpers import in_process, jobs_in, rows, start_scraper, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.slow]

LEASE_S = 1.0


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


def test_a_worker_frozen_past_its_lease_is_fenced_and_replaced(standin, tmp_path):
    site = standin(templates=30, latency_ms=100)
    db = tmp_path / "jobs.db"
    in_process(site, db, "seed", "--from-search", check=0)
    run = start_scraper(site, db, "run", "--workers", "2", "--inflight", "1", "--rate", "20", "--burst", "5",
                        "--lease", str(LEASE_S), "--timeout", "0.5")
    try:
        wait_until(lambda: jobs_in(db, "done") >= 3)
        pid, name, key = freeze_one_holding_a_job(run, db)
        stopped_at = time.monotonic()
        # its job, back with the lease sweep, is done by another worker while it is frozen
        wait_until(lambda: rows(db, "SELECT status, worker FROM jobs WHERE key = ?", key)[0]["status"] == "done",
                   timeout=10)
        time.sleep(max(0.0, 2 * LEASE_S - (time.monotonic() - stopped_at)))
        os.kill(pid, signal.SIGCONT)
        assert run.wait(30) == 0
    finally:
        run.kill()
    stderr = run.stderr.read()
    print(f"froze {name} holding {key} for {time.monotonic() - stopped_at:.1f} s (the lease: {LEASE_S:g} s);",
          [ln[24:] for ln in stderr.splitlines() if name in ln])
    assert "Traceback" not in stderr
    replaced = [ln for ln in stderr.splitlines() if f"{name} stopped beating" in ln]
    assert len(replaced) == 1 and "takes its place" in replaced[0] and "no worker" not in replaced[0]
    late = [ln for ln in stderr.splitlines() if f"{name} lost the lease of {key}" in ln]
    assert len(late) == 1, stderr[-3000:]
    assert f"{name}, replaced while frozen, woke and stopped" in stderr
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    # one stored version per template, every job done
    assert jobs_in(db, "done") == 30
    assert rows(db, "SELECT COUNT(*) AS n FROM workflows")[0]["n"] == 30
    assert rows(db, "SELECT COUNT(*) AS n FROM answers WHERE source = 'n8n' AND kind = 'api' AND version > 1"
                ) == [{"n": 0}]
