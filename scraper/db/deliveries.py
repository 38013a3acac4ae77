"""The webhook endpoints' place in the outbox (`webhook_endpoints`) and every delivery attempt (`deliveries`),
for `scraper deliver` and `scraper deliveries`. An endpoint is keyed by its URL without credentials."""

from __future__ import annotations

import datetime
from typing import Any

from scraper.db import events
from scraper.db.backend import Conn
from scraper.db.dialect import Sql, same
from scraper.db.store import transaction

STATE = ("url", "cursor", "pending_upto", "attempts", "next_at", "last_error", "disabled")
READ_STATE = same(f"SELECT {', '.join(STATE)} FROM webhook_endpoints WHERE url = ?")
INSERT_DELIVERY = same("INSERT INTO deliveries (url, webhook_id, first_seq, last_seq, events, at, status, ok, "
                       "error, ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
# the cursor never goes back: SQLite's scalar MAX is PostgreSQL's GREATEST
_ADVANCE = "UPDATE webhook_endpoints SET cursor = {}(cursor, ?), "
# every write of a holder is fenced by its hold (`lease_until` as `take` set it): a deliverer whose attempt outlasted
# its hold, while another took the endpoint, changes nothing of the endpoint's row (its attempt is still recorded)
_HELD = "WHERE url = ? AND lease_until = ?"
SKIP = Sql(_ADVANCE.format("MAX") + "lease_until = 0, updated_at = ? " + _HELD,
           same(_ADVANCE.format("GREATEST") + "lease_until = 0, updated_at = ? " + _HELD).postgres)
_DELIVERED = ("pending_upto = NULL, attempts = 0, next_at = 0, last_error = NULL, lease_until = 0, updated_at = ? "
              + _HELD)
DELIVERED = Sql(_ADVANCE.format("MAX") + _DELIVERED, same(_ADVANCE.format("GREATEST") + _DELIVERED).postgres)


def state(conn: Conn, url: str) -> dict[str, Any]:
    """The endpoint's row (made at cursor 0 the first time)."""
    row = conn.execute(READ_STATE, (url,)).fetchone()
    if row is None:
        with transaction(conn) as c:
            c.execute(Sql("INSERT OR IGNORE INTO webhook_endpoints (url) VALUES (?)",
                      "INSERT INTO webhook_endpoints (url) VALUES (%s) ON CONFLICT DO NOTHING"), (url,))
        return state(conn, url)
    return {k: row[k] for k in STATE}


def begin(conn: Conn, url: str) -> None:
    """Make a reader's row at the outbox's head when it has none (a reader that wants what comes from now on:
    the ETL API, the health announcements), so that it never replays the history."""
    with transaction(conn) as c:
        c.execute(same("INSERT INTO webhook_endpoints (url, cursor) "
                       "VALUES (?, (SELECT coalesce(MAX(seq), 0) FROM events)) ON CONFLICT (url) DO NOTHING"), (url,))


def take(conn: Conn, url: str, now: float, until: float) -> dict[str, Any] | None:
    """Hold the endpoint until `until` for one attempt, when it is due, enabled and held by no other deliverer;
    its row as it is then, or None. `until` is the hold's token: the holder's writes (`release`, `pin`, `skip`,
    `attempted`) pass it back, and apply only while the endpoint is still theirs."""
    state(conn, url)
    with transaction(conn) as c:
        if c.execute(same("UPDATE webhook_endpoints SET lease_until = ? WHERE url = ? AND disabled = 0 "
                          "AND next_at <= ? AND lease_until <= ?"), (until, url, now, now)).rowcount != 1:
            return None
    return state(conn, url)


def release(conn: Conn, url: str, held: float) -> bool:
    """Let the endpoint go (False: it was no longer ours)."""
    with transaction(conn) as c:
        return c.execute(same("UPDATE webhook_endpoints SET lease_until = 0 " + _HELD), (url, held)).rowcount == 1


def pin(conn: Conn, url: str, upto: int, now: float, held: float) -> bool:
    """The batch up to seq `upto` is under way: its retries send the same events (False: the endpoint was no
    longer ours)."""
    with transaction(conn) as c:
        return c.execute(same("UPDATE webhook_endpoints SET pending_upto = ?, updated_at = ? " + _HELD),
                         (upto, now, url, held)).rowcount == 1


def skip(conn: Conn, url: str, cursor: int, now: float, held: float) -> bool:
    """Move the cursor over events the endpoint does not want, and let the endpoint go (False: it was no
    longer ours, and nothing moved)."""
    with transaction(conn) as c:
        return c.execute(SKIP, (cursor, now, url, held)).rowcount == 1


def attempted(conn: Conn, url: str, webhook_id: str, first: int, last: int, n: int, now: float, status: int | None,
              error: str | None, ms: int, ok: bool, held: float, next_at: float = 0.0,
              disabled: bool = False) -> bool:
    """Record one attempt and its consequence, in one transaction, and let the endpoint go: a 2xx moves the
    cursor to `last` and clears the failures; a failure counts, waits until `next_at`, or disables it. False:
    the attempt outlasted its hold and another deliverer holds the endpoint; the attempt is recorded, its
    consequence is not (the holder sends the pinned batch, with the same id and bytes)."""
    with transaction(conn) as c:
        c.execute(INSERT_DELIVERY, (url, webhook_id, first, last, n, now, status, int(ok), error, ms))
        if ok:
            return c.execute(DELIVERED, (last, now, url, held)).rowcount == 1
        return c.execute(same("UPDATE webhook_endpoints SET attempts = attempts + 1, next_at = ?, last_error = ?, "
                              "disabled = ?, lease_until = 0, updated_at = ? " + _HELD),
                         (next_at, error, int(disabled), now, url, held)).rowcount == 1


def replayed(conn: Conn, url: str, webhook_id: str, first: int, last: int, n: int, now: float, status: int | None,
             error: str | None, ms: int, ok: bool) -> None:
    """Record one attempt of a redelivery (the endpoint's cursor and schedule stay as they are)."""
    with transaction(conn) as c:
        c.execute(INSERT_DELIVERY, (url, webhook_id, first, last, n, now, status, int(ok), error, ms))


def delivered(conn: Conn, url: str, since: int | None = None, run_id: int | None = None) -> list[tuple[int, int]]:
    """The (first seq, last seq) of each batch the endpoint took with a 2xx, in order: those with an event
    after `since`, or with an event of run `run_id`."""
    sql, args = ("SELECT DISTINCT d.first_seq, d.last_seq FROM deliveries AS d WHERE d.url = ? AND d.ok = 1",
                 list[Any]([url]))
    if since is not None:
        sql, args = sql + " AND d.last_seq > ?", [*args, since]
    if run_id is not None:
        sql, args = (sql + " AND EXISTS (SELECT 1 FROM events AS e WHERE e.run_id = ? AND e.seq >= d.first_seq "
                     "AND e.seq <= d.last_seq)", [*args, run_id])
    return [(r[0], r[1]) for r in conn.execute(same(sql + " ORDER BY d.first_seq, d.last_seq"), args)]


def failures(conn: Conn, limit: int) -> list[dict[str, Any]]:
    """The newest failed attempts: {url, webhook_id, first_seq, last_seq, events, at, status, error}."""
    return [dict(r) for r in conn.execute(same(
        "SELECT url, webhook_id, first_seq, last_seq, events, at, status, error FROM deliveries WHERE ok = 0 "
        "ORDER BY id DESC LIMIT ?"), (limit,))]


def report(conn: Conn, urls: list[str], now: float) -> list[dict[str, Any]]:
    """Each endpoint (by its shown URL) as `deliveries` and `status` show it, read only: {url, cursor, backlog
    (events after its cursor), oldest_s (the age of the oldest of them), last_error, disabled, attempts (failed
    in a row), next_at}."""
    out = []
    for url in urls:
        row = conn.execute(READ_STATE, (url,)).fetchone()
        st: dict[str, Any] = ({k: row[k] for k in STATE} if row is not None
                              else {"cursor": 0, "attempts": 0, "disabled": 0, "next_at": 0, "last_error": None})
        oldest = conn.execute(same("SELECT occurred_at FROM events WHERE seq > ? ORDER BY seq LIMIT 1"),
                              (st["cursor"],)).fetchone()
        out.append({"url": url, "cursor": st["cursor"], "backlog": events.count(conn, st["cursor"]),
                    "oldest_s": None if oldest is None else max(0, round(now - _epoch(oldest[0]))),
                    "last_error": st["last_error"], "disabled": bool(st["disabled"]), "attempts": st["attempts"],
                    "next_at": st["next_at"] or None})
    return out


def _epoch(text: str) -> float:
    return datetime.datetime.fromisoformat(text).timestamp()
