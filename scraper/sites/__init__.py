"""The sites: what a job key means, where its requests go, how an answer becomes rows and child jobs.

Each site module exposes one object that follows `Site`; the worker looks it up by the job's `site`
column and knows nothing else about it. A site holds no SQL: it returns a `Result`, which
`scraper.mirror.record` writes. A new site is one module plus a line in `_REGISTRY`.
"""

import dataclasses
from collections.abc import Iterable
from typing import Protocol


@dataclasses.dataclass(frozen=True)
class Result:
    """What one finished job writes, in the transaction that marks it done."""

    rows: tuple = ()        # (table, row dict, primary key column): upserted
    links: tuple = ()       # (table, column, value, rows): the table's rows with column = value are replaced
    children: tuple = ()    # (key, site, url, domain): jobs queued once, known keys left as they are
    versioned: tuple = ()   # (row, raw answers {kind: bytes}, fetched_at): a template, versioned by the mirror
    removed: tuple = ()     # template ids whose removal is confirmed (their data and versions are kept)


class Context(Protocol):
    """What the worker lends a site for one job."""

    def get(self, url: str) -> bytes:
        """One polite GET of the job's domain (lease, rate slot, pause, breaker); FetchError or HandedBack."""

    def gate(self, url: str = None) -> None:
        """Wait for the job's domain's turn, for a request a library sends itself (`url`: checked against
        its host's robots.txt first, RobotsDisallowed); HandedBack on a stop."""

    def answered(self) -> None:
        """The domain answered (closes a half-open breaker)."""

    def failed(self, error) -> None:
        """A request failed in a way that speaks of the domain (FetchError with its kind)."""

    def fetched_at(self) -> str:
        """The time to store with a row (ISO 8601, UTC)."""

    def logged(self, kind: str, status, ms: int) -> None:
        """Add a request a library sent itself to the request log (`ok` or its failure kind)."""


class Fetcher(Protocol):
    """A site's per-process side (sessions, library clients), opened after the fork."""

    def fetch(self, job, ctx: Context) -> Result:
        """Fetch and extract one job; FetchError, ParseError or JobInvalid when it cannot."""

    def close(self) -> None:
        ...


class Site(Protocol):
    name: str

    def domain(self, settings) -> str:
        """The politeness domain of this site's jobs (its rate bucket and breaker)."""

    def job_row(self, settings, key_value) -> tuple:
        """(key, site, url, domain) of the job for one item (a template id, a video id)."""

    def open(self, settings) -> Fetcher:
        ...

    def gone(self, job) -> Result:
        """What to store when the job's item answered 404/410 (in the transaction that ends it `invalid`)."""


def _registry():
    from scraper.sites import n8n, youtube  # imported here: the site modules import this package for Result
    return {n8n.SITE: n8n.site, youtube.SITE: youtube.site}


def get(name):
    """The Site named `name`, or None for a site this version does not know."""
    return _registry().get(name)


def enabled(settings) -> list:
    """Names of the sites this run works on (transcripts can be switched off)."""
    from scraper.sites import youtube
    return [name for name in _registry() if settings.transcripts or name != youtube.SITE]


def domains(settings) -> list:
    """The politeness domains of the enabled sites."""
    return sorted({get(name).domain(settings) for name in enabled(settings)})



def children_of(settings, site_name: str, values: Iterable) -> tuple:
    """Job rows of `site_name` for `values`, or none when that site is switched off for this run."""
    if site_name not in enabled(settings):
        return ()
    site = get(site_name)
    return tuple(site.job_row(settings, v) for v in values)


def check_storable(row: dict):
    """ParseError when a text field cannot be stored as it came (a lone surrogate such as "\\ud800" is
    valid JSON but not valid UTF-8): refused with a reason rather than stored altered."""
    for name, value in row.items():
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as e:
                raise unstorable(f"answer's {name!r}", e) from None


def unstorable(what: str, e: UnicodeEncodeError):
    from scraper.base.errors import ParseError
    return ParseError(f"the {what} holds text that is not valid Unicode ({e.reason}: {e.object[e.start:e.end]!a} "
                      f"at character {e.start}); refused rather than stored altered")
