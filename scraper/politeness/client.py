"""The one way out: every request the project sends to a site leaves through a `Client`.

One Client per process (a worker's, a walk's, `seed --from-search`'s) holds what a polite request needs:
the HTTP session, the shared rate slots (the limiter), robots.txt, each domain's `Politeness` (its 429
pause and `Retry-After`, its breaker), the proxy pool (quarantines and 403 bans) and the request log (which
the adaptive rate reads). Every request takes the same steps in the same order: robots.txt of the URL's
host, the domain's turn (rate slot, pause, breaker), a proxy, the bounded request, the log line, then the
domain's breaker and the proxy hear how it went.

What a request is for is its `Errand`: a worker's job (`pool.jobclient.JobClient`: its lease renewed while
it waits, the job handed back on a stop) or a walk's (`Walk`: no job to hand back, so the request waits
out a 429 pause but is refused, DomainResting, while the domain's breaker rests). A page of the browser
goes through `render`, each request of the page through the caller's `gate`. Nothing else in the package
sends to a site (`scripts/check_one_way_out.py`, run by `make lint`)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from scraper.base.clock import SYSTEM, Clock, DatabaseClock
from scraper.base.endpoints import Plan
from scraper.base.errors import DomainResting, FetchError, RobotsUnavailable
from scraper.base.proxies import ProxyUrl
from scraper.base.urls import domain_of
from scraper.db import requestlog, store
from scraper.db.queue import Queue
from scraper.net import http
from scraper.policy import margin, retry
from scraper.policy import revalidate as revalidate_rules
from scraper.politeness import domain as politeness
from scraper.politeness import proxypool, rates, revalidation
from scraper.politeness.limiter import open_limiter
from scraper.politeness.robots import Robots
from scraper.politeness.visit import Visit

if TYPE_CHECKING:
    import requests

    from scraper.base.settings import Settings
    from scraper.net.browser import BrowserFetcher, SessionLog
    from scraper.politeness import Limiter

log = logging.getLogger(__name__)


class Errand(Protocol):
    """What a request is for: how it waits for its turn and what happens when it gets none."""

    source: str | None      # whose proxies carry it (a source's own, else the run's)
    probe: bool             # it tests a half-open domain (robots.txt is tried once)
    sent: int               # requests sent so far

    def domain(self, url: str) -> str:
        """The politeness domain the request to `url` counts against."""

    def turn(self, polite: politeness.Politeness, url: str | None) -> None:
        """Wait for the domain's turn; return to send, raise (FetchError, HandedBack) not to."""

    def nap(self, seconds: float) -> None:
        """Wait between tries of a robots.txt that did not answer."""

    def robots_unavailable(self, polite: politeness.Politeness, error: Exception) -> NoReturn:
        """The host's robots.txt could not be fetched (`error`, a RobotsUnavailable): raises."""

    def no_proxy(self, polite: politeness.Politeness, pool: Sequence[ProxyUrl], avoid: frozenset[str],
                 url: str) -> NoReturn:
        """No proxy of `pool` can carry the request to `url`: raises."""


class Client:
    """Every request of one process (opened after a fork, like its session and limiter).

    `queue` holds each domain's breaker row (and its connection the request log, robots.txt and the
    proxies' health); `name` prefixes the log lines; `stopping()` is true once the process is asked to stop."""

    def __init__(self, settings: Settings, queue: Queue, limiter: Limiter, session: requests.Session,
                 name: str = "", clock: Clock = SYSTEM, stopping: Callable[[], bool] = lambda: False,
                 proxies: proxypool.Pool | None = None) -> None:
        self.s = settings
        self.queue = queue
        self.limiter = limiter
        self.session = session
        self.name = name
        self.clock = clock
        self.stopping = stopping
        self.proxies = proxies      # the proxy pool, or None: no proxies anywhere in the settings
        self.robots = Robots(settings, queue.conn, clock, on_rate=getattr(limiter, "refresh", lambda domain: None))
        self._politeness: dict[str, politeness.Politeness] = {}
        self.revalidation = revalidation.Revalidation(
            settings, queue.conn, clock, lambda: str(getattr(session, "headers", {}).get("Accept-Encoding", "")))

    def politeness_of(self, domain: str) -> politeness.Politeness:
        """The domain's Politeness (one per domain in this process)."""
        polite = self._politeness.get(domain)
        if polite is None:
            polite = self._politeness[domain] = politeness.Politeness(
                self.s, domain, self.queue, self.limiter, self.name, self.clock, self.stopping)
        return polite

    def pool_for(self, source: str | None) -> tuple[ProxyUrl, ...]:
        """The proxies of `source`'s requests: () for none (requests go as without a pool)."""
        return self.proxies.list_for(source) if self.proxies is not None else ()

    # --- one request ---------------------------------------------------------------------

    def get(self, errand: Errand, url: str, max_bytes: int | None = None) -> bytes:
        """One polite GET: robots.txt of the URL's host first, then `send`."""
        self.check_robots(errand, url)
        return self.send(errand, url, max_bytes)

    def check_robots(self, errand: Errand, url: str) -> None:
        """The URL's host's robots.txt allows it (RobotsDisallowed otherwise), fetched through `send` when
        it is not known yet; one that cannot be fetched is the errand's to handle (`robots_unavailable`)."""
        def get(robots_url: str, cap: int) -> bytes:
            try:
                return self.send(errand, robots_url, cap, robots_txt=True)
            except FetchError as e:
                if e.kind == retry.PROXY:   # no proxy usable: the request waits for one, robots.txt is not to blame
                    raise _ProxyTry(None, e) from e
                raise

        domain = errand.domain(url)
        try:
            self.robots.check(url, domain, get, sleep=errand.nap, tries=1 if errand.probe else None)
        except _ProxyTry as e:
            raise e.error from None
        except RobotsUnavailable as e:
            errand.robots_unavailable(self.politeness_of(domain), e)

    def sitemaps_of(self, errand: Errand, site_url: str) -> list[str]:
        """The Sitemap: lines of the site's robots.txt (fetched through `send` when not kept yet)."""
        return self.robots.sitemaps_of(site_url, errand.domain(site_url),
                                       lambda url, cap: self.send(errand, url, cap, robots_txt=True))

    def send(self, errand: Errand, url: str, max_bytes: int | None = None, robots_txt: bool = False) -> bytes:
        """`robots_txt`: a robots.txt fetch, whose 4xx is an answer (no rules), not a failure, in the log.

        A URL fetched before is asked again with its kept validators (`revalidation`): a 304 hands back the
        kept answer (`not_modified` set), and took its rate slot as any request does."""
        if not revalidation.on(self.s, errand.source):
            return self._send(errand, url, max_bytes, robots_txt, None)
        endpoint = revalidate_rules.endpoint_of(url, robots_txt, isinstance(errand, Walk))
        ask = self.revalidation.ask(errand.source or errand.domain(url), endpoint, url)
        body = self._send(errand, url, max_bytes, robots_txt, ask.headers or None)
        return self.revalidation.answered(ask, body, lambda: self._send(errand, url, max_bytes, robots_txt, None))

    def _send(self, errand: Errand, url: str, max_bytes: int | None, robots_txt: bool,
              headers: dict[str, str] | None) -> bytes:
        """One request (`headers`: its validators, or None). With a proxy pool, each try takes the domain's slot
        first, then a proxy (`_through`): a proxy's fault rotates to the next one and tries again at once,
        uncounted; a 403 through one proxy while another is usable bans it for the domain and tries another. A 403
        through every one is the site's answer: the bans this request made are lifted and the 403 ends the request
        as without proxies."""
        pool = self.pool_for(errand.source)
        if not pool:
            return self._through(errand, url, max_bytes, robots_txt, None, headers=headers)
        assert self.proxies is not None
        domain = errand.domain(url)
        tried: set[str] = set()
        banned: list[ProxyUrl] = []
        while True:
            try:
                return self._through(errand, url, max_bytes, robots_txt, pool, frozenset(tried), headers)
            except _Forbidden as forbidden:
                proxy = forbidden.proxy
                assert proxy is not None
                if not self.proxies.bans_on_403(domain, pool, proxy):
                    for p in banned:    # every proxy got the 403: the site's answer, not a ban
                        self.proxies.unban(p, domain)
                    raise forbidden.error from None
                self.proxies.ban(proxy, domain)
                banned.append(proxy)
                tried.add(proxy)
            except _ProxyFault as fault:
                assert fault.proxy is not None
                self.proxies.failed(fault.proxy, str(fault.error))
                tried.add(fault.proxy)

    def _through(self, errand: Errand, url: str, max_bytes: int | None, robots_txt: bool,
                 pool: tuple[ProxyUrl, ...] | None, avoid: frozenset[str] = frozenset(),
                 headers: dict[str, str] | None = None) -> bytes:
        """One try: the domain's slot, then the proxy (of `pool`; None: no pool), then the request."""
        polite = self.politeness_of(errand.domain(url))
        if pool is not None:
            self.proxy_usable(errand, polite, pool, url, avoid)     # before the slot: none usable takes no slot
        for taken in range(1, margin.STALE_TAKES + 2):
            errand.turn(polite, url)
            proxy = None
            if pool is not None:
                assert self.proxies is not None
                proxy = self.proxies.choose(polite.domain, pool, avoid)
                if proxy is None:
                    errand.no_proxy(polite, pool, avoid, url)   # they went while we waited for the slot
            # descheduled between the slot and the send: sent now, it could arrive bunched past the margin, so
            # another is taken; a process too starved to send on any (STALE_TAKES in a row) sends on the last
            if taken > margin.STALE_TAKES or not polite.stale():
                break
            log.debug("%s: the slot of %s went stale before its request could leave; taking another",
                      self.name, polite.domain)
        errand.sent += 1
        try:
            with requestlog.timed(self.queue.conn, polite.domain, self.clock, self.queue.run_id,
                                  polite.take_waited(), answered_4xx=robots_txt):
                body: bytes = http.fetch(self.session, url, self.s.timeout_s, max_bytes or self.s.max_answer_bytes,
                                         proxy=proxy, headers=headers)
        except FetchError as e:
            if proxy is not None and e.kind == retry.PROXY:
                raise _ProxyFault(proxy, e) from e      # not the site's: its breaker hears nothing
            if proxy is not None:
                self._carried(proxy)
            polite.failed(e)
            if proxy is not None and e.status == 403 and not proxy.direct:
                raise _Forbidden(proxy, e) from e
            raise
        if proxy is not None:
            self._carried(proxy)
        polite.answered()
        return body

    def proxy_usable(self, errand: Errand, polite: politeness.Politeness, pool: Sequence[ProxyUrl], url: str,
                     avoid: frozenset[str] = frozenset()) -> None:
        """Some proxy of `pool` can carry a request to the domain; else the errand's `no_proxy` raises."""
        assert self.proxies is not None
        if not self.proxies.usable(polite.domain, [p for p in pool if p not in avoid]):
            errand.no_proxy(polite, pool, avoid, url)

    def _carried(self, proxy: ProxyUrl) -> None:
        assert self.proxies is not None
        self.proxies.carried(proxy)

    # --- one page of the browser ---------------------------------------------------------

    def render(self, errand: Errand, fetcher: BrowserFetcher, url: str, gate: Callable[[str], None],
               wait: Callable[[], None], allow_domains: Sequence[str] = (),
               settle: str | None = None) -> tuple[str, str]:
        """One page in `fetcher` (the process's browser): every request it sends passes `gate(url)` first (the
        errand's turn, robots.txt); (final_url, html), FetchError by the page's status. `wait()` runs while
        the page waits for a browser slot. The page's proxy is one per browser context, chosen as `send`
        chooses one; a proxy's own failure quarantines it and the page is tried again at once, uncounted."""
        from scraper.net import browser
        polite = self.politeness_of(errand.domain(url))
        proxy = self._page_proxy(errand, polite, url)
        try:
            with requestlog.timed(self.queue.conn, polite.domain, self.clock, self.queue.run_id,
                                  polite.take_waited()):
                status, final_url, html = fetcher.render(
                    url, gate, self.s.browser_deadline_s, self.s.max_answer_bytes, settle=settle,
                    wait=wait, allow_domains=allow_domains, proxy=proxy)
                kind = http.kind_of_status(status)
                if kind is not None:
                    raise FetchError(kind, f"HTTP {status} in the browser", url, status)
        except FetchError as e:
            if proxy is not None and not proxy.direct and browser.is_proxy_failure(e):
                # the proxy's fault: quarantined, and the job tried again at once through another, uncounted
                assert self.proxies is not None
                self.proxies.failed(proxy, str(e))
                raise FetchError(retry.PROXY, f"proxy {proxy}: {e}", url, retry_after=0.0) from None
            if proxy is not None:
                self._carried(proxy)
            polite.failed(e)
            raise
        if proxy is not None:
            self._carried(proxy)
        polite.answered()
        return final_url, html

    def _page_proxy(self, errand: Errand, polite: politeness.Politeness, url: str) -> ProxyUrl | None:
        """The proxy of a page's browser context (one per context, by the rules of `send`), or None."""
        pool = self.pool_for(errand.source)
        if not pool:
            return None
        assert self.proxies is not None
        self.proxy_usable(errand, polite, pool, url)
        return self.proxies.choose(polite.domain, pool) or errand.no_proxy(polite, pool, frozenset(), url)

    def open_browser(self, slots: Any, plan: Plan, driver: Any = None) -> BrowserFetcher:
        """A browser of the process as `plan` says (launched, or connected to a remote endpoint, on its first
        page, within `slots`: the pool's local browser slots, or the run's remote sessions), through `driver`
        (`net.browser.Driver`, the thread's Playwright, shared by its local and `playwright:` browsers; a `cdp:`
        or `browserbase` one speaks CDP itself, net/cdp)."""
        import os

        from scraper.db import browsersessions, runstate
        from scraper.net import browser, browserbase
        executable = None if plan.endpoint.remote else browser.require(self.s.browser_path)
        provider = None
        if plan.endpoint.kind == "browserbase":
            assert plan.api_url is not None
            provider = browserbase.Api(plan.api_url, self.s.browserbase_key, self.s.browserbase_project,
                                       browserbase.session_timeout(plan.session_timeout_s, self.s.browser_deadline_s),
                                       self.s.user_agent)
        # a remote browser's sessions are recorded (`status`, and the next start releases a dead worker's)
        sessions: SessionLog | None = None
        if plan.endpoint.remote:
            sessions = browsersessions.Recorder(self.queue.conn, self.queue.run_id, self.name, runstate.host(),
                                                os.getpid(), self.clock)
        return browser.BrowserFetcher(executable, user_agent=self.s.user_agent, slots=slots,
                                      endpoint=plan.endpoint, pages_per_browser=plan.session_pages,
                                      session_timeout_s=plan.session_timeout_s, driver=driver,
                                      wait_s=self.s.browser_wait_s, provider=provider, sessions=sessions,
                                      max_bytes=self.s.max_answer_bytes)

    def close(self) -> None:
        """Write what the proxy pool still holds (the caller closes the session and limiter it gave)."""
        if self.proxies is not None:
            self.proxies.flush(force=True)

    # --- a walk's requests -----------------------------------------------------------------

    def walk(self, source: str | None = None, domain: str | None = None,
             sleep: Callable[[float], object] | None = None) -> Walk:
        """An errand of a walk (sitemaps, search pages, robots.txt) through this client."""
        return Walk(self, source, domain, sleep)


class Walk:
    """A walk's errand: `walk(url) -> bytes` is one polite GET (robots.txt, the domain's turn and its 429
    pause, the breaker, a proxy with its bans, the request log); FetchError on failure. Nothing to hand
    back: a domain whose breaker rests (open, its period not over) fails the request at once (DomainResting),
    and one whose period is over is tested by it, as a worker's probe would. Counts its requests (`sent`)."""

    probe = False

    def __init__(self, client: Client, source: str | None = None, domain: str | None = None,
                 sleep: Callable[[float], object] | None = None) -> None:
        self.client = client
        self.source = source        # the source walked now: its own `proxies` win
        self._domain = domain       # every request counts against this domain (None: each URL's own)
        self.sleep = sleep or client.clock.sleep    # between tries of a robots.txt
        self.sent = 0

    def __call__(self, url: str, max_bytes: int | None = None) -> bytes:
        return self.client.get(self, url, max_bytes)

    @property
    def requests(self) -> int:
        return self.sent

    def sitemaps_of(self, site_url: str) -> list[str]:
        """The Sitemap: lines of the site's robots.txt (fetched through this GET when not kept yet)."""
        return self.client.sitemaps_of(self, site_url)

    def kept_sitemap(self, url: str, lastmod: str | None) -> bytes | None:
        """The kept sitemap file at `url` while its index's `lastmod` for it has not moved (None: fetch it)."""
        if not revalidation.on(self.client.s, self.source):
            return None
        return self.client.revalidation.kept_sitemap(url, lastmod)

    def dated(self, url: str, lastmod: str | None) -> None:
        """The index's `lastmod` of the sitemap file just fetched from `url`, kept with it."""
        if revalidation.on(self.client.s, self.source):
            self.client.revalidation.dated(url, lastmod)

    def domain(self, url: str) -> str:
        return self._domain or domain_of(url)

    def turn(self, polite: politeness.Politeness, url: str | None) -> None:
        rest = polite.rest_s()
        if rest > 0:
            raise DomainResting(f"{polite.domain} is resting: its breaker is open for {rest:.0f} s more (its "
                                f"requests kept failing, or it refused us); nothing was sent to it")
        # a breaker whose open period is over is tested by this request, as by a worker's probe
        if polite.before(True, lambda: True, url) != politeness.GO:
            raise FetchError(retry.NETWORK, f"stopped before the request to {polite.domain}", url)

    def nap(self, seconds: float) -> None:
        self.sleep(seconds)

    def robots_unavailable(self, polite: politeness.Politeness, error: Exception) -> NoReturn:
        raise error

    def no_proxy(self, polite: politeness.Politeness, pool: Sequence[ProxyUrl], avoid: frozenset[str],
                 url: str) -> NoReturn:
        assert self.client.proxies is not None
        wait = self.client.proxies.wait_until(polite.domain, pool) - self.client.clock()
        raise FetchError(retry.PROXY, f"no proxy of the pool is usable for {polite.domain}; next one in {wait:.0f} s",
                         url, retry_after=max(wait, 0.0))


@contextlib.contextmanager
def opened(settings: Settings, conn: Any, name: str, clock: Clock | None = None) -> Iterator[Client]:
    """A Client of its own for a walk or `seed --from-search` over `conn` (its limiter, session and proxy
    pool opened here and closed at the end). Its clock, unless given, is the one a worker's is: the
    database's on PostgreSQL (pauses and breakers are written in its time), the system's on SQLite."""
    clock = clock or clock_of(conn)
    limiter = open_limiter(settings, rate_of=rates.limiter_rates(conn, settings))
    session = http.make_session(settings.user_agent, trust_env=not settings.uses_proxies)
    pool = proxypool.Pool(settings, conn, session, name, clock) if settings.uses_proxies else None
    client = Client(settings, Queue(conn), limiter, session, name, clock, proxies=pool)
    try:
        yield client
    finally:
        client.close()
        session.close()
        limiter.close()


def clock_of(conn: Any) -> Clock:
    """The clock a process's requests are timed and paused by: the database's on PostgreSQL (every machine
    writes the shared pauses and breakers in its time), the system's on SQLite."""
    return DatabaseClock(conn.clock) if store.is_postgres(conn) else SYSTEM


def open_session(settings: Settings) -> requests.Session:
    """A worker's HTTP session (opened after the fork)."""
    return http.make_session(settings.user_agent, trust_env=not settings.uses_proxies)


@contextlib.contextmanager
def visit(site_url: str, user_agent: str, rate_per_s: float, budget: int, max_bytes: int, timeout_s: float,
          clock: Clock | None = None) -> Iterator[Visit]:
    """A `Visit` of a site without a database (`scraper discover`): its requests over a session of its own,
    bounded like every request (`timeout_s`, the caller's `max_bytes`)."""
    session = http.make_session(user_agent)
    try:
        yield Visit(site_url, user_agent, rate_per_s, budget,
                    lambda url, cap: http.fetch(session, url, timeout_s, cap), max_bytes,
                    **({"clock": clock} if clock is not None else {}))
    finally:
        session.close()


def visit_browser(executable: str, user_agent: str, timeout_s: float,
                  max_bytes: int) -> tuple[Callable[[str, Callable[[str], None]], tuple[int, str]], Callable[[], None]]:
    """`render(url, gate) -> (status, html)` over a browser of its own for a `Visit` (every request of the
    page through the visit's `gate`), and its closer."""
    from scraper.net.browser import BrowserFetcher
    fetcher = BrowserFetcher(executable, user_agent)

    def render(url: str, gate: Callable[[str], None]) -> tuple[int, str]:
        status, _, html = fetcher.render(url, gate, timeout_s, max_bytes)
        return status, html
    return render, fetcher.close


class _ProxyTry(Exception):
    """How one try through the pool ended, inside `Client.send` (never outside it): `error`, the
    FetchError, through `proxy`. As such: no proxy was usable (robots.txt is not to blame)."""

    def __init__(self, proxy: ProxyUrl | None, error: FetchError) -> None:
        super().__init__(str(error))
        self.proxy, self.error = proxy, error


class _ProxyFault(_ProxyTry):
    """The try failed through the proxy's fault: quarantine it, try the next one."""


class _Forbidden(_ProxyTry):
    """The site answered 403 through `proxy`: maybe a ban, then another proxy."""

