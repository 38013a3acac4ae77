"""Where a site's `Result` becomes rows: the core stores what a site returns, in the job's transaction.

Sites hold no SQL (import-linter keeps them away from `db`); they return a `Result` and this module
writes it: plain rows, link tables, versioned items with their raw answers, removals, what `fetcher = "auto"`
learnt (fetch_patterns) and child jobs.
"""

import dataclasses

from scraper import sites
from scraper.db import fetchlearn, templates
from scraper.db.queue import DEFAULT_SOURCE, add_jobs
from scraper.db.store import replace_links, transaction, upsert
from scraper.mirror import answers, items
from scraper.policy import redact

CHILD_PRIORITY = 1          # a child job completes a record already stored: it goes first when its domain can send


def prepare(result: sites.Result) -> sites.Result:
    """The Result with its costly pure parts done before the job's transaction, so that the write lock every
    worker shares is held for the SQL alone: raw answers hashed and compressed (`answers.Packed`), a template
    row's redaction verdict decided (`redact.decided` keeps it for the upsert)."""
    if not (result.versioned or result.items or result.rejected):
        return result
    for row, _raw, _at in result.versioned:
        redact.decided(row)
    return dataclasses.replace(
        result,
        versioned=tuple((row, _packed(raw), at) for row, raw, at in result.versioned),
        items=tuple((src, key, url, rec, _packed(raw, hashed=False), at, vol)
                    for src, key, url, rec, raw, at, vol in result.items),
        rejected=tuple((src, key, answers.pack(body), at) for src, key, body, at in result.rejected))


def _packed(raw, hashed=True):
    return {kind: answers.pack(body, hashed) for kind, body in raw.items()}


def write(conn, result: sites.Result, now: float, at: str = "", source: str = DEFAULT_SOURCE) -> None:
    """Write a Result inside the caller's transaction; `at` (ISO 8601) dates a removal; child jobs belong
    to `source`, the source of the job that found them."""
    for table, row, pk in result.rows:
        upsert(conn, table, row, pk)
    for row, raw, fetched_at in result.versioned:
        answers.store(conn, row, raw, fetched_at)
    for table, column, value, rows in result.links:
        replace_links(conn, table, column, value, rows)
    for source, key, url, rec, raw, fetched_at, volatile in result.items:
        items.store(conn, source, key, url, rec, raw, fetched_at, volatile)
    for template_id in result.removed:
        answers.mark_removed(conn, template_id, at)
    for source, key in result.removed_items:
        items.mark_removed(conn, source, key, at)
    for src, pattern, learned, by_http, by_browser in result.learned:
        fetchlearn.record(conn, src, pattern, learned, by_http, by_browser, now)
    for src, key, body, fetched_at in result.rejected:
        answers.keep(conn, src, key, answers.REJECTED_VERSION, answers.REJECTED, answers.content_hash(body),
                     fetched_at, body, template_id=int(key) if key.isdigit() else None)
    if result.children:
        add_jobs(conn, result.children, now, priority=CHILD_PRIORITY, source=source)


def resume(conn, settings, now: float) -> int:
    """Queue the videos of templates stored while transcripts were off (or before transcripts existed);
    called before the workers start. Returns how many jobs were new."""
    from scraper.sites import youtube
    with transaction(conn) as c:
        videos = templates.videos_without_jobs(c)
        return add_jobs(c, sites.children_of(settings, youtube.SITE, videos), now, priority=CHILD_PRIORITY,
                        source=settings.n8n_source)
