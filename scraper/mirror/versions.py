"""The stored raw answers, one per (template, version, kind), read back for publishing (the WARC export):
streamed in order, filtered by source, date and liveness, each with the URL it came from.

Answers stored before the URL, status and Content-Type were kept (schema 7) have NULL there: their URL is
rebuilt from the template id and kind with the same functions the fetcher used, and `reconstructed` says
which fields were not recorded."""

from dataclasses import dataclass

from scraper.base.errors import ConfigError
from scraper.mirror import source as db_source
from scraper.sites import n8n

SOURCES = (n8n.SITE,)       # every stored answer is n8n's until sources (issue: many sources) land
DEFAULT_TYPES = {n8n.API: "application/json", n8n.PAGE: "text/html; charset=utf-8"}


@dataclass(frozen=True)
class Stored:
    template_id: int
    version: int
    kind: str
    url: str
    status: int
    content_type: str
    fetched_at: str         # when this body was fetched (ISO 8601, UTC)
    body: bytes
    reconstructed: tuple    # the fields not recorded with the answer: ("url", "status", "content_type")


def source_clause(source):
    """(SQL condition on `answers AS a`, arguments) selecting one source's answers; the one place that
    knows how an answer belongs to a source. ConfigError for a source this database cannot hold."""
    if source is None:
        return "1", ()
    if source not in SOURCES:
        raise ConfigError(f"unknown source {source!r}; the sources are {', '.join(SOURCES)}.")
    return "1", ()      # one source today: every answer is its


def stored(conn, urls, source=None, since=None, live_only=False):
    """Every stored answer version (`Stored`), in (template, version, kind) order, one at a time.
    `urls`: (api_url, site_url) to rebuild old answers' URLs; `since`: ISO 8601 text (fetched at or
    after); `live_only`: leave out templates removed from the site."""
    from scraper.mirror.answers import decompress
    where, args = source_clause(source)
    if since is not None:
        where, args = where + " AND a.body_fetched_at >= ?", args + (since,)
    if live_only:
        where += " AND w.removed_at IS NULL"
    api_url, site_url = db_source.recorded(conn) or urls
    cur = conn.execute(
        "SELECT a.template_id, a.version, a.kind, a.url, a.http_status, a.content_type, a.body_fetched_at, a.body "
        "FROM answers AS a LEFT JOIN workflows AS w ON w.id = a.template_id "
        f"WHERE {where} ORDER BY a.template_id, a.version, a.kind", args)
    for tid, version, kind, url, status, ctype, at, blob in cur:
        missing = tuple(name for name, v in (("url", url), ("status", status), ("content_type", ctype)) if v is None)
        if url is None:
            url = n8n.detail_url(api_url, tid) if kind == n8n.API else n8n.page_url(site_url, tid)
        yield Stored(tid, version, kind, url, 200 if status is None else status,
                     ctype or DEFAULT_TYPES.get(kind, "application/octet-stream"), at, decompress(blob), missing)


def count(conn, source=None, since=None, live_only=False):
    """How many answers `stored` would give (for progress and the summary line)."""
    where, args = source_clause(source)
    if since is not None:
        where, args = where + " AND a.body_fetched_at >= ?", args + (since,)
    if live_only:
        where += " AND w.removed_at IS NULL"
    return conn.execute(f"SELECT COUNT(*) FROM answers AS a LEFT JOIN workflows AS w ON w.id = a.template_id "
                        f"WHERE {where}", args).fetchone()[0]
