"""Issue 44, a full disk under a SQLite database: SQLite's own SQLITE_FULL (always runnable: the connection's
`max_page_count`), the `min_free_mb` floor, and a real small filesystem (a 30 MB tmpfs, where the test may
mount one). The run stops with one sentence and exit 74, the database checks `ok`, nothing is lost."""

import json
import os
import random
import shutil
import subprocess
from types import SimpleNamespace

import pytest

from scraper.base import exitcodes, settings
from scraper.base.clock import FakeClock
from scraper.base.errors import DiskFull
from scraper.db import disk, store
from scraper.db import politeness as politeness_rows
from scraper.db.queue import Queue
from scraper.net import http
from scraper.politeness import limiter, robots
from scraper.pool import worker
from scraper.sites import n8n
from tests.helpers import API, DETAIL, DOMAIN, NOW, SITE, TID, detail_body, in_process, jobs_in, rows, scraper

pytestmark = pytest.mark.faults


def integrity(db):
    return rows(db, "PRAGMA integrity_check")[0]["integrity_check"]


def test_sqlite_full_hands_the_job_back_and_ends_the_lane_without_charging_it(tmp_path, net, caplog):
    db = str(tmp_path / "jobs.db")
    s = settings.build(db_path=db, api_url=API, site_url=SITE)
    conn = store.open_db(db)
    q = Queue(conn)
    q.seed([(n8n.job_key(TID), n8n.SITE, n8n.page_url(SITE, TID), s.domain)], now=NOW - 100)
    politeness_rows.save_robots(conn, robots.host_of(API), NOW, 404, b"", None, None, ())
    session = http.make_session(s.user_agent)
    net.get(DETAIL, body=detail_body(TID))
    # the file may not grow by a page: the claim (an UPDATE in place) fits, the result does not
    pages = conn.execute("PRAGMA page_count").one()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    w = worker.Worker(s, "w1", q, limiter.NoLimiter(), session, clock=FakeClock(NOW), rng=random.Random(7))
    try:
        with pytest.raises(DiskFull):      # out of the lane's loop: `_run_lane` turns it into WORKER_DISK_FULL
            w.run()
        job = rows(db, "SELECT status, attempts, worker, error_kind FROM jobs")[0]
        print("after SQLITE_FULL:", job)
        # handed back for free: pending, its attempt not counted, no failure recorded
        assert job == {"status": "pending", "attempts": 0, "worker": None, "error_kind": None}
        assert rows(db, "SELECT COUNT(*) AS n FROM workflows")[0]["n"] == 0
        assert integrity(db) == "ok"
        assert "Traceback" not in caplog.text
        # space freed: the same job is done, once
        conn.execute("PRAGMA max_page_count = 1073741823")
        assert w.step() is True
        assert jobs_in(db, "done") == 1 and rows(db, "SELECT COUNT(*) AS n FROM workflows")[0]["n"] == 1
    finally:
        session.close()
        conn.close()


def test_the_lane_exit_code_of_a_full_disk_wins():
    codes = [exitcodes.WORKER_STOPPED, exitcodes.WORKER_DISK_FULL, exitcodes.WORKER_CRASHED]
    assert worker._process_code(codes) == exitcodes.WORKER_DISK_FULL


def seeded(tmp_path, n=20):
    """A database of `n` pending n8n jobs (no stand-in: what is tested stops before any request)."""
    db = tmp_path / "jobs.db"
    conn = store.open_db(str(db))
    Queue(conn).seed([(n8n.job_key(i), n8n.SITE, n8n.page_url(SITE, i), DOMAIN) for i in range(1, n + 1)], now=NOW)
    conn.close()
    return db


NO_SITE = SimpleNamespace(api_url=API, url=SITE)    # no request is sent: the commands read the database only


def test_a_run_under_the_floor_takes_no_job_says_where_and_exits_74(tmp_path):
    db = seeded(tmp_path)
    floor = int(disk.free_mb(str(db))) + 10_000      # more than this disk has
    done = in_process(NO_SITE, db, "run", "--workers", "2", "--min-free-mb", str(floor))
    print("stderr:", done.stderr[-600:])
    assert done.returncode == exitcodes.DISK_FULL
    assert f"the disk under {tmp_path} has" in done.stderr and f"under min_free_mb ({floor} MB)" in done.stderr
    assert done.stderr.strip().splitlines()[-1].split(" ", 2)[-1].startswith("INFO next: free space")
    assert "Traceback" not in done.stderr
    assert jobs_in(db, "pending") == 20 and jobs_in(db, "running") == 0
    assert integrity(db) == "ok"


def _mount_tmpfs(where, mb):
    """Mount a tmpfs of `mb` MB at `where`; the reason it cannot be, or None."""
    if not shutil.which("mount") or os.geteuid() != 0:
        return "mounting a tmpfs needs root here"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mb}m", "tmpfs", str(where)],
                          capture_output=True, text=True)
    return None if done.returncode == 0 else f"this sandbox may not mount a tmpfs: {done.stderr.strip()}"


@pytest.fixture
def small_fs(tmp_path):
    where = tmp_path / "small"
    why = _mount_tmpfs(where, 30)
    if why:
        pytest.skip(why)
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def run(site, db, floor_mb):
    return scraper(site, db, "run", "--workers", "2", "--rate", "50", "--burst", "10", "--set",
                   f"min_free_mb={floor_mb}", timeout=60)


@pytest.mark.slow
def test_a_small_filesystem_fills_the_run_stops_74_then_a_second_run_finishes(standin, small_fs):
    site = standin(templates=40, rate=50, burst=10)
    db = small_fs / "jobs.db"
    in_process(site, db, "seed", "--from-search", check=0)
    # leave 6 MB of the 30 (a run keeps 2 of them in reserve): a floor of 3 MB is met as the run writes, then
    # the disk itself fills
    filler = small_fs / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * int((disk.free_mb(str(db)) - 6) * 2**20))
    print(f"tmpfs of 30 MB, {disk.free_mb(str(db)):.2f} MB left for SQLite")
    done = []
    for floor_mb, said in ((3, "under min_free_mb (3 MB)"), (0, f"SQLite says the disk under {small_fs} is full")):
        stopped = run(site, db, floor_mb)
        done.append(jobs_in(db, "done"))
        said_line = [ln[24:] for ln in stopped.stderr.splitlines() if "stopping" in ln]
        print(f"min_free_mb={floor_mb}: exit {stopped.returncode}, {done[-1]} done, "
              f"{disk.free_mb(str(db)):.2f} MB free;", said_line)
        assert stopped.returncode == exitcodes.DISK_FULL, stopped.stderr[-2000:]
        assert said in stopped.stderr and f"the disk under {small_fs}" in stopped.stderr
        assert "Traceback" not in stopped.stderr
        assert "next: free space" in stopped.stderr.strip().splitlines()[-1]
        assert jobs_in(db, "running") == 0 and integrity(db) == "ok", stopped.stderr[-1500:]
    assert 0 < done[0] <= done[1] < 40      # each stopped before the end, with what it did kept
    filler.unlink()
    again = run(site, db, 1)
    assert again.returncode == 0, again.stderr[-2000:]
    stored = rows(db, "SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS ids FROM workflows")[0]
    print(f"after space was freed: {jobs_in(db, 'done')} done; workflows {stored}")
    assert jobs_in(db, "done") == 40 and stored == {"n": 40, "ids": 40}
    assert rows(db, "SELECT COUNT(*) AS n FROM jobs WHERE attempts != 1")[0]["n"] == 0   # none charged twice
    assert integrity(db) == "ok"


def test_status_says_the_disk_is_under_the_floor(tmp_path):
    db = seeded(tmp_path, 1)
    floor = int(disk.free_mb(str(db))) + 10_000
    env = {"SCRAPER_MIN_FREE_MB": str(floor)}
    report = json.loads(in_process(NO_SITE, db, "status", "--json", env=env, check=0).stdout)["database"]
    text = in_process(NO_SITE, db, "status", env=env, check=0).stdout
    print([ln for ln in text.splitlines() if ln.startswith("disk")])
    assert report["under_floor"] is True and report["min_free_mb"] == floor and report["folder"] == str(tmp_path)
    assert f"MB free under {tmp_path} (min_free_mb {floor}); UNDER THE FLOOR" in text
