"""The SQLite limiter's own file (`<db>-limiter`): one GCRA slot per domain, a row of `slots` (domain,
slot_at: the theoretical arrival time of the domain's next request, in seconds since the epoch), as
PostgreSQL keeps it in the domain's row (`db/slots`). `politeness/limiter` holds the lock around each take.
"""

from __future__ import annotations

import sqlite3

from scraper.db import sqlite
from scraper.policy import margin


def connect(path: str) -> sqlite3.Connection:
    """The limiter file's connection: WAL, its writes queued behind each other for up to 30 s. A file that
    cannot be opened is the project's `DatabaseError`, as for the database itself (a worker says so and
    stops; sqlite3's own class is caught by no one above db/)."""
    try:
        conn = sqlite3.connect(path, isolation_level="DEFERRED", check_same_thread=False, timeout=30)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.Error as e:
        raise sqlite.error(e) from e
    return conn


def create(conn: sqlite3.Connection) -> None:
    """The slots table, if missing (a file of an earlier version also holds its sliding logs, unread)."""
    conn.execute("CREATE TABLE IF NOT EXISTS slots (domain TEXT PRIMARY KEY, slot_at REAL NOT NULL)")
    conn.commit()


def take(conn: sqlite3.Connection, domain: str, now: float, interval: float, tolerance: float) -> float:
    """Take the domain's slot at `now` (GCRA, `db/slots`): 0.0 when taken, else the seconds until one may be
    free. The caller holds the file's lock, so the read and the move are one step."""
    row = conn.execute("SELECT slot_at FROM slots WHERE domain = ?", (domain,)).fetchone()
    if row is not None and row[0] - now > tolerance + interval + margin.CLOCK_STEP_S:
        # only a clock stepped back leaves a slot that far ahead (a slower rate's wait, before a change of
        # rate, is less): the schedule starts again from now instead of waiting out the step
        conn.execute("UPDATE slots SET slot_at = ? WHERE domain = ?", (now + tolerance + interval, domain))
        conn.commit()
        return interval
    slot_at = max(row[0], now) if row is not None else now
    if slot_at - now > tolerance + 1e-9:      # not a float's rounding: a wake-up on time is on time
        return max(0.001, slot_at - now - tolerance)
    try:
        conn.execute("INSERT INTO slots (domain, slot_at) VALUES (?, ?) "
                     "ON CONFLICT (domain) DO UPDATE SET slot_at = excluded.slot_at", (domain, slot_at + interval))
        conn.commit()
    except sqlite3.Error as e:      # the project's error (a full disk is `DiskFull`: the worker stops cleanly)
        conn.rollback()
        raise sqlite.error(e) from e
    return 0.0


def wait(conn: sqlite3.Connection, domain: str, now: float, tolerance: float) -> float:
    """Seconds until the domain's slot is free (0.0: now); takes nothing."""
    row = conn.execute("SELECT slot_at FROM slots WHERE domain = ?", (domain,)).fetchone()
    return 0.0 if row is None else max(0.0, row[0] - now - tolerance)
