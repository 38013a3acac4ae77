"""The remote browser sessions that workers which no longer run left open in `browser_sessions` (a kill -9,
a crash): the supervisor closes them at its start and at its end.

A `cdp:` or `playwright:` session needs nothing more: the contexts a client made are disposed by the remote
browser when the client's connection drops, however it drops. A Browserbase session ends when its client
disconnects too, but is billed a minute at least and may linger; it is told REQUEST_RELEASE, once, here. A
session that cannot be released (no key now, the API unreachable) is still marked closed: it ends at its
timeout, and asking again at every start would not make it end sooner.
"""

import logging
from collections.abc import Callable

import psutil

from scraper.db import browsersessions, runstate
from scraper.db.backend import Conn, Row

log = logging.getLogger(__name__)


def api_of(s):
    """A `net.browserbase.Api` for the run's Browserbase sessions (the first browserbase source's URL, else the
    run's), or None without a key."""
    if s.browserbase_key is None:
        return None
    from scraper.net import browserbase
    urls = [s.browser_of(src).api_url for src in s.sources] + [s.browserbase_url]
    url = next(u for u in urls if u)
    return browserbase.Api(url, s.browserbase_key, s.browserbase_project, user_agent=s.user_agent)


def worker_gone(row: Row) -> bool:
    """Whether the worker of a `browser_sessions` row of this machine's run no longer runs (its pid is gone)."""
    return not (row["host"] == runstate.host() and psutil.pid_exists(row["pid"]))


def sweep(s, conn: Conn, now: float, gone: Callable[[Row], bool]) -> int:
    """Close the open sessions for which `gone(row)` is true, a Browserbase one released first; how many."""
    rows = [r for r in browsersessions.left_open(conn) if gone(r)]
    if not rows:
        return 0
    api = None
    released = unreleased = 0
    for r in rows:
        if r["provider"] == "browserbase" and r["provider_session"]:
            api = api or api_of(s)
            if api is not None and api.release(r["provider_session"]):
                released += 1
            else:
                unreleased += 1
        browsersessions.close(conn, r["id"], now)
    log.info("closed %d remote browser session(s) left open by workers that no longer run%s", len(rows),
             f"; {released} released at Browserbase" if released else "")
    if unreleased:
        log.warning("%d Browserbase session(s) of workers that no longer run could not be released%s; they end at "
                    "their timeout", unreleased, "" if s.browserbase_key else " (no SCRAPER_BROWSERBASE_KEY)")
    return len(rows)
