"""The `items` table: one row per catalogue item (source, key), its current record and version; what the
mirror core writes, the walk compares, and the readers (exports, the agent's lookups, `sources`) take.
Each statement is written for both backends (`same()`); where the dialects differ (a record's keys) both
spellings stand side by side.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from scraper.db.answers import Current
from scraper.db.backend import Conn, Row
from scraper.db.dialect import same
from scraper.db.store import is_postgres


class State(NamedTuple):
    """What is stored of one item, as the mirror decides its next write from it (`db/results.state`)."""

    stored: bool = False
    version: int | None = None
    removed_at: str | None = None
    content_hash: str | None = None
    url: str | None = None
    current: Current | None = None      # its current version's first answer, when asked for


class Item(NamedTuple):
    """An item to write, live, as fetched at `fetched_at` (`record`: its JSON text)."""

    source: str
    key: str
    url: str
    record: str
    version: int
    fetched_at: str
    digest: str


_STATE = same("SELECT version, removed_at, content_hash, url FROM items WHERE source = ? AND key = ?")
_PUT = same(
    """INSERT INTO items (source, key, url, record, version, first_seen_at, last_seen_at, removed_at,
                          content_hash, fetched_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)
       ON CONFLICT (source, key) DO UPDATE SET url = excluded.url, record = excluded.record,
           version = excluded.version, last_seen_at = excluded.last_seen_at, removed_at = NULL,
           content_hash = excluded.content_hash, fetched_at = excluded.fetched_at""")
_REMOVED = same("UPDATE items SET removed_at = ? WHERE source = ? AND key = ? AND removed_at IS NULL")


def state(conn: Conn, source: str, key: str) -> State:
    row = conn.execute(_STATE, (source, key)).fetchone()
    return State() if row is None else State(True, *row)


def put(conn: Conn, items: Sequence[Item]) -> None:
    conn.executemany(_PUT, [(i.source, i.key, i.url, i.record, i.version, i.fetched_at, i.fetched_at, i.digest,
                             i.fetched_at) for i in items])


def mark_removed(conn: Conn, removed: Sequence[tuple[str, str, str]]) -> None:
    """Set `removed_at` of each live (source, key, at)."""
    conn.executemany(_REMOVED, [(at, source, key) for source, key, at in removed])


def find_key(conn: Conn, source: str, url_or_path: str) -> str | None:
    """The stored key of an item named by its URL or its path, or None."""
    row = conn.execute(same("SELECT key FROM items WHERE source = ? AND (key = ? OR url = ?)"),
                       (source, url_or_path, url_or_path)).fetchone()
    return None if row is None else row["key"]


def row(conn: Conn, source: str, key: str) -> Row | None:
    """The whole `items` row, or None."""
    return conn.execute(same("SELECT * FROM items WHERE source = ? AND key = ?"), (source, key)).fetchone()


def keys(conn: Conn) -> list[tuple[str, str]]:
    """(source, key) of every item, in that order."""
    return [(r["source"], r["key"]) for r in conn.execute(same("SELECT source, key FROM items ORDER BY source, key"))]


def set_record(conn: Conn, source: str, key: str, record: str) -> None:
    conn.execute(same("UPDATE items SET record = ? WHERE source = ? AND key = ?"), (record, source, key))


def due(conn: Conn, source: str, fetched_before: str | None, limit: int | None) -> list[str]:
    """The job keys (`SOURCE:PATH`) of the done, live items of `source` fetched before `fetched_before`
    (None: all), oldest first, at most `limit`."""
    sql = ("SELECT i.source || ':' || i.key FROM items i JOIN jobs j ON j.key = i.source || ':' || i.key "
           "WHERE i.source = ? AND j.status = 'done' AND i.removed_at IS NULL")
    args: list[Any] = [source]
    if fetched_before is not None:
        sql, args = sql + " AND i.fetched_at < ?", args + [fetched_before]
    sql += " ORDER BY i.fetched_at, i.key"
    if limit is not None:
        sql, args = sql + " LIMIT ?", args + [limit]
    return [r[0] for r in conn.execute(same(sql), args)]


def walk_state(conn: Conn, source: str, site: str) -> tuple[dict[str, float | None], dict[str, tuple[Any, ...]]]:
    """What a walk of `source` compares with: ({path: its job's finished_at}, {path: (fetched_at,
    removed_at, lastmod)} of its items). `site`: the kind whose jobs have keys `SOURCE:PATH`."""
    prefix = f"{source}:"
    jobs = {k[len(prefix):]: f for k, f in conn.execute(
        same("SELECT key, finished_at FROM jobs WHERE site = ? AND substr(key, 1, ?) = ?"),
        (site, len(prefix), prefix))}
    stored = {k: (f, r, m) for k, f, r, m in conn.execute(
        same("SELECT key, fetched_at, removed_at, lastmod FROM items WHERE source = ?"), (source,))}
    return jobs, stored


def seen(conn: Conn, source: str, at: str, lastmods: Sequence[tuple[str, str | None]]) -> None:
    """The live items (path, lastmod) a walk listed were seen at `at`, with the sitemap's lastmod."""
    conn.executemany(same("UPDATE items SET last_seen_at = ?, lastmod = ? WHERE source = ? AND key = ? "
                     "AND removed_at IS NULL"), [(at, lastmod, source, path) for path, lastmod in lastmods])


def sources(conn: Conn) -> list[str]:
    """The sources with a stored item, by name."""
    return [r[0] for r in conn.execute(same("SELECT DISTINCT source FROM items ORDER BY source"))]


def has_source(conn: Conn, source: str) -> bool:
    return conn.execute(same("SELECT 1 FROM items WHERE source = ? LIMIT 1"), (source,)).fetchone() is not None


def live_and_removed(conn: Conn, source: str) -> tuple[int, int]:
    """(live, removed) items of `source`."""
    live, removed = conn.execute(same("SELECT COUNT(*) - COUNT(removed_at), COUNT(removed_at) FROM items "
                                 "WHERE source = ?"), (source,)).one()
    return live, removed


def live_page(conn: Conn, source: str, limit: int, offset: int) -> list[Row]:
    """(source, key, url, record) of the live items of `source` in key order, `limit` from `offset` on."""
    return conn.execute(same("SELECT source, key, url, record FROM items WHERE source = ? AND removed_at IS NULL "
                        "ORDER BY key LIMIT ? OFFSET ?"), (source, limit, offset)).fetchall()


EXPORTED = ("source", "key", "url", "version", "first_seen_at", "last_seen_at", "removed_at")


def exported(conn: Conn, source: str, live_only: bool = False) -> Iterator[Row]:
    """The items of `source` in key order, one at a time: the EXPORTED columns and `record`."""
    where = " AND removed_at IS NULL" if live_only else ""
    yield from conn.execute(
        same(f"SELECT {', '.join(EXPORTED)}, record FROM items WHERE source = ?{where} ORDER BY key"), (source,))


def fields(conn: Conn, source: str) -> list[str]:
    """The record's fields across the source's items, sorted."""
    if is_postgres(conn):
        # PostgreSQL: read in Python, where text that is not JSON cannot fail the statement (::jsonb would)
        names: set[str] = set()
        for (record,) in conn.execute(same("SELECT record FROM items WHERE source = ?"), (source,)):
            try:
                doc = json.loads(record)
            except ValueError:
                continue
            names.update(doc if isinstance(doc, dict) else ())
        return sorted(names)
    # SQLite: json_each of each record
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT j.key FROM items AS i, json_each(i.record) AS j WHERE i.source = ? ORDER BY j.key",
        (source,))]
