"""What `status` says of a SQLite database's own state (issue 44): the disk under it against `min_free_mb`, the
WAL's size, the processes holding it (`db/holders`: a reader that keeps the WAL from being checkpointed, an
outsider's lock) other than the live run's own, and the workers holding jobs past their lease (frozen or stuck:
the run takes those jobs back). Nothing on PostgreSQL, whose disk and locks are its server's."""

import os

from scraper.base.settings import MIN_FREE_MB
from scraper.db import disk, holders, store


def report(queue, now, settings=None, run=None):
    """The `database` object of `status --json` (None on PostgreSQL)."""
    if queue.conn.is_postgres:
        return None
    path = store.path_of(queue.conn)
    floor = settings.min_free_mb if settings is not None else MIN_FREE_MB
    free = disk.free_mb(path)
    try:
        wal = os.stat(path + "-wal").st_size / 2**20
    except OSError:
        wal = 0.0
    own = {os.getpid()} | _run_processes(run)
    return {
        "folder": disk.folder(path), "free_mb": round(free, 1), "min_free_mb": floor,
        "under_floor": floor > 0 and free < floor, "wal_mb": round(wal, 1),
        "holders": [{"pid": h.pid, "holds": h.holds, "command": h.command}
                    for h in (holders.holders(path, exclude=own) if holders.contended(path) else ())
                    if h.holds != holders.OPEN],
        "past_lease": queue.expired_holders(now),
    }


def _run_processes(run):
    """The live run's supervisor and its workers (their locks come and go with each statement)."""
    if not run or not run.get("alive") or not run.get("pid"):
        return set()
    pid = run["pid"]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return {pid, *(int(child) for child in f.read().split())}
    except OSError:
        return {pid}


def lines(d):
    """The lines `scraper status` prints of it."""
    if d is None:
        return []
    out = [f"disk      {d['free_mb']:g} MB free under {d['folder']} (min_free_mb {d['min_free_mb']})"
           + ("; UNDER THE FLOOR: a run stops at once (exit 74) until space is freed" if d["under_floor"] else ""),
           f"wal       {d['wal_mb']:g} MB"]
    for h in d["holders"]:
        out.append(f"holder    pid {h['pid']} ({h['command']}) holds {h['holds']}")
    if d["past_lease"]:
        out.append(f"lease     {', '.join(d['past_lease'])} hold(s) jobs past their lease (frozen or stuck): the "
                   f"run takes them back within a second and replaces a worker that stopped beating")
    return out
