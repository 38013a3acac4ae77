"""The stored raw answers, one per (item, version, kind), templates and catalogue items alike, read back
for publishing (the WARC export): streamed in order, filtered by source, date and liveness, each with
the URL it came from.

Answers stored before the URL, status and Content-Type were kept (schema 7) have NULL there: their URL is
rebuilt from the template id and kind with the same functions the fetcher used, and `reconstructed` says
which fields were not recorded."""

from dataclasses import dataclass

from scraper.base.errors import ConfigError
from scraper.db import answers, schema, validators
from scraper.mirror import source as db_source
from scraper.sites import n8n

DEFAULT_TYPES = {n8n.API: "application/json", n8n.PAGE: "text/html; charset=utf-8"}


@dataclass(frozen=True)
class Stored:
    template_id: int | None     # None for a catalogue item's page
    version: int
    kind: str
    url: str
    status: int
    content_type: str
    fetched_at: str         # when this body was fetched (ISO 8601, UTC)
    body: bytes
    reconstructed: tuple    # the fields not recorded with the answer: ("url", "status", "content_type")


@dataclass(frozen=True)
class Revisit:
    at: float               # when the content was asked for again (Unix seconds)
    profile: str            # server-not-modified (a 304) or identical-payload-digest (an unchanged 200)
    digest: str             # the content it found unchanged (policy/revalidate.digest)


def revisits(conn, url):
    """The revisits of `url`, oldest first (none on a database older than migration 27)."""
    if not schema.has_table(conn, "revisits"):
        return []
    return [Revisit(float(at), profile, digest) for at, profile, digest, *_ in validators.revisits_of(conn, url)]


def check_source(conn, source):
    """ConfigError when `source` has no stored answer (a typo, or a source never fetched)."""
    if source is not None and not answers.has_source(conn, source):
        known = answers.sources(conn)
        raise ConfigError(f"no stored answer belongs to a source {source!r}; the sources with answers are "
                          f"{', '.join(known) or 'none yet'}.")


def stored(conn, urls, source=None, since=None, live_only=False):
    """Every stored answer version (`Stored`), in (template, version, kind) order, one at a time.
    `urls`: (api_url, site_url) to rebuild old answers' URLs; `since`: ISO 8601 text (fetched at or
    after); `live_only`: leave out templates removed from the site."""
    from scraper.mirror.answers import decompress
    api_url, site_url = db_source.recorded(conn) or urls
    for tid, version, kind, url, status, ctype, at, blob, no_url in answers.stored(conn, source, since, live_only):
        missing = tuple(name for name, v in (("url", None if no_url else url), ("status", status),
                                             ("content_type", ctype)) if v is None)
        if url is None:
            url = n8n.detail_url(api_url, tid) if kind == n8n.API else n8n.page_url(site_url, tid)
        yield Stored(tid, version, kind, url, 200 if status is None else status,
                     ctype or DEFAULT_TYPES.get(kind, "application/octet-stream"), at, decompress(blob), missing)


def count(conn, source=None, since=None, live_only=False):
    """How many answers `stored` would give (for progress and the summary line)."""
    return answers.count_stored(conn, source, since, live_only)
