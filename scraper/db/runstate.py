"""Is a run working on this database? On SQLite the run lock says whether anyone holds it and the `runs`
row says who and since when; on PostgreSQL many runs share the database and each `runs` row's heartbeat
says whether its run is alive."""

import fcntl
import os


def lock_held(lock_path):
    """True while some process holds the run lock (a run, or the orphaned workers of a killed one).

    The probe takes a shared lock for an instant; `RunLock.acquire` tries again briefly, so a run
    starting at that very moment is not turned away."""
    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def runs(conn, lock_path, now):
    """Every live run: [{host, pid, started_at, workers, heartbeat_at}], newest first."""
    from scraper.db import store
    if not store.is_postgres(conn) and not lock_held(lock_path):
        return []
    rows = store.live_runs(conn, now)
    if not store.is_postgres(conn):
        rows = rows[:1]      # one run at a time holds a SQLite file
    return [{"host": r["host"], "pid": r["pid"], "started_at": r["started_at"], "workers": r["workers"],
             "heartbeat_at": r["heartbeat_at"]} for r in rows]


def current(conn, lock_path, now=None):
    """{pid, started_at, alive} of the run that holds the database, or None when none does.

    `alive` is False when the lock is held but the run's supervisor is gone (it was killed and its
    workers are finishing their last jobs). On PostgreSQL: the newest run whose heartbeat is alive."""
    from scraper.db import store
    if store.is_postgres(conn):
        live = runs(conn, lock_path, store.clock(conn) if now is None else now)
        return None if not live else {"pid": live[0]["pid"], "started_at": live[0]["started_at"], "alive": True,
                                      "host": live[0]["host"]}
    if not lock_held(lock_path):
        return None
    row = conn.execute(
        "SELECT pid, started_at FROM runs WHERE finished_at IS NULL ORDER BY id DESC LIMIT 1"
    ).fetchone()
    if row is None:          # the run has the lock but has not written its row yet
        return {"pid": None, "started_at": None, "alive": True}
    return {"pid": row["pid"], "started_at": row["started_at"], "alive": _running(row["pid"])}


def _running(pid):
    import psutil  # only when a run holds the lock: `status` on an idle database does without it

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False

