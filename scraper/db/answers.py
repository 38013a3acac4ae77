"""The tables of the mirror's history: `answers` (each raw answer, one per item, version and kind, kept
compressed) and `changes` (added, changed, removed, restored), keyed by (source, key) for templates and
catalogue items alike. The rules (what a version is, what a change is) live in `scraper/mirror/answers`;
this module only reads and writes the rows: a job's result writes its answers and changes through
`db/results.write`, each in one statement for all its rows. One spelling serves both backends.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from scraper.db import events
from scraper.db.backend import Conn, Row
from scraper.db.dialect import same

# a stored answer's template row, or its catalogue item's (its URL, its removal)
_JOINS = ("LEFT JOIN workflows AS w ON w.id = a.template_id "
          "LEFT JOIN items AS i ON i.source = a.source AND i.key = a.key AND a.template_id IS NULL")


class Answer(NamedTuple):
    """One raw answer to store, compressed (`blob`, `size` its length before): a new version gets its row; the
    same version gets the latest body (only volatile fields differ)."""

    source: str
    key: str
    template_id: int | None
    version: int
    kind: str
    digest: str
    fetched_at: str
    size: int
    blob: bytes
    url: str | None
    status: int | None
    content_type: str | None


class Change(NamedTuple):
    """A change (added, changed, removed, restored) and what its event names: the version's content hash
    and URL (the mirror fills them from the answers it writes or read)."""

    source: str
    key: str
    change: str
    at: str
    version: int | None
    template_id: int | None
    digest: str | None
    url: str | None


class Current(NamedTuple):
    """An item's first stored answer (by kind, refused answers left out) of one version."""

    version: int
    kind: str
    digest: str
    url: str | None


_PUT = same(
    """INSERT INTO answers (source, key, template_id, version, kind, content_hash, fetched_at, body_fetched_at,
                           size, body, url, http_status, content_type)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (source, key, version, kind) DO UPDATE SET content_hash = excluded.content_hash,
           body_fetched_at = excluded.body_fetched_at, size = excluded.size, body = excluded.body,
           url = excluded.url, http_status = excluded.http_status, content_type = excluded.content_type""")
_CHANGE = same("INSERT INTO changes (source, key, template_id, change, at, version) VALUES (?, ?, ?, ?, ?, ?)")
_CURRENT = same("SELECT version, kind, content_hash, url FROM answers WHERE source = ? AND key = ? AND version = ? "
                "AND kind <> 'rejected' ORDER BY kind LIMIT 1")


def put(conn: Conn, answers: Sequence[Answer]) -> None:
    """Store compressed answers, in one statement."""
    conn.executemany(_PUT, [(a.source, a.key, a.template_id, a.version, a.kind, a.digest, a.fetched_at, a.fetched_at,
                             a.size, a.blob, a.url, a.status, a.content_type) for a in answers])


def current(conn: Conn, source: str, key: str, version: int) -> Current | None:
    """The item's first stored answer of `version` (what a change's event names when the change writes none)."""
    row = conn.execute(_CURRENT, (source, key, version)).fetchone()
    return None if row is None else Current(*row)


def body(conn: Conn, source: str, key: str, version: int, kind: str) -> Row | None:
    """(body, body_fetched_at) of one stored answer, or None."""
    return conn.execute(same("SELECT body, body_fetched_at FROM answers WHERE source = ? AND key = ? AND version = ? "
                        "AND kind = ?"), (source, key, version, kind)).fetchone()


def latest_body(conn: Conn, source: str, key: str, kind: str, up_to: int) -> bytes | None:
    """The compressed body of the newest answer of `kind` at version `up_to` or before, or None."""
    row = conn.execute(same("SELECT body FROM answers WHERE source = ? AND key = ? AND kind = ? AND version <= ? "
                       "ORDER BY version DESC LIMIT 1"), (source, key, kind, up_to)).fetchone()
    return None if row is None else row["body"]


def versions(conn: Conn, source: str, key: str, kind: str) -> list[dict[str, Any]]:
    """An item's versions of `kind`, oldest first: [{version, fetched_at, content_hash}]."""
    return [dict(r) for r in conn.execute(
        same("SELECT version, fetched_at, content_hash FROM answers WHERE source = ? AND key = ? AND kind = ? "
        "ORDER BY version"), (source, key, kind))]


def sources(conn: Conn) -> list[str]:
    """The sources that have a stored answer, by name."""
    return [r[0] for r in conn.execute(same("SELECT DISTINCT source FROM answers ORDER BY source"))]


def has_source(conn: Conn, source: str) -> bool:
    return conn.execute(same("SELECT 1 FROM answers WHERE source = ? LIMIT 1"), (source,)).fetchone() is not None


def add_changes(conn: Conn, changes: Sequence[Change]) -> None:
    """Record changes and their events (`template.*` or `item.*`, db/events.py) in the caller's transaction."""
    conn.executemany(_CHANGE, [(c.source, c.key, c.template_id, c.change, c.at, c.version) for c in changes])
    for c in changes:
        family, subject = ("template", {"id": c.template_id}) if c.template_id is not None else ("item", {"key": c.key})
        events.append(conn, f"{family}.{events.CHANGE_TYPES[c.change]}", c.source, c.key,
                      {**subject, "version": c.version, "content_hash": c.digest, "url": c.url}, c.at)


def changes(conn: Conn, since: str | None = None, kinds: Sequence[str] = (), limit: int | None = None) -> list[Row]:
    """The `changes` rows (template_id, source, key, change, at, seq) ordered by time then key: from `since`
    on, of `kinds` only (default all); `limit`: the newest that many, still oldest first."""
    where: list[str] = []
    args: list[Any] = []
    if since is not None:
        where, args = where + ["at >= ?"], args + [since]
    if kinds:
        where, args = where + [f"change IN ({','.join('?' * len(kinds))})"], args + list(kinds)
    sql = ("SELECT template_id, source, key, change, at, seq FROM changes"
           + (" WHERE " + " AND ".join(where) if where else ""))
    if limit is not None:
        sql, args = (f"SELECT * FROM ({sql} ORDER BY at DESC, source DESC, template_id DESC, key DESC, seq DESC "
                     "LIMIT ?) AS newest"), args + [limit]     # PostgreSQL needs the alias
    return conn.execute(same(sql + " ORDER BY at, source, template_id, key, seq"), args).fetchall()


def _stored_where(source: str | None, since: str | None, live_only: bool) -> tuple[str, tuple[Any, ...]]:
    # the one place that knows how an answer belongs to a source: its `source` column (n8n's templates,
    # or a catalogue's items)
    where, args = ("1 = 1", ()) if source is None else ("a.source = ?", (source,))
    if since is not None:
        where, args = where + " AND a.body_fetched_at >= ?", (*args, since)
    if live_only:
        where += " AND w.removed_at IS NULL AND i.removed_at IS NULL"
    return where, args


def stored(conn: Conn, source: str | None = None, since: str | None = None,
           live_only: bool = False) -> Iterator[Row]:
    """Every stored answer, one at a time, in (source, template, key, version, kind) order: (template_id,
    version, kind, url (the item's when the answer has none), http_status, content_type, body_fetched_at,
    compressed body, whether the answer kept no URL). `since`: fetched at or after (ISO 8601 text);
    `live_only`: leave out what the site removed."""
    where, args = _stored_where(source, since, live_only)
    yield from conn.execute(
        same("SELECT a.template_id, a.version, a.kind, COALESCE(a.url, i.url), a.http_status, a.content_type, "
        "a.body_fetched_at, a.body, a.url IS NULL "
        f"FROM answers AS a {_JOINS} WHERE {where} ORDER BY a.source, a.template_id, a.key, a.version, a.kind"), args)


def count_stored(conn: Conn, source: str | None = None, since: str | None = None, live_only: bool = False) -> int:
    """How many answers `stored` gives."""
    where, args = _stored_where(source, since, live_only)
    return int(conn.execute(same(f"SELECT COUNT(*) FROM answers AS a {_JOINS} WHERE {where}"), args).one()[0])
