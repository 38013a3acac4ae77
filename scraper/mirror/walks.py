"""The walks of the sources: which are due, walking them, and the record of each walk (for the cadence).

A kind maps to one walk function `walk(conn, settings, source, get, now) -> WalkResult`, where
`get(url) -> bytes` is the polite, bounded GET for seeding (a walk's errand of the polite client,
`politeness.client`: the rate slot, 429 pause and breaker of the URL's domain, proxies, the request log;
FetchError on failure). The n8n kind's walk is the listing walk of `seed --from-search`; the catalogue kind's is
`scraper.mirror.catalogue.walk`. `walk_due` is the one entry point (`scraper seed`, `scraper update`).
"""

import dataclasses
import importlib
import logging
import time

from scraper.base.errors import ConfigError, FetchError, RobotsUnavailable, ScraperError
from scraper.db.walklog import iso, last_walks, next_due, record

__all__ = ["WalkResult", "Outcome", "WalkFailed", "walk_due", "walk_one", "iso", "last_walks",
           "next_due", "record"]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class WalkResult:
    """What one walk found and queued, whether it saw the whole site, and the requests it sent."""

    new: int = 0
    changed: int = 0
    removed: int = 0
    restored: int = 0
    complete: bool = False
    requests: int = 0


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One source's part of `walk_due`: walked (`result`), failed (`error`, one sentence), not due, or
    `skipped` (another process walks it now)."""

    source: object              # base.sources.Source
    result: WalkResult = None
    error: str = None
    next_due_at: float = None   # when it was not due: when it will be
    skipped: bool = False


class WalkFailed(ScraperError):
    """A source's walk could not be done; the message is its one sentence."""


# --- the kinds' walks ---------------------------------------------------------------------------

def _walk_n8n(conn, settings, source, get, now):
    """The listing walk of the search API (its own polite, retried GETs: a page is retried as a job is)."""
    from scraper.mirror import seed, sync
    found = seed.discover(settings, polite=get.client)
    plan, _new, _known = sync.apply(conn, settings, found, now, time.time())
    return WalkResult(len(plan.new), len(plan.changed), len(plan.missing), len(plan.restored), found.complete,
                      found.pages)


def _walk_catalogue(conn, settings, source, get, now):
    try:
        # imported when a catalogue is walked: an n8n-only install never loads its parsers
        catalogue = importlib.import_module("scraper.mirror.catalogue")
    except ModuleNotFoundError as e:
        if e.name != "scraper.mirror.catalogue":
            raise
        raise WalkFailed(f"the source {source.name!r} cannot be walked: this version of scraper has no "
                         f"catalogue kind yet.") from None
    return catalogue.walk(conn, settings, source, get, now)


WALKS = {"n8n": _walk_n8n, "catalogue": _walk_catalogue}


# --- the record of the walks: scraper.db.walklog (read by products without importing this module) ---

# --- walking ----------------------------------------------------------------------------------

def walk_due(conn, settings, now, names=None, adopt=False, clock=time.time):
    """Walk every enabled source that is due at `now` (never walked completely, or its last complete walk
    is older than its `every`); with `names`, walk those sources now, whatever their cadence.

    Each source's URLs are checked before anything is sent (ConfigError, for the caller's one sentence);
    a walk that fails is recorded and told, the others go on. A source that another process walks now (on
    PostgreSQL, many machines may run the cron line) is skipped with a log line. Returns an Outcome per
    enabled source."""
    from scraper.db.runstate import walk_lock
    from scraper.mirror import source as urls
    chosen = _chosen(settings, names)
    walks = last_walks(conn)
    todo, outcomes = [], []
    for src in chosen:
        due_at = next_due(conn, src, now, walks)
        if names is None and due_at > now:
            outcomes.append(Outcome(src, next_due_at=due_at))   # not due: sends nothing
        else:
            todo.append(src)
    for src in todo:        # every check before the first request
        if src.kind == "n8n":
            urls.check(conn, settings.api_url, settings.site_url, adopt, now)
            urls.own_n8n_jobs(conn, settings)
        else:
            urls.check_site(conn, src, adopt, now)
    if not todo:
        return outcomes
    from scraper.politeness import client
    with client.opened(settings, conn, "walk") as polite:
        get = polite.walk()
        for src in todo:
            with walk_lock(settings.db_path, src.name) as mine:
                if not mine:
                    log.info("%s: another walk of this source is running on this database; this one skips it",
                             src.name)
                    outcomes.append(Outcome(src, skipped=True))
                    continue
                get.source = src.name
                outcomes.append(walk_one(conn, settings, src, get, now, clock))
    order = {s.name: i for i, s in enumerate(chosen)}
    return sorted(outcomes, key=lambda o: order[o.source.name])


def fetch_failure(e, timeout_s, url):
    """One sentence for a walk's request that failed for good: the URL tried, and what happened
    (urllib3's own text is a paragraph: only its exception's name is kept)."""
    from scraper.policy import retry
    if e.kind == retry.TIMEOUT:
        return f"{url} did not answer within {timeout_s:g} s (raise --timeout if it is only slow)"
    if e.status is not None:
        return f"{url} answered HTTP {e.status}"
    return (f"could not reach {url} ({str(e).split(':', 1)[0]}); check the network and the source's URL, or try "
            f"`make demo` (it needs no internet)")


def walk_one(conn, settings, source, get, now, clock=time.time):
    """Walk one source and record the walk; its Outcome (a failure is one sentence, never an exception)."""
    started, before = clock(), get.requests
    try:
        result = WALKS[source.kind](conn, settings, source, get, now)
        if source.kind != "n8n":
            result = dataclasses.replace(result, requests=result.requests or get.requests - before)
    except ConfigError:
        raise
    except FetchError as e:
        error = fetch_failure(e, settings.timeout_s, e.url or source.opt("site") or settings.api_url)
    except RobotsUnavailable as e:
        cause = e.__cause__     # no answer at all: the host is down, said as any request that got none
        no_answer = isinstance(cause, FetchError) and cause.status is None
        error = fetch_failure(cause, settings.timeout_s, cause.url) if no_answer else str(e).rstrip(".")
    except ScraperError as e:
        error = str(e).rstrip(".")
    except Exception as e:  # a bug or an answer nobody foresaw ends this source's walk, not the others
        log.exception("the walk of %s failed", source.name)
        error = f"unexpected {type(e).__name__}: {e}"
    else:
        record(conn, source.name, started, clock(), result)
        return Outcome(source, result=result)
    record(conn, source.name, started, clock(), None, error)
    return Outcome(source, error=error)


def _chosen(settings, names):
    """The enabled sources to consider, in the file's order; `names` (given) must name enabled sources."""
    if names is None:
        return [s for s in settings.sources if s.enabled]
    where = f" in {settings.sources_path}" if settings.sources_path else " (without a sources file there is only n8n)"
    chosen = []
    for name in dict.fromkeys(names):
        src = settings.source(name)
        if src is None:
            raise ConfigError(f"--source {name}: no such source{where}.")
        if not src.enabled:
            raise ConfigError(f"--source {name}: that source is disabled{where}; enable it to walk it.")
        chosen.append(src)
    return chosen
