"""Filling the queue: template ids from the search API, or from a file of ids and URLs."""

import logging
import time
import typing

from scraper.base.errors import ConfigError, FetchError, ParseError
from scraper.db import store
from scraper.mirror.readahead import ReadAhead
from scraper.policy import retry
from scraper.politeness import client
from scraper.sites import n8n

log = logging.getLogger(__name__)

MAX_429_WAITS = 20          # "slow down" spends no attempt; this many in a row on one page and we give up


def job_rows(settings, ids):
    """(key, site, url, domain, source) rows for the jobs table."""
    for template_id in ids:
        yield (*n8n.site.job_row(settings, template_id), settings.n8n_source)


class Walk(typing.NamedTuple):
    """One walk of the listing: its entries by id (listing order), and whether it saw the whole listing."""

    entries: dict
    complete: bool
    pages: int


def discover(settings, limit=None, sleep=time.sleep, clock=None, polite=None):
    """The listing from the search API, page after page, through the polite client: a Walk.

    Every page is a request of the polite client (`politeness.client`): the shared rate slot, the domain's
    429 pause (a 429 pauses the run's workers too), its breaker, the proxies, the request log. A failing
    page is retried as `run` retries a job (`sleep` between tries); a page that still fails raises, so a
    partial walk is never taken for the whole library. A walk stopped by `limit` before the last page is
    not complete.

    Each page's URL is checked against its host's robots.txt first (RobotsDisallowed, RobotsUnavailable),
    fetched through the same client and stored for `run` to reuse. `polite`: the client of the caller (a
    walk's); without one, discover opens its own on the settings' database."""
    if polite is not None:
        return _walk(settings, polite, limit, sleep)
    conn = store.open_db(settings.db_path)
    try:
        with client.opened(settings, conn, "seed", clock) as own:
            return _walk(settings, own, limit, sleep)
    finally:
        conn.close()


def _walk(settings, polite, limit, sleep):
    get_page = polite.walk(settings.n8n_source, settings.domain, sleep=sleep)     # issue 29: proxies too
    ahead = ReadAhead(settings, settings.n8n_source, settings.domain, sleep)

    def get(url, parse):
        return _get_page(settings, get_page, url, parse, sleep, first=ahead.take(url))

    try:
        return Walk(*n8n.discover(settings.api_url, get, limit, ahead=ahead.want))
    finally:
        ahead.close()


def _get_page(settings, get, url, parse, sleep, first=None):
    """`parse(body)` of one search page (`get(url)`: the polite GET), retried with the run's policy
    (--max-attempts, backoff, 429 pauses). `first()`, when given, is the first try (a page read ahead)."""
    attempts = waits = 0
    while True:
        try:
            fetched, first = first, None
            body = fetched() if fetched is not None else get(url)
            return _parsed(parse, body, url)
        except (FetchError, ParseError) as e:
            kind, status = (e.kind, e.status) if isinstance(e, FetchError) else (retry.PARSE, 200)
            retry_after = getattr(e, "retry_after", None)
            if kind == retry.HTTP_429:
                waits += 1
            else:
                attempts += 1
            outcome = retry.decide(kind, status, attempts, settings.max_attempts, retry_after,
                                   settings.backoff_base_s)
            if outcome.action != retry.RETRY or waits > MAX_429_WAITS or (kind == retry.PROXY and
                                                                          attempts >= settings.max_attempts):
                raise
            log.warning("%s: %s; trying again in %.1f s", url, e.brief() if isinstance(e, FetchError) else e,
                        outcome.delay_s)
            sleep(outcome.delay_s)


def _parsed(parse, body, url):
    """`parse(body)`, any failure a ParseError: a page is the walk's unit, as a job is the run's, so an
    answer that makes the parser raise anything (JSON nested too deep: RecursionError) fails that page."""
    try:
        return parse(body)
    except ParseError:
        raise
    except Exception as e:
        raise ParseError(f"the answer could not be parsed ({type(e).__name__}: {str(e)[:200]})", url) from e


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
    if not ids:
        raise ConfigError(f"the ids file {path} names no template (it is empty or only blank lines and "
                          f"comments); nothing was seeded.")
    return ids
