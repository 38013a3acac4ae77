"""The browser fetcher: Playwright for Python driving the system's Chromium (never a downloaded one), or a
Chromium elsewhere: attached over the DevTools protocol (`browser_endpoint = "cdp:URL"`), Playwright's own
(`"playwright:WS-URL"`, a Playwright server), or a session Browserbase's API creates (`"browserbase"`,
net/browserbase) attached over CDP. A `cdp:` or `browserbase` browser is spoken to by net/cdp, the worker's
own CDP client over one websocket, its pages rendered by net/cdppage: no Playwright driver (node, about 71 MB
of PSS) runs for it. A local browser and a `playwright:` one go through Playwright.

At most one local `BrowserFetcher` and one remote per worker process, opened after the fork; those that use
Playwright share the thread's one `Driver`. Each holds at most one browser (a local one, or a session: one
connection to the remote one), gives each page a fresh context that is closed afterwards,
and retires the browser after `pages_per_browser` pages (or once older than `session_timeout_s`). A remote
browser launches nothing here: its slots are the run's sessions, not the local browser slots; at its end
only the connection is dropped (Playwright's driver stopped, or the CDP websocket closed: the contexts it
made go with it), never the remote browser itself. An endpoint
that refuses or cannot be reached is a capacity wait, like a slot held by others: the caller's `wait()` runs
(it hands the job back, uncharged) and the connection is tried again, never counted against the site, until
it has refused for `wait_s` (browser_wait) with no session of the pool serving: FetchError `browser_unavailable`.
A session lost under a page is `SessionLost`: the caller tries the page again on a new one. Each remote
session is recorded through a `SessionLog` (opened, its pages, its own errors, closed: `status`'s figures, and
what the next start releases after a kill -9); a Browserbase session is released once, when it is retired.
Every request the page sends is routed by net/pagerules, whichever renderer: images, fonts and media are
aborted, other domains are refused unless allowed, and each request that is let through first passes
`gate(url)` (the caller's rate slot and robots check; it may raise to refuse that request). A page is bounded
like an HTTP answer: one deadline over navigation and settling, and a cap on the bytes its responses carry.

Chromium never outlives its worker: Playwright starts it in its own process group, and a watchdog (`sh`,
in a session of its own so a kill of the run's process group spares it) holds the read end of a pipe
whose only writer is the worker; when the worker dies, however it dies, the read ends and the watchdog
kills Chromium's group. (Measured: Chromium also exits once its pipe to Playwright's driver closes, even
when a kill of the worker's group took the driver; the watchdog covers a browser too busy or hung to
notice.)
"""

import logging
import os
import subprocess
import time
from typing import Protocol
from urllib.parse import urljoin

from scraper.base import endpoints
from scraper.base.errors import FetchError, JobInvalid, SessionLost
from scraper.base.settings import BROWSER_WAIT_S, MAX_ANSWER_MB
from scraper.net import browserbase, cdp, cdppage
from scraper.net.chromium import (  # noqa: F401 - the names callers know as browser.*
    LAUNCH_FLAGS,
    LEAN_FLAGS,
    NEEDS_BROWSER,
    SLOT_WAIT_S,
    BrowserSlots,
    find_browser,
    launch_args,
    problem,
    require,
    sources_without_browser,
)
from scraper.net.pagerules import (
    MAX_REDIRECTS,
    SETTLE_SLICE_S,
    PageState,
    admit,
    first_line,
    ms_left,
    redirect_refused,
    timeout_error,
)
from scraper.policy.outcome import KEY_SETTING
from scraper.policy.retry import BROWSER_UNAVAILABLE

log = logging.getLogger(__name__)

PAGES_PER_BROWSER = 100         # a browser is retired (closed, a fresh one launched) after this many pages
LAUNCH_TIMEOUT_S = 30.0         # a browser that has not started (or a remote one not answered) by then is not going to
CONNECT_RETRY_S = 1.0           # a remote endpoint that refused is tried again after this (the job waits, or goes back)
DRIVERLESS = ("cdp", "browserbase")     # endpoints spoken to over CDP by net/cdp, with no Playwright driver
# what Playwright says of a call whose connection went (we close a page's context only after its last call)
CLOSED = ("Target page, context or browser has been closed", "Browser has been closed", "Target closed",
          "Connection closed")
# Without the background-networking flags Chromium keeps calling home (updates, field trials, safe
# browsing): on a closed network that is a stream of failing connections, and never polite.
class SessionLog(Protocol):
    """What records a fetcher's remote sessions, one at a time (`db/browsersessions.Recorder`): a session
    opened (its provider, its endpoint as shown, the provider's id), each page begun and ended (rendered, or
    lost to the session's own `failure`: crash, disconnect, protocol), the session closed."""

    def opened(self, provider: str, endpoint: str, provider_session: str | None) -> None: ...
    def page_started(self) -> None: ...
    def paged(self, rendered: bool, failure: str | None = None) -> None: ...
    def closed(self) -> None: ...


NODE_YOUNG = "--max-semi-space-size=1"     # MB of each of V8's young-generation semi-spaces (its default is 16)


def _small_young_generation():
    """The driver (node) starts with this process's environment: V8's young generation of 3 x 16 MB is most
    of an idle driver's own memory (122 MB of PSS, 71 MB with 1 MB semi-spaces, measured with Playwright 1.65
    here; pages per second unchanged in `scripts/bench_browser --compare`), and every worker with a browser
    runs one. A NODE_OPTIONS of the user's is kept; one that already sizes the semi-spaces wins."""
    options = os.environ.get("NODE_OPTIONS", "")
    if "semi-space" not in options:
        os.environ["NODE_OPTIONS"] = f"{options} {NODE_YOUNG}".strip()


class Driver:
    """Playwright's driver (node) of one thread, shared by the thread's fetchers: Playwright's sync API takes
    one instance per thread (a second one refuses to start), so a worker's local browser and its `playwright:`
    session go through the same driver (a `cdp:` or `browserbase` session needs none). Started by the first
    fetcher that needs it, stopped when the last one lets it go (an idle driver holds about 90 MB of PSS)."""

    def __init__(self):
        self.pw = None
        self.users = set()

    def take(self, user):
        if self.pw is None:
            from playwright.sync_api import sync_playwright
            _small_young_generation()
            self.pw = sync_playwright().start()
        self.users.add(id(user))
        return self.pw

    def give(self, user):
        self.users.discard(id(user))
        if not self.users and self.pw is not None:
            pw, self.pw = self.pw, None
            try:
                pw.stop()
            except Exception as e:
                log.debug("stopping Playwright: %s", e)


class BrowserFetcher:
    """`render(url, gate, deadline_s, max_bytes)` -> (status, final_url, html), one browser at a time.

    One local BrowserFetcher per worker, and one remote: every source of a worker that renders in the same
    place shares it (each page passes its source's `allow_domains`); those that use Playwright share the
    thread's `Driver`."""

    def __init__(self, executable, user_agent=None, allow_domains=(), pages_per_browser=PAGES_PER_BROWSER,
                 lean=True, slots=None, endpoint=None, session_timeout_s=None, driver=None,
                 wait_s=BROWSER_WAIT_S, provider=None, sessions=None, max_bytes=MAX_ANSWER_MB * 2**20):
        self.executable = executable
        self.max_bytes = max_bytes  # the largest page `render` is given: it bounds a CDP message (cdppage)
        self.endpoint = endpoint    # base.endpoints.Endpoint; None or local: launch `executable` here
        self.provider = provider    # browserbase: its `net.browserbase.Api`
        self.sessions = sessions    # a `SessionLog` that records each remote session, or None
        self._session = None        # browserbase: the `net.browserbase.Session` attached now
        self._logged = False        # `sessions` holds an open record of the session attached now
        self.session_timeout_s = session_timeout_s
        self.driver = driver or Driver()
        self.wait_s = wait_s        # refusals for this long, no session of the pool serving: the endpoint is down
        self.refused_since = None   # wall time of the first refusal since this fetcher last had a session
        self.connected_at = None    # monotonic time the current browser was launched or connected
        self.user_agent = user_agent
        self.allow_domains = frozenset(d.lower() for d in allow_domains)
        self.pages_per_browser = pages_per_browser
        self.lean = lean
        self.slots = slots      # BrowserSlots, or None: no bound across processes
        self.pages = 0          # pages rendered by the current browser
        self.launches = 0
        self._pw = None
        self._browser = None
        self._watchdog = None
        self._watch_fd = None
        self.browser_pid = None
        self.key_refused = None     # browserbase: why the provider refused the key (no session will come)

    # --- the browser's life ------------------------------------------------------------

    def _take_slot(self, wait):
        """Wait for a browser slot; `wait()` runs between looks (it renews the job's lease, and may raise to
        hand the job back)."""
        try:
            while self.slots is not None and not self.slots.try_acquire():
                if wait is not None:
                    wait()
                time.sleep(SLOT_WAIT_S)
        finally:
            if self.slots is not None:
                self.slots.unwant()

    def ready(self, wait=None):
        """This process's browser, connected: launched when there is none (after waiting for a slot; `wait`
        as in `_take_slot`, which may raise to hand the job back). A remote endpoint that refuses is waited
        for as a slot is, until it has refused for `wait_s` with no session of the pool serving: FetchError
        `browser_unavailable` (the endpoint's, never the site's)."""
        if self.connected:
            return
        self.usable()
        self.retire()
        while True:
            self._take_slot(wait)
            if self._launch():
                self.refused_since = None
                self.served()
                return
            # the remote endpoint refused: its capacity, not the site's fault; the slot goes back meanwhile
            # (the driver stays for the next try: the worker's idle close or its end stops it)
            if self.slots is not None:
                self.slots.release()
            self.refused()
            if wait is None:
                raise FetchError("internal", f"the browser endpoint {self.endpoint} cannot be reached")
            wait()
            time.sleep(CONNECT_RETRY_S)

    @property
    def connected(self):
        """A browser is launched, or a session attached, and still there."""
        return self._browser is not None and self._browser.is_connected()

    def usable(self):
        """FetchError `browser_unavailable` once the provider refused the key: no page of it can render."""
        if self.key_refused is not None:
            raise FetchError(BROWSER_UNAVAILABLE, self.key_refused)

    def refused(self):
        """One more refusal: FetchError `browser_unavailable` once the endpoint has refused for `wait_s` while
        no session of the pool served a page (a provider that is only full serves the others meanwhile)."""
        now = time.time()
        if self.refused_since is None:
            self.refused_since = now
        served = self.slots.served_at() if self.slots is not None else None
        since = max(self.refused_since, served or 0.0)
        if now - since >= self.wait_s:
            raise FetchError(BROWSER_UNAVAILABLE, f"the browser endpoint {self.endpoint} refused every session for "
                                                  f"{self.wait_s:g} s (browser_wait)")

    def served(self):
        """A remote session is open or has rendered a page: said to the pool (the refusals' clock restarts)."""
        if self.remote and self.slots is not None:
            self.slots.served()

    @property
    def remote(self):
        return self.endpoint is not None and self.endpoint.remote

    @property
    def driverless(self):
        """Pages are rendered over CDP by net/cdp: no Playwright driver (node) runs for this fetcher."""
        return self.endpoint is not None and self.endpoint.kind in DRIVERLESS

    def _launch(self):
        """Launch the browser, or connect to the remote one: True; False when the remote endpoint refused."""
        self.connected_at = time.monotonic()
        if self.driverless:
            return self._connect()
        if self._pw is None:
            self._pw = self.driver.take(self)
        from playwright.sync_api import Error as PlaywrightError
        if self.remote:
            return self._connect()
        before = _descendants()
        try:
            self._browser = self._pw.chromium.launch(
                executable_path=self.executable, headless=True, args=launch_args(self.lean),
                chromium_sandbox=os.geteuid() != 0, handle_sigint=False, handle_sigterm=False, handle_sighup=False,
                timeout=LAUNCH_TIMEOUT_S * 1000)
        except PlaywrightError as e:
            self.retire()   # frees the slot
            # not the site's fault: `internal`, so the domain's breaker does not count it
            raise FetchError("internal", f"the browser {self.executable} did not start: {first_line(e)}") from None
        self.launches += 1
        self.pages = 0
        self.browser_pid = _browser_leader(before)
        if self.browser_pid is not None:
            self._start_watchdog(os.getpgid(self.browser_pid))
        else:
            log.warning("could not find the browser's process group; it has no watchdog")
        return True

    def _connect(self):
        """One session: a connection to the endpoint's browser, over CDP by net/cdp (`cdp:`; an http base's
        /json/version names its websocket), Playwright's own protocol (`playwright:`, a Playwright server), or
        over CDP to a session Browserbase's API created for it (`browserbase`). False when it refuses, is full
        or cannot be reached; FetchError `internal` when the provider's answer is no session."""
        url = self.endpoint.url
        if self.endpoint.kind == "browserbase":
            try:
                self._session = self.provider.create()
            except browserbase.Busy as e:
                log.info("Browserbase refused a session: %s", e)
                return False
            except browserbase.KeyRefused as e:
                self.retire()   # frees the slot
                # no wait cures it: every job of this browser ends at once, uncharged, and the run's last line
                # says this once (naming the setting, never the key)
                self.key_refused = f"Browserbase refused the key in {KEY_SETTING} (HTTP {e.status})"
                self.usable()
            except browserbase.ApiError as e:
                self.retire()   # frees the slot
                raise FetchError("internal", f"Browserbase's answer is no session: {e}") from None
            url = self._session.connect_url
            # recorded before the attach: it exists at the provider from now on, and a kill -9 from here must
            # leave its id for the next start to release
            self._record()
        try:
            self._browser = self._attach(url)
        except cdp.Refused as e:
            # the error may name the URL it dialled: said only as the shown endpoint, never a token or connectUrl
            log.info("the browser endpoint %s refused a session: %s", self.endpoint, self.said(e))
            self._end_session()
            return False
        if not self._logged:    # a connection the endpoint refused was no session: only one it took is recorded
            self._record()
        self.launches += 1
        self.pages = 0
        return True

    def _attach(self, url):
        """The connection to the remote browser at `url`; cdp.Refused when the endpoint refused it (a Playwright
        server's refusal said as one, so both are one capacity wait in `_connect`)."""
        if self.driverless:
            return cdp.Connection.open(url, LAUNCH_TIMEOUT_S, cdppage.message_cap(self.max_bytes))
        from playwright.sync_api import Error as PlaywrightError
        try:
            # connect()'s own default timeout is 0, forever: a server at its --max-clients would hold the job
            return self._pw.chromium.connect(url, timeout=LAUNCH_TIMEOUT_S * 1000)
        except PlaywrightError as e:
            raise cdp.Refused(str(e)) from None

    def _record(self):
        """The session attached now begins its record (`sessions`: its provider, endpoint as shown, id)."""
        if self.sessions is not None:
            self.sessions.opened(self.endpoint.kind, str(self.endpoint),
                                 None if self._session is None else self._session.id)
            self._logged = True

    def said(self, e):
        """The first line of an error of the remote browser, fit to log and store: a provider's connectUrl as
        `<connectUrl>`, any other URL's credentials and query values as ***."""
        said = first_line(e)
        if self._session is not None:
            said = said.replace(self._session.connect_url, "<connectUrl>")
        return endpoints.shown(said)

    def _end_session(self):
        """The session is over (retired, lost, never attached): recorded closed, and a provider's released,
        once (the flag is cleared before the call; the API's errors are logged)."""
        session, self._session = self._session, None
        logged, self._logged = self._logged, False
        if logged:
            self.sessions.closed()
        if session is not None:
            self.provider.release(session.id)

    def _start_watchdog(self, pgid):
        """`sh` blocks reading a pipe only we write to: at its end (we closed it or died) it kills the group."""
        read_fd, write_fd = os.pipe()   # not inheritable: only this process holds the write end
        self._watchdog = subprocess.Popen(
            ["sh", "-c", 'read _ ; kill -KILL -- "-$1" 2>/dev/null', "scraper-browser-watchdog", str(pgid)],
            stdin=read_fd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        os.close(read_fd)
        self._watch_fd = write_fd

    def retire(self):
        """Close the browser, its watchdog and Playwright's driver; the next page launches fresh ones. The
        driver goes with the browser: kept in every worker that once held a browser, idle drivers (node, about
        90 MB of PSS each) held 371 MB of a 4-worker `auto` run's 754 MB peak, outside what the slots count."""
        browser, self._browser = self._browser, None
        # a remote browser is left running: stopping the driver below drops the connection (and with it the
        # contexts it made), where Playwright's close() could end a browser that is not ours; a CDP
        # connection's close() is that drop itself
        if browser is not None and (self.driverless or not self.remote):
            try:
                browser.close()
            except Exception as e:  # a browser that died already: its group is killed below anyway
                log.debug("closing the browser: %s", e)
        if self._watch_fd is not None:
            os.close(self._watch_fd)    # the watchdog wakes and kills whatever is left of the group
            self._watch_fd = None
        if self._watchdog is not None:
            try:
                self._watchdog.wait(5)
            except subprocess.TimeoutExpired:
                self._watchdog.kill()
                self._watchdog.wait()
            self._watchdog = None
        self.browser_pid = None
        if self._pw is not None:
            self._pw = None
            self.driver.give(self)
        self._end_session()
        if self.slots is not None:
            self.slots.release()

    def close(self):
        """Close the browser and Playwright's driver, and give up the slots' file (a recycle, the worker's end)."""
        self.retire()
        if self.slots is not None:
            self.slots.close()

    # --- one page ----------------------------------------------------------------------

    def render(self, url, gate, deadline_s, max_bytes, settle=None, wait=None, allow_domains=None, proxy=None):
        """Load `url`, let it settle (network idle, or the CSS selector `settle` present), return
        (status, final_url, html). FetchError `timeout` when it does not settle within `deadline_s`,
        `too_large` over `max_bytes` of response bodies, `network` when the page cannot be loaded; an
        exception `gate` raised for the page's own request, or a stop it raised for any request, ends
        the attempt as it is. The status is returned as served: the caller decides what a 404 or a 5xx is.
        Without a browser, first waits for a slot (`wait` as in `_take_slot`); the deadline starts after.
        `allow_domains` (a source's) replaces the fetcher's own for this page. `proxy` (a
        `base.proxies.ProxyUrl`, not `direct`) carries every request of the page: one proxy per context."""
        self.ready(wait)
        deadline = time.monotonic() + deadline_s
        allow = self.allow_domains if allow_domains is None else frozenset(d.lower() for d in allow_domains)
        state = PageState(url, allow, deadline, max_bytes)
        rendered = False
        try:
            if self.driverless:
                out = cdppage.render(self._browser, url, gate, state, deadline_s, settle, proxy, self.user_agent,
                                     began=self._page_began)
            else:
                out = self._render_playwright(url, gate, state, deadline_s, settle, proxy)
            rendered = True
            self.served()
            return out
        except FetchError as e:
            if self._lost(str(e)):  # the page failed because its session dropped (a navigation's error says so)
                raise self._session_lost(self.said(e)) from None
            raise
        except Exception as e:
            if not isinstance(e, cdp.CdpError) and not _playwright_error(e):
                raise
            # the browser or its page died under us: a fresh browser next time; it may name the endpoint's URL,
            # and the job's error is stored: its shown form
            said = self.said(e) if self.remote else first_line(e)
            if isinstance(e, cdp.Closed) or self._lost(str(e)):
                # the remote session dropped (the provider's doing, not the site's): the caller tries the page
                # again on a new session
                raise self._session_lost(said) from None
            if self._logged:
                self.sessions.paged(False, "crash" if "crash" in said.lower() else "protocol")
            self.retire()
            raise FetchError("network", f"the browser failed: {said}", url) from None
        finally:
            self.pages += 1
            if self._logged:
                self.sessions.paged(rendered)
            old = self.session_timeout_s is not None and self.connected_at is not None \
                and time.monotonic() - self.connected_at >= self.session_timeout_s
            if self.pages >= self.pages_per_browser or old or (self.slots is not None and self.slots.wanted()):
                self.retire()

    def _page_began(self):
        if self._logged:    # a page begins once its context exists
            self.sessions.page_started()

    def _render_playwright(self, url, gate, state, deadline_s, settle, proxy):
        """`render`'s page in Playwright's browser: its context routes every request by net/pagerules."""
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import TimeoutError as PlaywrightTimeout
        deadline = state.deadline
        context = None
        try:
            context = self._browser.new_context(user_agent=self.user_agent, service_workers="block",
                                                accept_downloads=False, **context_proxy(proxy))
            self._page_began()
            page = context.new_page()
            cdp_session = context.new_cdp_session(page)
            cdp_session.send("Network.enable")
            cdp_session.on("Network.dataReceived", lambda e: _count(state, e.get("dataLength", 0)))
            page.on("request", lambda request: _redirected(state, gate, request))
            context.route("**/*", lambda route, request: _route(state, gate, page, route, request))
            target = url
            for _ in range(MAX_REDIRECTS + 1):
                try:
                    response = page.goto(target, wait_until="commit", timeout=ms_left(deadline, url, deadline_s))
                except PlaywrightTimeout:
                    state.check(url)
                    raise timeout_error(url, deadline_s) from None
                except PlaywrightError as e:
                    state.check(url)
                    if state.redirect is None:
                        raise FetchError("network", f"the browser could not load the page: {first_line(e)}",
                                         url) from None
                state.check(url)
                if state.redirect is None:
                    break
                target, state.redirect = state.redirect, None
            else:
                raise FetchError("http_4xx", f"more than {MAX_REDIRECTS} redirects", url)
            while True:
                state.check(url)
                try:
                    wait_ms = min(SETTLE_SLICE_S * 1000, ms_left(deadline, url, deadline_s))
                    if settle:
                        page.wait_for_selector(settle, state="attached", timeout=wait_ms)
                    else:
                        page.wait_for_load_state("networkidle", timeout=wait_ms)
                    break
                except PlaywrightTimeout:
                    continue
            state.check(url)
            html = page.content()
            if len(html.encode()) > state.max_bytes:
                raise FetchError("too_large", f"the rendered page is larger than {state.max_bytes / 2**20:g} MB",
                                 url)
            status = response.status if response is not None else 0
            return status, page.url, html
        finally:
            if context is not None:
                try:
                    context.close()
                except Exception as e:
                    log.debug("closing a context: %s", e)

    def _lost(self, said):
        """A remote session that is no longer connected (the provider dropped it, or its browser died): so the
        browser says, or the error `said` does (it may come before the browser's own word of the disconnect)."""
        if self.driverless:     # net/cdp says which: the connection went, or we closed it on a bad message
            return self._browser is None or isinstance(self._browser.closed, cdp.Closed)
        return self.remote and (self._browser is None or not self._browser.is_connected()
                                or any(words in said for words in CLOSED))

    def _session_lost(self, said):
        """The session dropped under a page: counted as its `disconnect` error, retired (its record closed, a
        provider's session released), and the SessionLost the caller raises (`said`: the error, as shown)."""
        if self._logged:
            self.sessions.paged(False, "disconnect")
        self.retire()
        return SessionLost(f"the browser session to {self.endpoint} was lost mid-page: {said}")

    def pids(self):
        """Pids of this process's descendants (Playwright's driver, Chromium's; none for a driverless fetcher),
        for tests and the bench."""
        return [p.pid for p in _descendants_procs()]


# what Chromium and Playwright's own fetch say when the proxy, not the site, failed (asked only of a page a
# proxy carried: its connections are the proxy's); the driverless renderer's page comes through Chromium, whose
# words for a proxy that refuses, resets or closes are its connection errors
PROXY_FAILURES = ("ERR_PROXY", "ERR_TUNNEL", "ERR_EMPTY_RESPONSE", "ECONNREFUSED", "ECONNRESET", "socket hang up",
                  "407", "ERR_CONNECTION_", "ERR_SOCKET_NOT_CONNECTED")


def context_proxy(proxy):
    """new_context's `proxy` option for a ProxyUrl (credentials apart, as Playwright takes them), or none."""
    if proxy is None or proxy.direct:
        return {}
    option = {"server": proxy.server}
    if proxy.username is not None:
        option.update(username=proxy.username, password=proxy.password or "")
    return {"proxy": option}


def is_proxy_failure(error):
    """Whether a page's FetchError `network` speaks of its proxy (refused, reset, closed, a failed tunnel)."""
    return error.kind == "network" and any(marker in str(error) for marker in PROXY_FAILURES)


def _route(state, gate, page, route, request):
    """Every request of the page: refuse what is not needed or not ours, gate the rest (net/pagerules)."""
    try:
        own = request.is_navigation_request() and request.frame == page.main_frame
        if not admit(state, gate, request.url, request.resource_type, own):
            route.abort("blockedbyclient")
        elif request.is_navigation_request():
            _navigate(state, route)
        else:
            route.continue_()
    except Exception as e:   # a page closing under us: nothing to route any more
        log.debug("routing %s: %s", request.url, e)


def _navigate(state, route):
    """The page's own document, fetched by Playwright without following redirects: Chromium would follow a
    redirect without routing it (no gate, no domain check), so a redirect is aborted here and `render`
    navigates to its target, a new navigation that is routed like the first."""
    from playwright.sync_api import Error as PlaywrightError
    try:
        response = route.fetch(max_redirects=0, timeout=max(1.0, (state.deadline - time.monotonic()) * 1000))
    except PlaywrightError as e:
        # no answer (a proxy that refuses or closes, a reset): the page fails now, not at its deadline
        state.error = state.error or FetchError("network", f"the page's request failed: {first_line(e)}",
                                                route.request.url)
        route.abort("failed")
        return
    location = response.headers.get("location")
    if 300 <= response.status < 400 and location:
        target = urljoin(route.request.url, location)
        redirect_refused(state, target, response.status)
        state.redirect = target
        route.fulfill(status=204)   # "no content": the navigation ends without an error page in the way
        return
    body = response.body()
    if len(body) > state.max_bytes:
        state.bytes += len(body)
        route.abort("blockedbyclient")
        return
    route.fulfill(response=response, body=body)


def _redirected(state, gate, request):
    """Playwright does not route the next request of a script's or an XHR's redirect: one to a refused
    domain fails the page; one within it takes its rate slot as it goes (it may already be on its way)."""
    if request.redirected_from is None or state.error is not None or redirect_refused(state, request.url):
        return
    try:
        gate(request.url)
        state.sent += 1
    except Exception as e:
        if not isinstance(e, (FetchError, JobInvalid)):
            state.error = e


def _count(state, n):
    state.bytes += n


def _playwright_error(e):
    """Whether `e` is Playwright's Error (its module imported only where a Playwright browser runs)."""
    import sys
    module = sys.modules.get("playwright.sync_api")
    return module is not None and isinstance(e, module.Error)


def _descendants_procs():
    import psutil
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def _descendants():
    return {p.pid for p in _descendants_procs()}


def _browser_leader(before):
    """The pid of the browser just launched: a new descendant that leads its own process group."""
    for pid in sorted(_descendants() - before):
        try:
            if os.getpgid(pid) == pid:
                return pid
        except ProcessLookupError:
            continue
    return None
