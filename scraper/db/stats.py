"""The figures of `scraper stats` (and the report's and the agent's rankings), read from `workflows` and the
transcripts tables: counts, rankings of JSON-list columns, months, quality bins. The JSON lists are read
through `db/jsonsql`, each dialect in its own spelling.
"""

from __future__ import annotations

from typing import Any

from scraper.db import jsonsql, schema
from scraper.db.backend import Conn
from scraper.db.dialect import Sql, only, same
from scraper.db.store import is_postgres

# a creation time that starts with a year and a month (anything else is counted as unknown): SQLite's GLOB,
# PostgreSQL's regular expression
UNDATED = Sql(
    "SELECT COUNT(*) FROM workflows WHERE created_at IS NULL OR created_at NOT GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]*'",
    "SELECT COUNT(*) FROM workflows WHERE created_at IS NULL OR created_at !~ '^[0-9]{4}-[0-9]{2}'")
PER_MONTH = Sql(
    "SELECT substr(created_at, 1, 7) AS month, COUNT(*) FROM workflows "
    "WHERE created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]*' GROUP BY month ORDER BY month",
    "SELECT substr(created_at, 1, 7) AS month, COUNT(*) FROM workflows "
    "WHERE created_at ~ '^[0-9]{4}-[0-9]{2}' GROUP BY month ORDER BY month")


def _one(conn: Conn, sql: str | Sql) -> Any:
    """The one value of `sql` (a text: built for this connection's engine)."""
    return conn.execute(only(is_postgres(conn), sql) if isinstance(sql, str) else sql).one()[0]


def counts(conn: Conn) -> dict[str, int]:
    """{templates, created_unknown, templates_with_videos, videos, paid, paid_unknown, hollow}."""
    pg = is_postgres(conn)
    return {
        "templates": _one(conn, "SELECT COUNT(*) FROM workflows"),
        "created_unknown": _one(conn, UNDATED),
        "templates_with_videos": _one(
            conn, f"SELECT COUNT(*) FROM workflows WHERE {jsonsql.list_length(pg, 'videos')} > 0"),
        "videos": _one(conn, "SELECT COUNT(DISTINCT j.value) FROM workflows w, {} WHERE {}".format(
            *jsonsql.list_strings(pg, "w.videos"))),
        "paid": _one(conn, "SELECT COUNT(*) FROM workflows WHERE paid = 1"),
        "paid_unknown": _one(conn, "SELECT COUNT(*) FROM workflows WHERE paid IS NULL"),
        "hollow": _one(conn, "SELECT COUNT(*) FROM workflows WHERE hollow = 1"),
    }


def ranking(conn: Conn, column: str, limit: int | None = None, live_only: bool = False) -> list[tuple[str, int]]:
    """[(value, templates)] of a JSON-list column (node_types, categories, videos), most used first, ties by
    value: a template counts once per value, however many times it holds it. `live_only`: of the templates
    not removed; `limit`: the first that many."""
    pg = is_postgres(conn)
    each, where = jsonsql.list_strings(pg, f"w.{column}")
    live = " AND w.removed_at IS NULL" if live_only else ""
    sql = f"""SELECT j.value, COUNT(DISTINCT w.id) AS n FROM workflows w, {each}
              WHERE {where}{live} GROUP BY j.value ORDER BY n DESC, j.value"""
    if limit is None:
        return [(r[0], r[1]) for r in conn.execute(only(pg, sql))]
    return [(r[0], r[1]) for r in conn.execute(only(pg, sql + " LIMIT ?"), (limit,))]


def authors(conn: Conn) -> list[tuple[str, int]]:
    """[(author, templates)], most first, ties by name."""
    return [(r[0], r[1]) for r in conn.execute(
        same("SELECT author, COUNT(*) AS n FROM workflows WHERE author IS NOT NULL "
             "GROUP BY author ORDER BY n DESC, author"))]


def per_month(conn: Conn) -> list[tuple[str, int]]:
    """[(YYYY-MM, templates created)], by month."""
    return [(r[0], r[1]) for r in conn.execute(PER_MONTH)]


def quality(conn: Conn, bin_size: int, top_bin: int) -> tuple[tuple[Any, ...], dict[int, int]]:
    """((scored, min, max, mean) of the quality scores, {bin: templates}), bins of `bin_size`, the last
    (`top_bin`) holding the rest."""
    row = conn.execute(same("SELECT COUNT(quality_score), MIN(quality_score), MAX(quality_score), AVG(quality_score) "
                            "FROM workflows")).one()
    # the last bin holds the rest: a scalar minimum, SQLite's MIN of two, PostgreSQL's LEAST
    rest = (f"(quality_score / {int(bin_size)}, {int(top_bin)}) AS bin, COUNT(*) FROM workflows "
            "WHERE quality_score IS NOT NULL GROUP BY bin")
    bins = {r[0]: r[1] for r in conn.execute(Sql("SELECT MIN" + rest, "SELECT LEAST" + rest))}
    return tuple(row), bins


def transcript_coverage(conn: Conn) -> dict[str, int] | None:
    """How many linked videos and templates have a transcript; None while the transcripts tables
    (`transcripts`, `template_videos`) do not exist in this database."""
    if not {"transcripts", "template_videos"} <= schema.tables(conn):
        return None
    return {
        "videos": _one(conn, "SELECT COUNT(DISTINCT video_id) FROM template_videos"),
        "videos_with_transcript": _one(conn, "SELECT COUNT(DISTINCT tv.video_id) FROM template_videos tv "
                                             "JOIN transcripts t ON t.video_id = tv.video_id"),
        "templates_with_videos": _one(conn, "SELECT COUNT(DISTINCT template_id) FROM template_videos"),
        "templates_with_transcript": _one(conn, "SELECT COUNT(DISTINCT tv.template_id) FROM template_videos tv "
                                                "JOIN transcripts t ON t.video_id = tv.video_id"),
    }
