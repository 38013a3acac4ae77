"""The `workflows` table (one row per n8n template, its current version) and its link to the videos
(`template_videos`): what the mirror core writes beside a version, the walk's updates, and the rows the
readers (files, the agent's lookups, status) take. One spelling serves both backends but where marked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from scraper.db import schema
from scraper.db.answers import Current
from scraper.db.backend import Conn, Row
from scraper.db.dialect import Sql, same


class State(NamedTuple):
    """What is stored of one template, as the mirror decides its next write from it (`db/results.state`)."""

    stored: bool = False                # it has a `workflows` row
    version: int | None = None
    first_seen_at: str | None = None
    removed_at: str | None = None
    content_hash: str | None = None     # its extracted row's (rows stored before answers were kept have no answer)
    hollow: bool = False
    last_hash: str | None = None        # the content hash of its newest answer of the kind asked for
    listed: tuple[float | None, str | None] | None = None     # (price, purchase URL) as the last walk listed it
    current: Current | None = None      # its current version's first answer, when asked for


# one round trip for the row, its newest answer's hash and the listing's price; the id as a row of its own so
# a template not stored yet still gets the rest (PostgreSQL wants the parameter's type)
_STATE = "SELECT w.id IS NOT NULL, w.version, w.first_seen_at, w.removed_at, w.content_hash, w.hollow, " \
         "(SELECT a.content_hash FROM answers AS a WHERE a.source = ? AND a.key = ? AND a.kind = ? " \
         "ORDER BY a.version DESC LIMIT 1), l.id IS NOT NULL, l.price, l.purchase_url " \
         "FROM (SELECT {} AS id) AS t LEFT JOIN workflows AS w ON w.id = t.id LEFT JOIN listing AS l ON l.id = t.id"
STATE = Sql(_STATE.format("?"), same(_STATE.format("CAST(? AS BIGINT)")).postgres)
_SEEN = same("UPDATE workflows SET last_seen_at = ?, removed_at = NULL WHERE id = ?")
_REMOVED = same("UPDATE workflows SET removed_at = ? WHERE id = ? AND removed_at IS NULL")


def state(conn: Conn, tid: int, source: str, kind: str) -> State:
    """The template's `State`; `last_hash` that of its newest answer of (`source`, `kind`)."""
    stored, version, first, removed, digest, hollow, last, listed, price, purchase = conn.execute(
        STATE, (source, str(tid), kind, tid)).one()
    return State(bool(stored), version, first, removed, digest, bool(hollow), last,
                 (price, purchase) if listed else None)


def seen(conn: Conn, seen_at: Sequence[tuple[int, str]]) -> None:
    """Each (template, at) was served again (and is live)."""
    conn.executemany(_SEEN, [(at, tid) for tid, at in seen_at])


def mark_removed(conn: Conn, removed: Sequence[tuple[int, str]]) -> None:
    """Set `removed_at` of each live (template, at)."""
    conn.executemany(_REMOVED, [(at, tid) for tid, at in removed])


def restore(conn: Conn, tid: int) -> int:
    """Clear `removed_at` (listed again); the template's version."""
    conn.execute(same("UPDATE workflows SET removed_at = NULL WHERE id = ?"), (tid,))
    return int(conn.execute(same("SELECT version FROM workflows WHERE id = ?"), (tid,)).one()[0])


def ids(conn: Conn) -> list[int]:
    return [r[0] for r in conn.execute(same("SELECT id FROM workflows ORDER BY id"))]


def live_and_removed_ids(conn: Conn) -> tuple[set[int], set[int]]:
    """(ids of live templates, ids of removed ones)."""
    live: set[int] = set()
    removed: set[int] = set()
    for tid, gone in conn.execute(same("SELECT id, removed_at IS NOT NULL FROM workflows")):
        (removed if gone else live).add(tid)
    return live, removed


def row(conn: Conn, tid: int) -> Row | None:
    """The whole `workflows` row of a template, or None."""
    return conn.execute(same("SELECT * FROM workflows WHERE id = ?"), (tid,)).fetchone()


def counts(conn: Conn) -> dict[str, int]:
    """{live, removed, paid (live ones)}."""
    live, removed, paid = conn.execute(
        same("SELECT COUNT(*) - COUNT(removed_at), COUNT(removed_at), "
        "COUNT(CASE WHEN removed_at IS NULL AND paid = 1 THEN 1 END) FROM workflows")).one()
    return {"live": live, "removed": removed, "paid": paid}


def removed(conn: Conn) -> list[Row]:
    """(id, name, removed_at) of the removed templates, by id."""
    return conn.execute(
        same("SELECT id, name, removed_at FROM workflows WHERE removed_at IS NOT NULL ORDER BY id")).fetchall()


def with_workflow(conn: Conn) -> Iterator[Row]:
    """Live templates with a workflow, in id order, one at a time: (id, name, version, categories, node
    types, workflow JSON text, URL of the latest stored page or None, clean_at_rules, paid, price,
    purchase URL, hollow)."""
    page = ("(SELECT a.url FROM answers AS a WHERE a.template_id = w.id AND a.kind = 'page' "
            "ORDER BY a.version DESC LIMIT 1)") if "url" in schema.column_names(conn, "answers") else "NULL"
    yield from conn.execute(
        same(f"SELECT w.id, w.name, w.version, w.categories, w.node_types, w.workflow, {page}, w.clean_at_rules, "
        "w.paid, w.price, w.purchase_url, w.hollow "
        "FROM workflows AS w "
        "WHERE w.removed_at IS NULL AND w.workflow IS NOT NULL ORDER BY w.id"))


def replace_videos(conn: Conn, tid: int, videos: Iterable[str]) -> None:
    """The template's video links become `videos`."""
    conn.execute(same("DELETE FROM template_videos WHERE template_id = ?"), (tid,))
    conn.executemany(Sql("INSERT OR IGNORE INTO template_videos (template_id, video_id) VALUES (?, ?)",
                         "INSERT INTO template_videos (template_id, video_id) VALUES (%s, %s) ON CONFLICT DO NOTHING"),
                     [(tid, v) for v in videos])


def videos_without_jobs(conn: Conn) -> list[str]:
    """The videos linked to a template that have no `youtube:` job yet."""
    return [r[0] for r in conn.execute(
        same("SELECT DISTINCT video_id FROM template_videos AS tv WHERE NOT EXISTS "
        "(SELECT 1 FROM jobs WHERE key = 'youtube:' || tv.video_id)"))]


def job_keys(conn: Conn, site: str) -> list[str]:
    """The keys of every job of `site` (`n8n:<id>`)."""
    return [r[0] for r in conn.execute(same("SELECT key FROM jobs WHERE site = ?"), (site,))]


def set_listed(conn: Conn, at: str, paid: Sequence[tuple[int, float | None, str | None, int]]) -> None:
    """What a walk listed: each (id, price, purchase URL, paid) gets its price, and a live one `last_seen_at`."""
    conn.executemany(same("UPDATE workflows SET price = ?, purchase_url = ?, paid = ? WHERE id = ?"),
                     [(*p, tid) for tid, *p in paid])
    conn.executemany(same("UPDATE workflows SET last_seen_at = ? WHERE id = ? AND removed_at IS NULL"),
                     [(at, tid) for tid, *_ in paid])


def _done_live(site: str) -> str:
    # the templates whose job is done and which are live: what a refresh may queue again
    return f"FROM workflows w JOIN jobs j ON j.key = '{site}:' || w.id WHERE j.status = 'done' AND w.removed_at IS NULL"


def due(conn: Conn, site: str, fetched_before: str | None, limit: int | None) -> list[Row]:
    """(id, fetched_at) of the done, live templates fetched before `fetched_before` (None: all), oldest
    first, at most `limit`."""
    sql, args = f"SELECT w.id, w.fetched_at {_done_live(site)}", list[Any]()
    if fetched_before is not None:
        sql, args = sql + " AND w.fetched_at < ?", [fetched_before]
    sql += " ORDER BY w.fetched_at, w.id"
    if limit is not None:
        sql, args = sql + " LIMIT ?", [*args, limit]
    return conn.execute(same(sql), args).fetchall()


def oldest_done(conn: Conn, site: str) -> str | None:
    """The oldest `fetched_at` of a done, live template, or None."""
    return conn.execute(same(f"SELECT MIN(w.fetched_at) {_done_live(site)}")).one()[0]


def stored_and_refreshing(conn: Conn, active: int | None = None) -> tuple[int, int, int]:
    """(live, removed, refreshing): the templates stored, and how many of them a pending or running job is
    fetching again. `active`: the n8n jobs pending or running, when known (it picks the cheaper side)."""
    live, removed = conn.execute(same("SELECT COUNT(*) - COUNT(removed_at), COUNT(removed_at) FROM workflows")).one()
    # walked from the smaller side: a million pending jobs cost a row lookup each (0.6 s), a few thousand
    # stored templates one lookup each in the jobs' key index
    if active is not None and live + removed <= active:
        refreshing = conn.execute(
            same("SELECT COUNT(*) FROM workflows AS w WHERE EXISTS (SELECT 1 FROM jobs WHERE key = 'n8n:' || w.id "
            "AND status IN ('pending', 'running'))")).one()[0]
    else:
        refreshing = conn.execute(
            same("SELECT COUNT(*) FROM jobs WHERE status IN ('pending', 'running') AND site = 'n8n' "
            "AND CAST(substr(key, 5) AS INTEGER) IN (SELECT id FROM workflows)")).one()[0]
    return live, removed, refreshing
