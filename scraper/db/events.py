"""The outbox: the `events` table, one row per thing the mirror and its runs did (a template or item created,
updated, removed or restored; a job that ended failed or invalid; a run started, progressing, finished),
written in the same transaction as the change it describes. Readers (`scraper changes --after`, the MCP
server, a relay) page through it by `seq`, the cursor.

`seq` orders events in commit order on both backends, so a reader that has seen `seq` N has seen, and will
ever see, nothing new below N (a strict `seq > cursor` never skips):
- SQLite has one writer at a time, holding the lock from its first write to its commit; `AUTOINCREMENT`
  never reuses a seq, even after the newest rows were deleted.
- PostgreSQL draws a seq at insert but shows the row only at commit, and job transactions run side by
  side: T1 could draw 100, T2 101, T2 commit, a reader move past 101, and T1's 100 appear behind it. So
  `append` holds the rows back on the connection (`Connection.at_commit`) and they are inserted just before
  COMMIT, after `pg_advisory_xact_lock(EVENTS_LOCK)`: drawing seqs and committing are one critical section
  per transaction. PostgreSQL makes a transaction visible before it releases its locks, so the next writer
  draws its seqs only once every lower seq is visible. Taken last, the lock is held for one INSERT and the
  COMMIT (no other lock is asked for under it, so it cannot deadlock with row locks); it serialises only
  the commits of transactions that have events.

`id` is a UUID drawn once and stored: every read or redelivery of an event carries the same id.
"""

from __future__ import annotations

import contextvars
import datetime
import json
import uuid
from typing import TYPE_CHECKING, Any

from scraper.db.backend import Conn, Row
from scraper.db.dialect import Sql, same
from scraper.db.store import is_postgres, transaction

if TYPE_CHECKING:
    from scraper.db import pg

EVENTS_LOCK = 0x5C4A9E03        # PostgreSQL: held from an event transaction's seq draw to its commit
FIELDS = ("seq", "id", "type", "source", "subject", "run_id", "occurred_at", "data")
CHANGE_TYPES = {"added": "created", "changed": "updated", "removed": "removed", "restored": "restored"}

_INSERT = same("INSERT INTO events (id, type, source, subject, run_id, occurred_at, data) "
               "VALUES (?, ?, ?, ?, ?, ?, ?)")
_LOCK = same("SELECT pg_advisory_xact_lock(?)")
# an event's family (template, item, job, run): a subject is unique within its family and source only
_FAMILY = ("CASE WHEN type LIKE 'template.%' THEN 'template' WHEN type LIKE 'item.%' THEN 'item' "
           "WHEN type LIKE 'job.%' THEN 'job' WHEN type LIKE 'run.%' THEN 'run' ELSE type END")
_SELECT = "SELECT seq, id, type, source, subject, run_id, occurred_at, data FROM events"


def _read(sql: str) -> Sql:
    """A read of events in each dialect: SQLite's LIKE ignores ASCII case, PostgreSQL's ILIKE does, so a type
    pattern (`_FAMILY`, `template.*`) matches alike on both."""
    return Sql(sql, same(sql.replace("type LIKE", "type ILIKE")).postgres)

# the run whose worker writes the events of this job (Queue.complete/fail), for `run_id`
_RUN: contextvars.ContextVar[int | None] = contextvars.ContextVar("scraper_event_run", default=None)


class in_run:
    """`with in_run(run_id):` events appended inside are the run `run_id`'s (unless they name their own).
    A class, not a generator: every completed job enters one, and contextlib's machinery cost a job 2 us."""

    __slots__ = ("run_id", "token")

    def __init__(self, run_id: int | None) -> None:
        self.run_id = run_id

    def __enter__(self) -> None:
        self.token = _RUN.set(self.run_id)

    def __exit__(self, *exc: object) -> None:
        _RUN.reset(self.token)


def iso(ts: float) -> str:
    """Unix seconds as the ISO 8601 UTC text the mirror stores."""
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(timespec="seconds")


def append(conn: Conn, type_: str, source: str, subject: str, data: dict[str, Any], occurred_at: str,
           run_id: int | None = None) -> str:
    """Add one event to the caller's transaction (outside one, in its own); returns its id. On PostgreSQL
    the row is inserted at COMMIT, under EVENTS_LOCK (see the module's docstring)."""
    event_id = str(uuid.uuid4())
    row = (event_id, type_, source, subject, _RUN.get() if run_id is None else run_id, occurred_at,
           json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":")))
    if not is_postgres(conn):
        conn.execute(_INSERT, row)
        return event_id
    if not conn.in_transaction:
        with transaction(conn, shared=True):
            _hold(conn, row)
        return event_id
    _hold(conn, row)
    return event_id


def _hold(conn: pg.Connection, row: tuple[Any, ...]) -> None:
    if not conn.at_commit:
        conn.at_commit.append((_LOCK, (EVENTS_LOCK,)))
    conn.at_commit.append((_INSERT, row))


def as_dict(row: Row) -> dict[str, Any]:
    """An event as readers get it: FIELDS, `data` parsed."""
    out = {f: row[f] for f in FIELDS}
    out["data"] = json.loads(out["data"]) if out["data"] else {}
    return out


def after(conn: Conn, cursor: int = 0, limit: int | None = None, types: tuple[str, ...] = (),
          until: int | None = None) -> list[Row]:
    """The events with `seq` above `cursor` (and at most `until`), in seq order; at most `limit`; of `types`
    only (a type, or a family as `template.*`)."""
    where, args = _where(cursor, types)
    if until is not None:
        where, args = where + " AND seq <= ?", [*args, until]
    sql = f"{_SELECT} WHERE {where} ORDER BY seq"
    if limit is not None:
        sql, args = sql + " LIMIT ?", [*args, limit]
    return conn.execute(_read(sql), args).fetchall()


def compacted(conn: Conn, cursor: int = 0, limit: int | None = None, types: tuple[str, ...] = ()) -> list[Row]:
    """The newest event of each (family, source, subject) among those above `cursor` (so a removed template
    or item is its tombstone), in seq order, at most `limit`. The newest event of all is always among them
    when no limit cuts it off, so the last seq read is the head: a reader resumes from it without a gap."""
    where, args = _where(cursor, types)
    sql = (f"{_SELECT} WHERE seq IN (SELECT MAX(seq) FROM events WHERE {where} "
           f"GROUP BY {_FAMILY}, source, subject) ORDER BY seq")
    if limit is not None:
        sql, args = sql + " LIMIT ?", [*args, limit]
    return conn.execute(_read(sql), args).fetchall()


def newest_seqs(conn: Conn, cursor: int = 0, types: tuple[str, ...] = (), until: int | None = None) -> list[int]:
    """What `compacted` reads, as seqs only, ascending (a tap's pages: `by_seq` reads each; one GROUP BY instead
    of one per page, and no row held for all of them)."""
    where, args = _where(cursor, types)
    if until is not None:
        where, args = where + " AND seq <= ?", [*args, until]
    found = conn.execute(_read(f"SELECT MAX(seq) FROM events WHERE {where} GROUP BY {_FAMILY}, source, subject"), args)
    return sorted(int(r[0]) for r in found)


def by_seq(conn: Conn, seqs: list[int]) -> list[Row]:
    """The events of `seqs`, in seq order."""
    if not seqs:
        return []
    return conn.execute(same(f"{_SELECT} WHERE seq IN ({', '.join('?' * len(seqs))}) ORDER BY seq"), seqs).fetchall()


def newest(conn: Conn, limit: int, types: tuple[str, ...] = (), source: str | None = None) -> list[Row]:
    """The newest `limit` events of `types` (of `source` only), newest first (the Atom feed's entries)."""
    where, args = _where(0, types)
    if source is not None:
        where, args = where + " AND source = ?", [*args, source]
    return conn.execute(_read(f"{_SELECT} WHERE {where} ORDER BY seq DESC LIMIT ?"), [*args, limit]).fetchall()


def _where(cursor: int, types: tuple[str, ...]) -> tuple[str, list[Any]]:
    where, args = "seq > ?", list[Any]([cursor])
    if types:
        parts = []
        for t in types:
            if t.endswith(".*"):
                parts.append("type LIKE ?")
                args.append(t[:-1] + "%")
            else:
                parts.append("type = ?")
                args.append(t)
        where += " AND (" + " OR ".join(parts) + ")"
    return where, args


def count(conn: Conn, cursor: int = 0) -> int:
    """How many events have `seq` above `cursor` (a reader's backlog)."""
    return int(conn.execute(same("SELECT COUNT(*) FROM events WHERE seq > ?"), (cursor,)).one()[0])


def head(conn: Conn) -> int:
    """The newest seq, 0 before the first event."""
    return int(conn.execute(same("SELECT coalesce(MAX(seq), 0) FROM events")).one()[0])
