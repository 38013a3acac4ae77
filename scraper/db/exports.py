"""What the exports read of the templates: the `workflows` rows streamed in id order (never the whole
table in memory: a server-side cursor on PostgreSQL, sqlite-utils' query on SQLite, side by side) and the
transcripts of a template's videos.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from scraper.db import sqlite
from scraper.db.backend import Conn, Row
from scraper.db.dialect import same
from scraper.db.store import is_postgres


def workflows(conn: Conn, columns: Sequence[str], live_only: bool = False,
              ids: Sequence[int] | None = None) -> Iterator[dict[str, Any]]:
    """The `columns` of every `workflows` row (`live_only`: those not removed; `ids`: those only), as dicts,
    in id order."""
    cols = ", ".join(f'"{c}"' for c in columns) if columns else "id"
    where = ["removed_at IS NULL"] if live_only else []
    if ids is not None:
        where.append(f"id IN ({', '.join(str(int(i)) for i in ids) or 'NULL'})")     # ints: no injection
    sql = f"SELECT {cols} FROM workflows{' WHERE ' + ' AND '.join(where) if where else ''} ORDER BY id"
    if is_postgres(conn):
        yield from conn.stream(same(sql))
        return
    import sqlite_utils  # here, not at the top: every command imports the export for its format list
    assert isinstance(conn, sqlite.Connection)     # for mypy: not PostgreSQL's, so SQLite's
    yield from sqlite_utils.Database(conn).query(sql)


def transcripts(conn: Conn, template_id: int) -> list[Row]:
    """(video_id, language_code, is_generated, text) of each stored transcript of the template's videos."""
    return conn.execute(
        same("SELECT t.video_id, t.language_code, t.is_generated, t.text FROM template_videos AS tv "
             "JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = ?"), (template_id,)).fetchall()
