"""Filling the queue: template ids from the search API, or from a file of ids and URLs."""

import itertools
import logging
import typing

from . import http
from .errors import ConfigError
from .limiter import DomainLimiter
from .sites import n8n

log = logging.getLogger(__name__)


def job_rows(settings, ids):
    """(key, site, url, domain) rows for the jobs table."""
    domain = settings.domain
    for template_id in ids:
        yield n8n.job_key(template_id), n8n.SITE, n8n.page_url(settings.site_url, template_id), domain


class Walk(typing.NamedTuple):
    """One walk of the listing: its entries by id (listing order), and whether it saw the whole listing."""

    entries: dict
    complete: bool
    pages: int


def discover(settings, limit=None):
    """The listing from the search API, page after page, through the shared rate limit: a Walk.
    A walk stopped by `limit` before the last page is not complete."""
    limiter = DomainLimiter(settings.limiter_path, settings.rate_per_s, settings.burst)
    session = http.make_session(settings.user_agent)
    entries, page = {}, 1
    try:
        while True:
            limiter.acquire(settings.domain)
            resp = http.fetch(session, n8n.search_url(settings.api_url, page), settings.timeout_s)
            items, total = n8n.parse_search_entries(resp.content)
            # the default order is a popularity ranking that moves between calls: keep ids, not positions
            for item in items:
                entries.setdefault(item["id"], item)
            log.info("search page %d: %d templates (%d of %d so far)", page, len(items), len(entries), total)
            done = n8n.search_done(page, n8n.SEARCH_ROWS, len(items), total)
            if limit is not None and len(entries) >= limit:
                kept = dict(itertools.islice(entries.items(), limit))
                return Walk(kept, done and len(kept) == len(entries), page)
            if done:
                return Walk(entries, True, page)
            page += 1
    finally:
        session.close()
        limiter.close()


def read_ids_file(path, site_url):
    """Ids from a file of template ids or workflow URLs; ConfigError naming every bad line."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise ConfigError(f"the ids file {path} does not exist.") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"the ids file {path} cannot be read ({e}).") from e
    ids, errors = n8n.parse_id_lines(lines, site_url)
    if errors:
        shown = "; ".join(f"line {no}: {text!r} {reason}" for no, text, reason in errors[:20])
        more = f" (and {len(errors) - 20} more)" if len(errors) > 20 else ""
        raise ConfigError(f"{path} has {len(errors)} bad line(s), nothing was seeded: {shown}{more}.")
    return ids
