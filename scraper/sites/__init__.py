"""The sites: what a job key means, where its requests go, how an answer becomes rows and child jobs.

Each site module exposes one object that follows `Site`; the worker looks it up by the job's `site`
column and knows nothing else about it. A site holds no SQL: it returns a `Result`, which
`scraper.mirror.record` writes. A new site is one module plus a line in `_REGISTRY`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from scraper.base.errors import FetchError, ParseError

if TYPE_CHECKING:
    from scraper.base.settings import Settings


JobRow = tuple[str, str, str, str]     # (key, site, url, domain) of a job to queue


@dataclasses.dataclass(frozen=True)
class Result:
    """What one finished job writes, in the transaction that marks it done."""

    # (table, row dict, primary key column): upserted
    rows: tuple[tuple[str, dict[str, Any], str], ...] = ()
    # (table, column, value, rows): the table's rows with column = value are replaced
    links: tuple[tuple[str, str, Any, Sequence[dict[str, Any]]], ...] = ()
    # jobs queued once, known keys left as they are
    children: tuple[JobRow, ...] = ()
    # (row, raw answers {kind: bytes}, fetched_at): a template, versioned by the mirror
    versioned: tuple[tuple[dict[str, Any], dict[str, bytes], str], ...] = ()
    # template ids whose removal is confirmed (their data and versions are kept)
    removed: tuple[int, ...] = ()


class Context(Protocol):
    """What the worker lends a site for one job."""

    def get(self, url: str) -> bytes:
        """One polite GET of the job's domain (lease, rate slot, pause, breaker); FetchError or HandedBack."""

    def gate(self, url: str | None = None) -> None:
        """Wait for the job's domain's turn, for a request a library sends itself (`url`: checked against
        its host's robots.txt first, RobotsDisallowed); HandedBack on a stop."""

    def answered(self) -> None:
        """The domain answered (closes a half-open breaker)."""

    def failed(self, error: FetchError) -> None:
        """A request failed in a way that speaks of the domain (FetchError with its kind)."""

    def fetched_at(self) -> str:
        """The time to store with a row (ISO 8601, UTC)."""

    def logged(self, kind: str, status: int | None, ms: int) -> None:
        """Add a request a library sent itself to the request log (`ok` or its failure kind)."""


class Fetcher(Protocol):
    """A site's per-process side (sessions, library clients), opened after the fork."""

    def fetch(self, job: JobRef, ctx: Context) -> Result:
        """Fetch and extract one job; FetchError, ParseError or JobInvalid when it cannot."""

    def close(self) -> None:
        """Release what `Site.open` made (sessions, a browser)."""


class Site(Protocol):
    """What a job key means: its domain, its job rows, its per-process fetcher, what a removal stores."""

    name: str

    def domain(self, settings: Settings) -> str:
        """The politeness domain of this site's jobs (its rate bucket and breaker)."""

    def job_row(self, settings: Settings, key_value: Any) -> JobRow:
        """(key, site, url, domain) of the job for one item (a template id, a video id)."""

    def open(self, settings: Settings) -> Fetcher:
        """The fetcher of one worker process, opened after the fork."""

    def gone(self, job: JobRef) -> Result:
        """What to store when the job's item answered 404/410 (in the transaction that ends it `invalid`)."""


class JobRef(Protocol):
    """The job a site is asked to fetch (`scraper.db.queue.Job` is one)."""

    @property
    def key(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def domain(self) -> str: ...


def _registry() -> dict[str, Site]:
    from scraper.sites import n8n, youtube  # imported here: the site modules import this package for Result
    return {n8n.SITE: n8n.site, youtube.SITE: youtube.site}


def get(name: str) -> Site | None:
    """The Site named `name`, or None for a site this version does not know."""
    return _registry().get(name)


def enabled(settings: Settings) -> list[str]:
    """Names of the sites this run works on (transcripts can be switched off)."""
    from scraper.sites import youtube
    return [name for name in _registry() if settings.transcripts or name != youtube.SITE]


def domains(settings: Settings) -> list[str]:
    """The politeness domains of the enabled sites."""
    registry = _registry()
    return sorted({registry[name].domain(settings) for name in enabled(settings)})


def children_of(settings: Settings, site_name: str, values: Iterable[Any]) -> tuple[JobRow, ...]:
    """Job rows of `site_name` for `values`, or none when that site is switched off for this run."""
    if site_name not in enabled(settings):
        return ()
    site = _registry()[site_name]
    return tuple(site.job_row(settings, v) for v in values)


def check_storable(row: dict[str, Any]) -> None:
    """ParseError when a text field cannot be stored as it came (a lone surrogate such as "\\ud800" is
    valid JSON but not valid UTF-8): refused rather than stored altered."""
    for name, value in row.items():
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as e:
                raise unstorable(f"answer's {name!r}", e) from None


def unstorable(what: str, e: UnicodeEncodeError) -> ParseError:
    """The ParseError of text that cannot be stored as UTF-8."""
    return ParseError(f"the {what} holds text that is not valid Unicode ({e.reason}: {e.object[e.start:e.end]!a} "
                      f"at character {e.start}); refused rather than stored altered")
