"""Filling the queue: template ids from the search API, or from a file of ids and URLs."""

import logging
import typing

from . import http
from .errors import ConfigError
from .limiter import DomainLimiter
from .sites import n8n

log = logging.getLogger(__name__)


def job_rows(settings, ids):
    """(key, site, url, domain) rows for the jobs table."""
    for template_id in ids:
        yield n8n.site.job_row(settings, template_id)


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

    def get(url):
        limiter.acquire(settings.domain)
        return http.fetch(session, url, settings.timeout_s).content

    try:
        return Walk(*n8n.discover(settings.api_url, get, limit))
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
