"""One process's side of the proxy pool, kept by its polite client (`politeness.client`): which proxy the
next request to a domain takes, what a proxy's fault or a 403 does to it, the requests each proxy carried.
The rules are `policy.proxies`; the shared state is the database's (`db.proxies`), so every worker and
machine sees a quarantine or a ban at once.

A worker keeps one proxy per domain (`bound`) until it fails. The pool sits below the per-domain rate: the
worker takes the domain's slot, then asks `choose`; nothing here sends to a site on its own, apart from the
optional `proxy_check_url` probes (bounded like any request)."""

import logging
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from scraper.base.clock import SYSTEM, Clock
from scraper.base.errors import FetchError
from scraper.base.proxies import ProxyUrl
from scraper.db import proxies as rows
from scraper.db.backend import Conn
from scraper.net import http
from scraper.policy import proxies as policy

if TYPE_CHECKING:
    import requests

    from scraper.base.settings import Settings

log = logging.getLogger(__name__)

HEALTH_TTL_S = 0.5          # a worker re-reads the shared health at most this often (its own changes at once)
FLUSH_S = 2.0               # request counts go to the database this often, and when the worker closes
CHECK_TIMEOUT_S = 10.0      # one probe of proxy_check_url through a proxy
CHECK_MAX_BYTES = 2**20


class Pool:
    """The proxy pool as one worker process sees it (opened after the fork, like its session)."""

    def __init__(self, settings: "Settings", conn: Conn, session: "requests.Session", name: str = "",
                 clock: Clock = SYSTEM, start: int = 0, rng: random.Random | None = None) -> None:
        self.s, self.conn, self.session, self.name, self.clock = settings, conn, session, name, clock
        self.start = start          # where this worker starts round the list, so workers spread over proxies
        self.rng = rng or random.Random()
        self.bound: dict[str, ProxyUrl] = {}
        self._health: dict[str, policy.Health] = {}
        self._read_at = float("-inf")
        self._tally: dict[str, int] = {}
        self._flushed_at = clock.monotonic()

    def list_for(self, source_name: str | None) -> tuple[ProxyUrl, ...]:
        """The proxies of a job's source: its own `proxies` when the sources file gives them, else the
        run's (--proxy, SCRAPER_PROXIES); () for none (requests go as without a pool)."""
        source = self.s.source(source_name) if source_name else None
        return (source.proxies if source is not None else ()) or tuple(self.s.proxies)

    def health(self, fresh: bool = False) -> dict[str, policy.Health]:
        if fresh or self.clock.monotonic() - self._read_at > HEALTH_TTL_S:
            self._health = rows.read(self.conn)
            self._read_at = self.clock.monotonic()
        return self._health

    def choose(self, domain: str, pool: Sequence[ProxyUrl], avoid: frozenset[str] = frozenset()) -> ProxyUrl | None:
        """The proxy for the next request to `domain` (probed first when its quarantine just ended and a
        check URL is set), `direct` when none is usable and the list has it, else None."""
        while True:
            now = self.clock()
            health = self.health()
            picked = policy.choose(pool, health, domain, now, self.bound.get(domain), self.start, avoid)
            if picked is None:
                return next((p for p in pool if p.direct), None)
            proxy = next(p for p in pool if p == picked)
            if self.s.proxy_check_url and policy.needs_check(health.get(proxy, policy.Health()), now) \
                    and not self.check(proxy):
                continue        # quarantined again: look for another
            if self.bound.get(domain) != proxy:
                log.debug("%s %s goes through %s", self.name, domain, proxy)
            self.bound[domain] = proxy
            return proxy

    def wait_until(self, domain: str, pool: Sequence[ProxyUrl]) -> float:
        """When a proxy of `pool` is next usable for `domain`."""
        return policy.wait_until(pool, self.health(), domain, self.clock())

    def gives_up(self, domain: str, pool: Sequence[ProxyUrl]) -> bool:
        return policy.gives_up(pool, self.health(fresh=True), domain, self.clock(), self.s.give_up_after_s)

    def usable(self, domain: str, pool: Sequence[ProxyUrl]) -> bool:
        """Some proxy of `pool` (or `direct`) could carry a request to `domain` now."""
        now, health = self.clock(), self.health()
        return any(p.direct or policy.usable(health.get(p, policy.Health()), domain, now) for p in pool)

    # --- after a request ----------------------------------------------------------------

    def carried(self, proxy: ProxyUrl) -> None:
        """The proxy brought an answer from the site (any status): counted; good again if it was not."""
        if proxy.direct:
            return
        self._tally[proxy] = self._tally.get(proxy, 0) + 1
        if self.health().get(proxy, policy.Health()) != policy.on_success(self.health().get(proxy, policy.Health())):
            _, after = rows.update(self.conn, proxy, policy.on_success, self.clock())
            self._health[proxy] = after
            log.info("%s proxy %s is good again", self.name, proxy)
        self.flush()

    def failed(self, proxy: ProxyUrl, why: str) -> None:
        """The proxy failed (its fault, not the site's): quarantined, and no domain stays bound to it."""
        if proxy.direct:
            return
        now = self.clock()
        _, after = rows.update(self.conn, proxy, lambda h: policy.on_failure(h, now, self.s.proxy_quarantine_s,
                                                                             self.rng), now)
        self._health[proxy] = after
        self.bound = {d: p for d, p in self.bound.items() if p != proxy}
        log.warning("%s proxy %s quarantined for %.0f s (%d failure(s) in a row): %s", self.name, proxy,
                    after.until - now, after.streak, why)

    def bans_on_403(self, domain: str, pool: Sequence[ProxyUrl], proxy: ProxyUrl) -> bool:
        return not proxy.direct and policy.bans_on_403(pool, self.health(fresh=True), domain, self.clock(), proxy)

    def ban(self, proxy: ProxyUrl, domain: str) -> None:
        until = self.clock() + policy.BAN_S
        rows.ban(self.conn, proxy, domain, until)
        self.health(fresh=True)
        if self.bound.get(domain) == proxy:
            del self.bound[domain]
        log.warning("%s %s answers 403 through proxy %s while others get answers: banned for %s for %.0f h",
                    self.name, domain, proxy, domain, policy.BAN_S / 3600)

    def unban(self, proxy: ProxyUrl, domain: str) -> None:
        rows.unban(self.conn, proxy, domain)
        self.health(fresh=True)

    def check(self, proxy: ProxyUrl) -> bool:
        """Probe `proxy_check_url` through `proxy`: good when it answers 2xx, else quarantined again."""
        try:
            http.fetch(self.session, self.s.proxy_check_url, min(CHECK_TIMEOUT_S, self.s.timeout_s), CHECK_MAX_BYTES,
                       proxy=proxy)
        except FetchError as e:
            self.failed(proxy, f"its check of {self.s.proxy_check_url} failed: {e.brief()}")
            return False
        _, self._health[proxy] = rows.update(self.conn, proxy, policy.on_success, self.clock())
        return True

    def flush(self, force: bool = False) -> None:
        """Write the request counts (every FLUSH_S, or now)."""
        if not self._tally or (not force and self.clock.monotonic() - self._flushed_at < FLUSH_S):
            return
        tally, self._tally = self._tally, {}
        self._flushed_at = self.clock.monotonic()
        rows.count_requests(self.conn, tally, self.clock())


def check_all(settings: "Settings", conn: Conn, clock: Clock = SYSTEM) -> dict[str, bool]:
    """Before a run: probe every proxy of the run and of the sources through `proxy_check_url` (nothing
    without one); {proxy as shown: answered}. A proxy that fails starts the run quarantined."""
    if not settings.proxy_check_url:
        return {}
    every = dict.fromkeys([*settings.proxies, *(p for s in settings.sources for p in s.proxies)])
    session = http.make_session(settings.user_agent, trust_env=False)
    try:
        pool = Pool(settings, conn, session, "check", clock)
        return {str(p): pool.check(p) for p in every if not p.direct}
    finally:
        session.close()
