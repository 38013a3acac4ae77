"""Issue 44, readers and locks on SQLite: an outsider's read transaction and exclusive lock, held by a real
`sqlite3` process (or a Python one) beside real workers; who holds the database is named (`db/holders`, from
/proc/locks), the workers wait without failing a job, and `status` names the holder. The long figures (a
reader holding a transaction for 2 minutes during a run at 100/s) are `scripts/fault_readers.py`'s."""

import os
import subprocess
import sys

import pytest

from scraper.db import holders, store
from tests.helpers import in_process, jobs_in, rows, start_scraper, status_json, wait_until

pytestmark = pytest.mark.faults

HOLD = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute(sys.argv[2])
conn.execute("SELECT COUNT(*) FROM jobs").fetchone()
print("holding", flush=True)
time.sleep(float(sys.argv[3]))
conn.execute("COMMIT")
"""


def holding(db, begin, seconds):
    """A process of its own holding `begin` (a read or an exclusive transaction) for `seconds`."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(db), begin, str(seconds)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "holding"
    return proc


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "jobs.db"
    store.open_db(str(path)).close()
    return path


def test_a_reader_and_a_writer_are_named_with_what_they_hold(db):
    mine = store.connect(str(db))       # our own connection, open and reading: no contention
    mine.execute("SELECT 1").fetchall()
    assert not holders.contended(str(db))
    reader = holding(db, "BEGIN", 30)
    try:
        assert holders.contended(str(db))
        found = holders.holders(str(db))
        print(found)
        assert [(h.pid, h.holds) for h in found] == [(reader.pid, holders.READER)]
        assert "-c" in found[0].command
    finally:
        reader.kill()
        reader.wait()
    writer = holding(db, "BEGIN EXCLUSIVE", 30)
    try:
        assert holders.contended(str(db))
        said = holders.described(str(db))
        print(said)
        assert said == f" by pid {writer.pid} ({holders.command(writer.pid)}), which holds the write lock"
    finally:
        writer.kill()
        writer.wait()
    assert holders.holders(str(db)) == [] and not holders.contended(str(db))
    mine.close()


def test_the_meaning_of_each_lock_of_proc_locks(tmp_path):
    db = tmp_path / "x.db"
    db.write_bytes(b"")
    (tmp_path / "x.db-shm").write_bytes(b"")
    dev = {s: os.stat(str(db) + s) for s in ("", "-shm")}
    ident = {s: f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}" for s, st in dev.items()}
    locks = "\n".join([
        f"1: POSIX  ADVISORY  READ 11 {ident['-shm']} 128 128",
        f"2: POSIX  ADVISORY  READ 12 {ident['-shm']} 124 124",
        f"3: POSIX  ADVISORY  WRITE 13 {ident['-shm']} 120 120",
        f"4: POSIX  ADVISORY  WRITE 14 {ident['']} 1073741826 1073742335",
        f"5: -> POSIX  ADVISORY  WRITE 15 {ident['-shm']} 120 120",      # waiting: holds nothing
        "6: POSIX  ADVISORY  WRITE 16 00:00:1 120 120",                 # another file
    ])
    found = holders.holders(str(db), exclude={11}, locks=locks)
    assert [(h.pid, h.holds) for h in found] == [(14, holders.EXCLUSIVE), (13, holders.WRITER),
                                                 (12, holders.READER)]


@pytest.mark.slow
def test_an_outsiders_exclusive_lock_is_waited_out_and_its_holder_named(standin, tmp_path):
    site = standin(templates=16, latency_ms=20)
    db = tmp_path / "jobs.db"
    in_process(site, db, "seed", "--from-search", check=0)
    run = start_scraper(site, db, "run", "--workers", "2", "--rate", "20", "--burst", "5", "--set",
                        "lock_report_after=0.3")
    try:
        wait_until(lambda: jobs_in(db, "done") >= 3)
        # an analyst's `BEGIN EXCLUSIVE` mid-run, held 0.8 s: every writer waits, each says who holds it
        outsider = holding(db, "BEGIN EXCLUSIVE", 0.8)
        before = jobs_in(db, "done")
        outsider.wait()
        assert run.wait(30) == 0
    finally:
        run.kill()
    stderr = run.stderr.read()
    said = [ln[24:] for ln in stderr.splitlines() if "has been locked" in ln]
    print(f"{before} done when the lock was taken; said {len(said)} time(s), first: {said[:1]}")
    assert said and f"by pid {outsider.pid}" in said[0] and "which holds the write lock" in said[0]
    assert "Traceback" not in stderr, stderr[-4000:]
    assert jobs_in(db, "done") == 16
    assert rows(db, "SELECT COUNT(*) AS n FROM jobs WHERE attempts != 1 OR error_kind IS NOT NULL")[0]["n"] == 0


def test_status_names_a_reader_that_holds_the_database(standin, tmp_path):
    site = standin(templates=5)
    db = tmp_path / "jobs.db"
    in_process(site, db, "seed", "--from-search", check=0)
    reader = holding(db, "BEGIN", 30)
    try:
        command = holders.command(reader.pid)
        report = status_json(site, db)["database"]
        text = in_process(site, db, "status", check=0).stdout
    finally:
        reader.kill()
        reader.wait()
    print(report, [ln for ln in text.splitlines() if ln.startswith(("disk", "wal", "holder"))])
    assert report["holders"] == [{"pid": reader.pid, "holds": holders.READER, "command": command}]
    assert f"pid {reader.pid}" in text and "read transaction" in text


def test_the_run_says_once_when_the_wal_outgrows_its_bound_and_who_holds_it(db, caplog):
    from scraper.base import settings
    from scraper.pool import supervisor
    sup = supervisor.Supervisor(settings.build(db_path=str(db)))
    reader = holding(db, "BEGIN", 30)
    try:
        with open(str(db) + "-wal", "r+b") as wal:      # a WAL past the bound (sparse: it takes no space)
            wal.truncate((supervisor.WAL_WARN_MB + 1) * 2**20)
        sup._watch_wal()
        sup._watch_wal()
    finally:
        reader.kill()
        reader.wait()
    said = [r.getMessage() for r in caplog.records if "WAL has grown" in r.getMessage()]
    print(said)
    assert len(said) == 1 and f"{supervisor.WAL_WARN_MB + 1} MB" in said[0] and f"pid {reader.pid}" in said[0]
