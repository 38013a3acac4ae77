"""Filling the queue: template ids from the search API, or from a file of ids and URLs."""

import logging
import time

from . import http, retry
from .errors import ConfigError, FetchError, ParseError
from .limiter import DomainLimiter
from .sites import n8n

log = logging.getLogger(__name__)

MAX_429_WAITS = 20          # "slow down" spends no attempt; this many in a row on one page and we give up


def job_rows(settings, ids):
    """(key, site, url, domain) rows for the jobs table."""
    domain = settings.domain
    for template_id in ids:
        yield n8n.job_key(template_id), n8n.SITE, n8n.page_url(settings.site_url, template_id), domain


def discover(settings, limit=None, sleep=time.sleep):
    """Template ids from the search API, page after page, through the shared rate limit.

    A failing page is retried as `run` retries a job; a page that still fails raises, so a partial walk
    is never taken for the whole library."""
    limiter = DomainLimiter(settings.limiter_path, settings.rate_per_s, settings.burst)
    session = http.make_session(settings.user_agent)
    ids, seen, page = [], set(), 1
    try:
        while True:
            page_ids, total = _search_page(settings, limiter, session, page, sleep)
            # the default order is a popularity ranking that moves between calls: keep ids, not positions
            for template_id in page_ids:
                if template_id not in seen:
                    seen.add(template_id)
                    ids.append(template_id)
            log.info("search page %d: %d templates (%d of %d so far)", page, len(page_ids), len(ids), total)
            if limit is not None and len(ids) >= limit:
                return ids[:limit]
            if n8n.search_done(page, n8n.SEARCH_ROWS, len(page_ids), total):
                return ids
            page += 1
    finally:
        session.close()
        limiter.close()


def _search_page(settings, limiter, session, page, sleep):
    """(ids, total) of one search page, retried with the run's policy (--max-attempts, backoff, 429 pauses)."""
    url = n8n.search_url(settings.api_url, page)
    attempts = waits = 0
    while True:
        limiter.acquire(settings.domain)
        try:
            page_ids, total = n8n.parse_search_page(
                http.fetch(session, url, settings.timeout_s, settings.max_answer_bytes))
            expected = min(n8n.SEARCH_ROWS, total - (page - 1) * n8n.SEARCH_ROWS)
            if len(page_ids) < expected:
                # a short page before the end would end the walk early: not complete, so not accepted
                raise ParseError(f"search page {page} lists {len(page_ids)} templates, {expected} were due "
                                 f"({total} in all)")
            return page_ids, total
        except (FetchError, ParseError) as e:
            kind, status = (e.kind, e.status) if isinstance(e, FetchError) else (retry.PARSE, 200)
            retry_after = getattr(e, "retry_after", None)
            if kind == retry.HTTP_429:
                waits += 1
            else:
                attempts += 1
            outcome = retry.decide(kind, status, attempts, settings.max_attempts, retry_after,
                                   settings.backoff_base_s)
            if outcome.action != retry.RETRY or waits > MAX_429_WAITS:
                raise
            log.warning("%s; trying search page %d again in %.1f s", e, page, outcome.delay_s)
            sleep(outcome.delay_s)


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
