"""What the readers (`status`, `stats`, `search`, the report) ask to speak of the sources a database holds:
which kinds of data it has, its items per source, the domains of its jobs, the requests of one run by
domain. Read-only; both backends (the one spelling that differs, a record's keys, stands side by side)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scraper.db import jobcounts
from scraper.db.backend import Conn
from scraper.db.dialect import Sql, same
from scraper.db.store import is_postgres
from scraper.policy import retry


def template_count(conn: Conn) -> int:
    return conn.execute(same("SELECT COUNT(*) FROM workflows")).one()[0]


def n8n_job_count(conn: Conn) -> int:
    """Jobs of the n8n kind (templates, listing pages, their videos)."""
    return sum(n for site, _, _, _, n in jobcounts.rows(conn) if site != "catalogue")


def items_by_source(conn: Conn) -> dict[str, dict[str, int]]:
    """{source: {"live": n, "removed": n}} of the catalogue items stored, by source name."""
    return {name: {"live": live, "removed": removed} for name, live, removed in conn.execute(
        same("SELECT source, COUNT(*) - COUNT(removed_at), COUNT(removed_at) FROM items "
             "GROUP BY source ORDER BY source"))}


def jobs_by_source(conn: Conn) -> dict[str, dict[str, int]]:
    """{source: {status: rows}} (every status present, zero when none)."""
    return jobcounts.by(jobcounts.rows(conn), "source")


def job_domains(conn: Conn) -> set[str]:
    """The politeness domains the database's jobs belong to."""
    return {domain for _, _, domain, _, _ in jobcounts.rows(conn) if domain}


def field_coverage(conn: Conn, source: str) -> list[tuple[str, int]]:
    """[(field, live items whose record has it)] of one source, most common first."""
    if is_postgres(conn):
        sql = ("SELECT k, COUNT(*) AS n FROM items, json_object_keys(record::json) AS k "
               "WHERE source = ? AND removed_at IS NULL GROUP BY k ORDER BY n DESC, k")
    else:
        sql = ("SELECT j.key AS k, COUNT(*) AS n FROM items AS i, json_each(i.record) AS j "
               "WHERE i.source = ? AND i.removed_at IS NULL AND json_valid(i.record) GROUP BY j.key "
               "ORDER BY n DESC, k")
    return [(k, n) for k, n in conn.execute(same(sql), (source,))]


def requests_by_domain(conn: Conn, run_id: int) -> dict[str, int]:
    """{domain: requests} one run sent."""
    return {r[0]: r[1] for r in conn.execute(
        same("SELECT domain, COUNT(*) FROM requests WHERE run_id = ? GROUP BY domain"), (run_id,))}


def run_errors(conn: Conn, run_id: int) -> dict[str, int]:
    """{kind: failed requests} of one run (the request log's kinds other than `ok`, and other than a
    robots.txt that answered 4xx: no rules, an answer)."""
    return {r[0]: r[1] for r in conn.execute(
        same("SELECT kind, COUNT(*) FROM requests WHERE run_id = ? "
             "AND kind NOT IN ('ok', 'robots_4xx') GROUP BY kind ORDER BY kind"), (run_id,))}


# SQLite's LIKE ignores ASCII case; PostgreSQL's ILIKE does
FAILED_INCOMPLETE = Sql(
    "SELECT COUNT(*), SUM(CASE WHEN last_error LIKE ? THEN 1 ELSE 0 END) FROM jobs "
    "WHERE status = 'failed' AND error_kind = 'incomplete'",
    "SELECT COUNT(*), SUM(CASE WHEN last_error ILIKE %s THEN 1 ELSE 0 END) FROM jobs "
    "WHERE status = 'failed' AND error_kind = 'incomplete'")


def failed_incomplete(conn: Conn) -> tuple[int, int]:
    """(failed jobs of kind `incomplete`, of them those whose page carries scripts: their error names
    fetcher = "auto")."""
    row = conn.execute(FAILED_INCOMPLETE, ('%fetcher = "auto"%',)).one()
    return row[0], row[1] or 0


def failed_browser_unavailable(conn: Conn) -> tuple[int, str | None]:
    """(failed jobs of kind `browser_unavailable`, the reason of the latest: it names the endpoint and how long
    it refused)."""
    row = conn.execute(same(
        "SELECT COUNT(*), (SELECT last_error FROM jobs WHERE status = 'failed' AND error_kind = ? "
        "ORDER BY finished_at DESC LIMIT 1) FROM jobs WHERE status = 'failed' AND error_kind = ?"),
        (retry.BROWSER_UNAVAILABLE, retry.BROWSER_UNAVAILABLE)).one()
    return row[0], row[1]


def remaining_by_domain(conn: Conn) -> dict[str, int]:
    """{domain: jobs pending or running}."""
    return {r[0]: r[1] for r in conn.execute(
        same("SELECT domain, COUNT(*) FROM jobs WHERE status IN ('pending', 'running') GROUP BY domain"))}


def rates_by_domain(conn: Conn) -> dict[str, float]:
    """{domain: its effective rate as the last run wrote it} (domains without one left out)."""
    return {r[0]: r[1] for r in conn.execute(
        same("SELECT domain, rate_per_s FROM domains WHERE rate_per_s IS NOT NULL"))}


def names(conn: Conn, template_ids: Iterable[int],
          item_keys: Iterable[tuple[str, str]]) -> tuple[dict[int, str], dict[tuple[str, str], Any]]:
    """({template id: name}, {(source, key): the record's name}) of the given templates and items."""
    templates: dict[int, str] = {}
    items: dict[tuple[str, str], Any] = {}
    ids = sorted(set(template_ids))
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        templates.update((r[0], r[1]) for r in conn.execute(
            same(f"SELECT id, name FROM workflows WHERE id IN ({','.join('?' * len(chunk))})"), chunk))
    name = "record::json->>'name'" if is_postgres(conn) else "json_extract(record, '$.name')"
    for source, key in sorted(set(item_keys)):
        row = conn.execute(same(f"SELECT {name} FROM items WHERE source = ? AND key = ?"), (source, key)).fetchone()
        if row is not None:
            items[(source, key)] = row[0]
    return templates, items
