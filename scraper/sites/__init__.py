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
from scraper.policy.fetchmode import Learned, Verdict

if TYPE_CHECKING:
    from scraper.base.settings import Settings


JobRow = tuple[str, ...]     # (key, site, url, domain[, source]) of a job to queue (its source: n8n when left out)


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
    # (source, key, url, record, raw answers {kind: bytes}, fetched_at, volatile fields): a catalogue item
    items: tuple[tuple[str, str, str, dict[str, Any], dict[str, bytes], str, Sequence[str]], ...] = ()
    # (source, key) of catalogue items whose removal is confirmed
    removed_items: tuple[tuple[str, str], ...] = ()
    # (source, URL pattern, fetchmode.Learned, by_http, by_browser): what a `fetcher = "auto"` page taught its
    # pattern and which paths it took (scraper.db.fetchlearn.record)
    learned: tuple[tuple[str, str, Learned, bool, bool], ...] = ()
    # (source, key, raw answer, fetched_at): an answer refused (a graph that is not a graph), kept as served
    # beside the versions (version 0, kind `rejected`) for whoever looks into why its job ended invalid
    rejected: tuple[tuple[str, str, bytes, str], ...] = ()


class Context(Protocol):
    """What the worker lends a site for one job."""

    def get(self, url: str) -> bytes:
        """One polite GET of the job's domain (lease, rate slot, pause, breaker); FetchError or HandedBack."""

    def render(self, url: str, allow_domains: Sequence[str] = (), settle: str | None = None) -> tuple[str, str]:
        """(final_url, html) of the page in the worker's browser, every request it sends polite (rate slot,
        robots) and the page bounded (--browser-timeout, --max-answer-mb); FetchError or HandedBack."""

    def browser_ready(self) -> None:
        """Before a page that will need the worker's browser sends anything: the browser launched, after a
        wait for a browser slot; HandedBack (nothing sent, the job free for a worker that has a browser)
        when every slot stays held."""

    def verdict(self, pattern: str) -> Verdict | None:
        """What `fetcher = "auto"` has learnt about this URL pattern of the job's source, or None (read
        from the database by the worker: a site holds no SQL)."""

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

    def domains(self, settings: Settings) -> list[str]:
        """Every politeness domain of this site's jobs (a catalogue has one per source)."""

    def job_row(self, settings: Settings, key_value: Any) -> JobRow:
        """(key, site, url, domain) of the job for one item (a template id, a video id)."""

    def requests_per_job(self, settings: Settings) -> int:
        """The requests a typical job sends (fair claims count a job by them: a transcript is three)."""

    def open(self, settings: Settings) -> Fetcher:
        """The fetcher of one worker process, opened after the fork."""

    def gone(self, job: JobRef) -> Result:
        """What to store when the job's item answered 404/410 (in the transaction that ends it `invalid`)."""


class JobRef(Protocol):
    """The job a site is asked to fetch (`scraper.db.backend.Job` is one)."""

    @property
    def key(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def domain(self) -> str: ...
    @property
    def source(self) -> str: ...     # the source of the sources file it belongs to (a catalogue finds its config)


def _registry() -> dict[str, Site]:
    from scraper.sites import catalogue, n8n, youtube  # here: the site modules import this package for Result
    return {n8n.SITE: n8n.site, youtube.SITE: youtube.site, catalogue.SITE: catalogue.site}


def get(name: str) -> Site | None:
    """The Site named `name`, or None for a site this version does not know."""
    return _registry().get(name)


def enabled(settings: Settings) -> list[str]:
    """Names of the sites this run works on (transcripts can be switched off)."""
    from scraper.sites import youtube
    return [name for name in _registry() if settings.transcripts or name != youtube.SITE]


def domains(settings: Settings) -> list[str]:
    """The politeness domains of the enabled sites, and those of the sources this run works that are not
    n8n (a catalogue's site), so that claims are fair between all of them."""
    registry = _registry()
    # a catalogue has a domain per source: those of the sources this run works, not every one in the file
    own = {d for name in enabled(settings) if name != "catalogue" for d in registry[name].domains(settings)}
    return sorted(d for d in own | {d for src in settings.working_sources if src.kind != "n8n"
                                    for d in settings.source_domains(src)} if d)


def requests_per_job(settings: Settings) -> dict[str, int]:
    """{domain: the requests a typical job of the enabled sites sends there} (the most of its sites)."""
    registry, out = _registry(), dict[str, int]()
    for name in enabled(settings):
        site = registry[name]
        for domain in site.domains(settings):
            out[domain] = max(out.get(domain, 1), site.requests_per_job(settings))
    return out


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
