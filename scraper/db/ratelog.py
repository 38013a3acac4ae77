"""The SQLite limiter's own file (`<db>-limiter`): one sliding log per domain, the table pyrate-limiter's
`SQLiteBucket` writes (name, item_timestamp), created here with its index, and the one question the
limiter asks of it beyond pyrate's (how long until a window has room). `politeness/limiter` holds the lock.
"""

from __future__ import annotations

import re
import sqlite3

from scraper.db import sqlite


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


def table_of(domain: str) -> str:
    """The log's table name of a domain (pyrate interpolates it into its SQL: letters, digits, `_` only)."""
    return "rate_" + re.sub(r"[^A-Za-z0-9_]", "_", domain)


def create(conn: sqlite3.Connection, table: str) -> None:
    """The log's table and its index on the timestamps, if missing."""
    conn.execute(f"CREATE TABLE IF NOT EXISTS '{table}' (name VARCHAR, item_timestamp INTEGER)")
    conn.execute(f"CREATE INDEX IF NOT EXISTS 'idx_{table}_ts' ON '{table}' (item_timestamp)")
    conn.commit()


def nth_newest(conn: sqlite3.Connection, table: str, after_ms: int, n: int) -> int | None:
    """The timestamp of the `n`-th newest admission after `after_ms` (1: the newest), or None when the
    window holds fewer."""
    row = conn.execute(f"SELECT item_timestamp FROM '{table}' WHERE item_timestamp > ? "
                       "ORDER BY item_timestamp DESC LIMIT 1 OFFSET ?", (after_ms, n - 1)).fetchone()
    return None if row is None else int(row[0])
