"""The rows behind politeness beyond a fixed rate: `robots` (one per host, fetched once at a time across
processes), and what the adaptive rate and the robots summary read of the `requests` and `jobs` tables. A
domain's own row (its rate columns included) is `db/domains`'."""

import contextlib
import fcntl
import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

from scraper.db.backend import Conn
from scraper.db.dialect import same
from scraper.db.store import is_postgres, transaction


def load_robots(conn: Conn, host: str) -> dict[str, Any] | None:
    """The stored robots.txt of `host` (a dict of its columns, sitemaps a list), or None."""
    row = conn.execute(same("SELECT * FROM robots WHERE host = ?"), (host,)).fetchone()
    if row is None:
        return None
    out = dict(row)
    try:
        out["sitemaps"] = json.loads(row["sitemaps"] or "[]")
    except ValueError:
        out["sitemaps"] = []
    return out


def save_robots(conn: Conn, host: str, fetched_at: float, status: int | None, body: bytes, crawl_delay: float | None,
                request_rate: str | None, sitemaps: Iterable[str]) -> None:
    with transaction(conn) as c:
        c.execute(
            same("""INSERT INTO robots (host, fetched_at, status, body, crawl_delay, request_rate, sitemaps)
               VALUES (?, ?, ?, ?, ?, ?, ?)
               ON CONFLICT (host) DO UPDATE SET fetched_at = excluded.fetched_at, status = excluded.status,
                   body = excluded.body, crawl_delay = excluded.crawl_delay, request_rate = excluded.request_rate,
                   sitemaps = excluded.sitemaps"""),
            (host, fetched_at, status, body, crawl_delay, request_rate, json.dumps(list(sitemaps))),
        )


@contextlib.contextmanager
def robots_lock(conn: Conn, db_path: str, host: str) -> Iterator[None]:
    """One robots.txt fetch of `host` at a time across processes (and machines), so that `seed` and every
    worker fetch it once: a session advisory lock on PostgreSQL, a kernel lock beside a SQLite file."""
    if is_postgres(conn):
        conn.raw("SELECT pg_advisory_lock(hashtext(%s))", ("robots:" + host,))
        try:
            yield
        finally:
            conn.raw("SELECT pg_advisory_unlock(hashtext(%s))", ("robots:" + host,))
        return
    fd = os.open(db_path + "-robots.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)        # closing frees the lock


def answers_since(conn: Conn, domain: str, since: float,
                  window: int) -> tuple[int, list[int], list[tuple[int, int | None]]]:
    """(answers of `domain` since `since`, times of its first `window`, (ms, status) of its last `window`),
    from the request log."""
    count = conn.execute(same("SELECT COUNT(*) FROM requests WHERE domain = ? AND at >= ?"), (domain, since)).one()[0]
    first = [r[0] for r in conn.execute(
        same("SELECT ms FROM requests WHERE domain = ? AND at >= ? ORDER BY at LIMIT ?"), (domain, since, window))]
    last = [(r[0], r[1]) for r in conn.execute(
        same("SELECT ms, status FROM requests WHERE domain = ? AND at >= ? ORDER BY at DESC LIMIT ?"),
        (domain, since, window))]
    return count, first, last


def disallowed_since(conn: Conn, since: float) -> dict[str, int]:
    """{domain: jobs that ended invalid, kind robots, since `since`}."""
    return {r[0]: r[1] for r in conn.execute(
        same("SELECT domain, COUNT(*) FROM jobs WHERE error_kind = 'robots' AND status = 'invalid' "
             "AND finished_at >= ? GROUP BY domain"), (since,))}
