"""Politeness for one short visit of one site without a database (`scraper discover`).

The run's politeness keeps its state in the database, shared by every process; a visit is one process
that reads a few dozen pages once, so it keeps the same rules in memory: the site's robots.txt is read
first and obeyed (RFC 9309 outcomes, `scraper.policy.robots`), every request (the browser's included,
through `gate`) waits for one pace (`rate_per_s`, which Crawl-delay and Request-rate only lower), and a
budget of requests is never exceeded (BudgetSpent before the request that would). The request itself is
the caller's `send(url, max_bytes)` (`scraper.net.http.fetch` over a session: bounded in time and size)."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from protego import Protego

from scraper.base.clock import SYSTEM, Clock
from scraper.base.errors import BudgetSpent, FetchError, RobotsDisallowed, RobotsUnavailable
from scraper.policy import retry
from scraper.policy import robots as rules
from scraper.politeness.robots import ROBOTS_MAX_BYTES, Get, host_of, robots_url

log = logging.getLogger(__name__)


class Visit:
    """One site's robots.txt, pace and request budget. `get(url)` is one polite, bounded GET of a URL of the
    site's host; `gate(url)` is the same check and wait for a request someone else sends (the browser)."""

    def __init__(self, site_url: str, user_agent: str, rate_per_s: float, budget: int, send: Get, max_bytes: int,
                 clock: Clock = SYSTEM) -> None:
        self.host = host_of(site_url)
        parts = urlsplit(site_url)
        self.origin = f"{parts.scheme}://{parts.netloc}"      # as given: robots.txt is asked for here
        self.user_agent = user_agent
        self.token = rules.product_token(user_agent)
        self.rate_per_s = float(rate_per_s)
        self.budget = int(budget)
        self.send, self.max_bytes = send, max_bytes
        self.clock = clock
        self.sent = 0                               # requests sent (robots.txt, sitemaps, pages, the browser's)
        self.by_kind: dict[str, int] = {}           # what they were: robots, sitemap, page, browser
        self.refused = 0                            # URLs robots.txt disallowed (never requested)
        self.robots_status: int | None = None       # HTTP status of robots.txt (None: not read yet)
        self.crawl_delay_s: float | None = None
        self.sitemaps: list[str] = []               # its Sitemap: lines
        self._parser: Protego | None = None         # None: everything allowed
        self._next_at: float | None = None          # monotonic time the next request may go
        self._read_robots()

    # --- robots.txt ---------------------------------------------------------------------

    def _read_robots(self) -> None:
        url = robots_url(self.origin)
        try:
            body = self._send(url, "robots", ROBOTS_MAX_BYTES)
            self.robots_status = 200
        except FetchError as e:
            status = None if e.kind == retry.TOO_LARGE else e.status
            if rules.outcome_of(status) == rules.UNAVAILABLE:
                raise RobotsUnavailable(self.host, status or e.kind) from e
            self.robots_status = status
            log.info("robots.txt of %s: HTTP %s, everything is allowed", self.host, status)
            return
        text = bytes(body).decode("utf-8", "replace")
        self._parser = Protego.parse(text)
        self.sitemaps = list(self._parser.sitemaps)
        self.crawl_delay_s = self._parser.crawl_delay(self.token)
        rr = self._parser.request_rate(self.token)
        cap = rules.robots_rate(self.crawl_delay_s, (rr.requests, rr.seconds) if rr else None)
        if cap is not None and cap < self.rate_per_s:
            log.info("robots.txt of %s asks for at most %.3g requests/s: this visit keeps to it", self.host, cap)
            self.rate_per_s = cap

    @property
    def robots_rate_per_s(self) -> float | None:
        """The rate robots.txt allows (Crawl-delay, Request-rate), or None when it says nothing."""
        rr = self._parser.request_rate(self.token) if self._parser else None
        return rules.robots_rate(self.crawl_delay_s, (rr.requests, rr.seconds) if rr else None)

    def allowed(self, url: str) -> bool:
        """Whether robots.txt lets us fetch `url` (a URL of another host: never)."""
        if host_of(url) != self.host:
            return False
        return self._parser is None or self._parser.can_fetch(url, self.token)

    # --- requests -----------------------------------------------------------------------

    def left(self) -> int:
        return self.budget - self.sent

    def get(self, url: str, kind: str = "page", max_bytes: int | None = None) -> bytes:
        """The body of a 2xx answer to `url`; RobotsDisallowed (nothing sent), BudgetSpent, FetchError."""
        self._check(url)
        return self._send(url, kind, max_bytes or self.max_bytes)

    def gate(self, url: str) -> None:
        """Before a request the browser sends: robots.txt, the budget and the pace (raises to refuse)."""
        self._check(url)
        self._take("browser")

    def _check(self, url: str) -> None:
        if not self.allowed(url):
            self.refused += 1
            raise RobotsDisallowed(f"robots.txt of {urlsplit(url).netloc} disallows {urlsplit(url).path} "
                                   f"for user-agent {self.token!r}")

    def _take(self, kind: str) -> None:
        """Count one request against the budget and wait for its turn."""
        if self.sent >= self.budget:
            raise BudgetSpent(f"the visit has sent its {self.budget} request(s)")
        now = self.clock.monotonic()
        if self._next_at is not None and self._next_at > now:
            self.clock.sleep(self._next_at - now)
            now = self.clock.monotonic()
        self._next_at = max(now, self._next_at or now) + 1.0 / self.rate_per_s
        self.sent += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1

    def _send(self, url: str, kind: str, max_bytes: int) -> bytes:
        self._take(kind)
        return self.send(url, max_bytes)
