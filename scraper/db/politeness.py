"""The rows behind politeness beyond a fixed rate: `robots` (one per host) and the rate columns of a
domain's row in `domains` (robots.txt's cap, the adaptive rate, the effective rate and why)."""

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from scraper.db.backend import Conn
from scraper.db.store import is_postgres, transaction

RATE_COLUMNS = ("configured_rate_per_s", "robots_rate_per_s", "robots_crawl_delay", "adaptive_rate_per_s",
                "adaptive_mark", "rate_per_s", "rate_burst", "rate_reason", "gave_up_reason")


def load_robots(conn: Conn, host: str) -> dict[str, Any] | None:
    """The stored robots.txt of `host` (a dict of its columns, sitemaps a list), or None."""
    row = conn.execute("SELECT * FROM robots WHERE host = ?", (host,)).fetchone()
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
            """INSERT INTO robots (host, fetched_at, status, body, crawl_delay, request_rate, sitemaps)
               VALUES (?, ?, ?, ?, ?, ?, ?)
               ON CONFLICT (host) DO UPDATE SET fetched_at = excluded.fetched_at, status = excluded.status,
                   body = excluded.body, crawl_delay = excluded.crawl_delay, request_rate = excluded.request_rate,
                   sitemaps = excluded.sitemaps""",
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


def rate_row(conn: Conn, domain: str) -> dict[str, Any]:
    """The rate columns of the domain's row ({} when it has no row)."""
    row = conn.execute(f"SELECT {', '.join(RATE_COLUMNS)} FROM domains WHERE domain = ?", (domain,)).fetchone()
    return dict(row) if row is not None else {}


def update_rate(conn: Conn, domain: str, now: float,
                change: Callable[[dict[str, Any]], dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Apply `change(row dict) -> {column: value}` to the domain's rate columns atomically (the row is
    made when missing); returns (before, after) dicts."""
    with transaction(conn) as c:
        c.execute("INSERT OR IGNORE INTO domains (domain, updated_at) VALUES (?, ?)", (domain, now))
        row = c.execute(f"SELECT {', '.join(RATE_COLUMNS)} FROM domains WHERE domain = ?", (domain,)).fetchone()
        before = dict(row)
        values = change(before)
        if values:
            sets = ", ".join(f"{k} = ?" for k in values)
            c.execute(f"UPDATE domains SET {sets}, updated_at = ? WHERE domain = ?", (*values.values(), now, domain))
        return before, {**before, **values}


def new_run(conn: Conn) -> None:
    """A run starts: robots.txt caps are applied again by the workers that read it, the adaptive rate
    starts from the configured one, and last run's reasons to give a domain up are gone."""
    with transaction(conn) as c:
        c.execute("""UPDATE domains SET robots_rate_per_s = NULL, robots_crawl_delay = 0, adaptive_rate_per_s = NULL,
                         adaptive_mark = NULL, rate_per_s = NULL, rate_burst = NULL, rate_reason = NULL,
                         gave_up_reason = NULL""")


def answers_since(conn: Conn, domain: str, since: float,
                  window: int) -> tuple[int, list[int], list[tuple[int, int | None]]]:
    """(answers of `domain` since `since`, times of its first `window`, (ms, status) of its last `window`),
    from the request log."""
    count = conn.execute("SELECT COUNT(*) FROM requests WHERE domain = ? AND at >= ?", (domain, since)).fetchone()[0]
    first = [r[0] for r in conn.execute(
        "SELECT ms FROM requests WHERE domain = ? AND at >= ? ORDER BY at LIMIT ?", (domain, since, window))]
    last = [(r[0], r[1]) for r in conn.execute(
        "SELECT ms, status FROM requests WHERE domain = ? AND at >= ? ORDER BY at DESC LIMIT ?",
        (domain, since, window))]
    return count, first, last


def gave_up_reasons(conn: Conn) -> dict[str, str]:
    """{domain: sentence} of the domains this run gave up for a reason of their own (robots.txt)."""
    return dict(conn.execute(
        "SELECT domain, gave_up_reason FROM domains WHERE gave_up != 0 AND gave_up_reason IS NOT NULL"))


def disallowed_since(conn: Conn, since: float) -> dict[str, int]:
    """{domain: jobs that ended invalid, kind robots, since `since`}."""
    return dict(conn.execute("SELECT domain, COUNT(*) FROM jobs WHERE error_kind = 'robots' AND status = 'invalid' "
                             "AND finished_at >= ? GROUP BY domain", (since,)))
