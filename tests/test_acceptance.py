"""The acceptance run: 300 templates (the issue's 500, compressed), realistic faults, a killed worker, a killed
supervisor."""

import json
import signal

import psutil
import pytest

from tests.helpers import check_every_row, jobs_in, rows, scraper, start_scraper, wait_until

pytestmark = pytest.mark.slow

FAULTS = "503:0.03,500x2:0.02,reset:0.01,truncate:0.01,slow:0.01,404:0.01,403:0.005"
RUN = ("run", "--workers", "4", "--rate", "20", "--burst", "5", "--timeout", "2")


@pytest.mark.cold        # the acceptance run as a user starts it
@pytest.mark.timing
def test_acceptance_500_templates_with_faults_and_kills(standin, tmp_path):
    """The issue's 500 templates, time compressed to three fifths: 300 at the same rate and faults, the
    worker killed at 72 done (was 120) and the supervisor at 180 (was 300)."""
    # the slow answers (3 s) outlast the 2 s timeout: they exercise the timeout path too
    site = standin(templates=300, rate=20, burst=5, latency_ms=20, faults=FAULTS, seed=7, slow_s=3)
    db = tmp_path / "jobs.db"
    scraper(site, db, "seed", "--from-search", check=0)

    first = start_scraper(site, db, *RUN)
    wait_until(lambda: jobs_in(db, "done") >= 72, timeout=60)
    busy = {r["worker"] for r in rows(db, "SELECT worker FROM jobs WHERE status = 'running'")}
    victim = next(w for w in psutil.Process(first.pid).children() if any(b.endswith(f"-{w.pid}") for b in busy))
    victim.kill()                                       # a worker dies mid-job
    wait_until(lambda: jobs_in(db, "done") >= 180, timeout=60)
    orphans = psutil.Process(first.pid).children()
    first.send_signal(signal.SIGKILL)                   # then the supervisor itself
    first.wait(10)
    # its workers notice, hand back their jobs and leave (until then they hold the run lock)
    gone, alive = psutil.wait_procs(orphans, timeout=35)
    assert not alive

    again = scraper(site, db, *RUN, timeout=300)
    assert again.returncode == 1, again.stderr[-3000:]  # 1: the 403 templates ended failed

    corpus = site.corpus()
    faults, jobs, stored = check_every_row(site, db)
    assert sorted(faults.values()).count("404") == 3 and sorted(faults.values()).count("403") == 2
    assert sorted(jobs) == sorted(corpus["ids"])

    existing = [i for i in corpus["ids"] if faults.get(i) != "404"]
    done = [i for i in existing if jobs[i]["status"] == "done"]
    assert len(done) / len(existing) >= 0.95
    assert len(done) == len(existing) - 2               # the goal: every existing template but the 403s
    assert set(stored) == set(done)
    assert not [r for r in jobs.values() if r["status"] in ("pending", "running")]

    stats = site.stats()
    assert stats["http_429"] == 0
    assert stats["max_in_1s"] <= 20 + 5
    kinds = json.loads(scraper(site, db, "status", "--json", check=0).stdout)["errors_by_kind"]
    assert kinds.get("timeout", 0) >= 1 and kinds.get("parse", 0) >= 1 and kinds.get("network", 0) >= 1
