"""One page rendered in a remote browser over CDP (net/cdp), with no Playwright driver: the page semantics
of `BrowserFetcher.render` (net/browser), spoken in the protocol itself.

A fresh browser context per page (`Target.createBrowserContext`, `disposeOnDetach`, the page's proxy as its
`proxyServer`, its credentials answered on `Fetch.authRequired`), disposed after; downloads denied; service
workers blocked (Playwright's own init script for `service_workers="block"`, and bypassed). Every request the
page sends, its frames' and workers' included (auto-attached), is paused (`Fetch.enable`, pattern `*`) and
let through or failed by the rules of net/pagerules: each hop of a redirect is paused as a request of its own
here, so a redirect goes through the domain check and the gate like any request (Playwright's routing lets
them by, which is why net/browser fetches the page's document itself). One deadline over navigation and
settling; the byte cap on `Network.dataReceived`. Settled is network idle (no request in flight for IDLE_S,
Playwright's networkidle) or the CSS selector present; then the HTML (doctype and documentElement.outerHTML,
as Playwright's `page.content()`), with the status of the navigation's own response and the page's URL.
"""

import json
import logging
import time

from scraper.base.errors import FetchError
from scraper.net import cdp
from scraper.net.pagerules import MAX_REDIRECTS, admit, redirect_refused, timeout_error

log = logging.getLogger(__name__)

IDLE_S = 0.5                # network idle: no request in flight for this long (Playwright's networkidle)
POLL_S = 0.05               # how often the settle selector is looked for (each look is one round trip)
DISPOSE_S = 5.0             # a context's disposal is waited for this long at most (the page's deadline may be past)
VIEWPORT = {"width": 1280, "height": 720}   # Playwright's default, so pages lay out as they did
FETCH = {"patterns": [{"urlPattern": "*"}], "handleAuthRequests": True}
AUTO_ATTACH = {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True}
# Playwright's own init script for service_workers="block": a page cannot register one
NO_SERVICE_WORKERS = ("if (self.ServiceWorkerContainer) ServiceWorkerContainer.prototype.register = "
                      "async () => {};")
CONTENT = ("(() => {{ let html = ''; if (document.doctype) html = new XMLSerializer().serializeToString("
           "document.doctype); if (document.documentElement) html += document.documentElement.outerHTML; "
           "return [location.href, html.length > {limit} ? null : html]; }})()")


def message_cap(max_bytes):
    """The largest message a connection takes: the page's HTML within `max_bytes` UTF-16 units, each at most 6
    bytes of JSON (`\\uXXXX`), and room for the rest."""
    return 6 * max_bytes + 2**20


def render(conn, url, gate, state, deadline_s, settle=None, proxy=None, user_agent=None, began=None):
    """Load `url` in a new context of `conn`'s browser, let it settle, return (status, final_url, html); the
    errors of `BrowserFetcher.render`, and cdp.CdpError from the connection (the caller says what it means).
    `state` a pagerules.PageState; `began()` runs once the page's context exists."""
    deadline = state.deadline
    page = None

    def call(method, params=None, session=None):
        return calls([(method, params)], session)[0]

    def calls(commands, session=None):
        """The commands' results under the page's deadline; the page's own end, when it came, says why not."""
        try:
            return conn.send_all(commands, session, deadline)
        except (cdp.Timeout, cdp.CommandFailed) as e:
            if page is not None:    # the page's target went under the command: that, not the command, says why
                page.check(url)
            if isinstance(e, cdp.CommandFailed):
                raise
            state.check(url)
            raise timeout_error(url, deadline_s) from None

    options = {"disposeOnDetach": True}
    if proxy is not None and not proxy.direct:
        # loopback through the proxy too, as Playwright asks (Chromium bypasses it for loopback by default)
        options.update(proxyServer=proxy.server, proxyBypassList="<-loopback>")
    context = _text(call("Target.createBrowserContext", options), "browserContextId")
    try:
        if began is not None:
            began()
        conn.post("Browser.setDownloadBehavior", {"behavior": "deny", "browserContextId": context})
        target = _text(call("Target.createTarget", {"url": "about:blank", "browserContextId": context, **VIEWPORT}),
                       "targetId")
        page = _Page(conn, state, gate, target, proxy)
        conn.listener = page
        page.session = _text(call("Target.attachToTarget", {"targetId": target, "flatten": True}), "sessionId")
        page.sessions.add(page.session)
        setup = [("Network.setBypassServiceWorker", {"bypass": True}),
                 ("Page.addScriptToEvaluateOnNewDocument", {"source": NO_SERVICE_WORKERS})]
        if user_agent:
            setup.append(("Emulation.setUserAgentOverride", {"userAgent": user_agent}))
        calls(page.routing() + setup, page.session)
        navigated = call("Page.navigate", {"url": url}, page.session)
        state.check(url)
        error = navigated.get("errorText")
        if error:
            raise FetchError("network", f"the browser could not load the page: {str(error)[:200]} at {url}", url)
        page.committed(navigated.get("loaderId"))
        while not (page.has(settle, url) if settle else page.idle()):
            page.check(url)
            left = deadline - time.monotonic()
            if left <= 0:
                raise timeout_error(url, deadline_s)
            conn.pump(time.monotonic() + min(POLL_S if settle else IDLE_S / 5, left))
        page.check(url)
        final_url, html = page.content(url, deadline_s)
        return page.status(), final_url, html
    finally:
        conn.listener = None
        if conn.is_connected():
            try:
                conn.send("Target.disposeBrowserContext", {"browserContextId": context},
                          deadline=time.monotonic() + DISPOSE_S)
            except cdp.CdpError as e:
                log.debug("disposing a context: %s", e)


class _Page:
    """The page's listener: what its sessions' events say (requests to route, bytes, requests in flight, the
    navigation's status), learnt inside the connection's waits. A listener posts and never waits."""

    def __init__(self, conn, state, gate, target, proxy):
        self.conn, self.state, self.gate, self.proxy = conn, state, gate, proxy
        self.target = target        # the page's target id, which is its main frame's id
        self.session = None         # the page's flat session
        self.sessions = set()       # it and its children's (out-of-process frames, workers)
        self.inflight = set()       # Network request ids sent and not finished (an EventSource's never are)
        self.quiet_since = None     # monotonic time the last request in flight finished
        self.hops = 0               # redirects of the page's own document
        self.loader = None          # the navigation's loader id: its document's request id
        self.statuses = {}          # a document request id -> its response's status
        self.auth_tried = set()
        self.failures = {}          # a document request id -> why it failed
        self.gone = None            # a cdp.CdpError: the page's target closed or crashed under us

    def routing(self):
        """The commands that route a session's requests through this page's rules (events first, then Fetch:
        once its answer is back, no request of that session leaves unrouted)."""
        return [("Network.enable", {}), ("Target.setAutoAttach", AUTO_ATTACH), ("Fetch.enable", FETCH)]

    def __call__(self, session, method, params):
        if session is None:
            if method == "Target.detachedFromTarget" and params.get("sessionId") == self.session:
                self.gone = self.gone or cdp.Closed("Target closed")
            return
        if session not in self.sessions:
            return
        handle = self.HANDLERS.get(method)
        if handle is None:
            return
        try:
            handle(self, session, params)
        except (KeyError, TypeError, ValueError, AttributeError):
            # an event not of the protocol's shape (a request it names would stay paused): the page ends now
            raise cdp.ProtocolError(f"the browser sent a malformed {method[:60]} event") from None

    def paused(self, session, params):
        """A request of the page, held for us: let through (`Fetch.continueRequest`) or failed."""
        request_id, url = _str(params["requestId"]), _str(params["request"]["url"])
        kind = str(params.get("resourceType", "")).lower()
        own = session == self.session and kind == "document" and params.get("frameId") == self.target
        if params.get("redirectedRequestId") is not None:   # the next hop of a redirect
            if own:
                self.hops += 1
                if self.hops > MAX_REDIRECTS:
                    self.state.error = self.state.error or FetchError(
                        "http_4xx", f"more than {MAX_REDIRECTS} redirects", url)
                    self._fail(session, request_id)
                    return
            if redirect_refused(self.state, url):
                self._fail(session, request_id)
                return
        if admit(self.state, self.gate, url, kind, own):
            self.conn.post("Fetch.continueRequest", {"requestId": request_id}, session)
        else:
            self._fail(session, request_id)

    def _fail(self, session, request_id):
        self.conn.post("Fetch.failRequest", {"requestId": request_id, "errorReason": "BlockedByClient"}, session)

    def auth(self, session, params):
        """A proxy asks for credentials: the page's proxy's, once (as Playwright answers); any other challenge
        (a site's own) gets the browser's default."""
        request_id = _str(params["requestId"])
        answer = {"response": "Default"}
        if params["authChallenge"].get("source") == "Proxy" and self.proxy is not None \
                and self.proxy.username is not None:
            if request_id in self.auth_tried:
                answer = {"response": "CancelAuth"}
            else:
                self.auth_tried.add(request_id)
                answer = {"response": "ProvideCredentials", "username": self.proxy.username,
                          "password": self.proxy.password or ""}
        self.conn.post("Fetch.continueWithAuth", {"requestId": request_id, "authChallengeResponse": answer},
                       session)

    def sent(self, session, params):
        if params.get("type") != "EventSource":     # never finishes: Playwright's networkidle leaves it out too
            self.inflight.add(_str(params["requestId"]))
            self.quiet_since = None

    def finished(self, session, params):
        request_id = _str(params["requestId"])
        if params.get("type") == "Document" and params.get("errorText") and not params.get("canceled"):
            # a document that failed after its head (a proxy that resets mid-body): Chromium would show what
            # came; Playwright's own fetch of it failed the page, and so does this
            self.failures[request_id] = str(params["errorText"])[:200]
        if request_id in self.inflight:
            self.inflight.discard(request_id)
            if not self.inflight:
                self.quiet_since = time.monotonic()

    def received(self, session, params):
        n = params["dataLength"]
        if not isinstance(n, int) or n < 0:
            raise ValueError(n)
        self.state.bytes += n

    def answered(self, session, params):
        if params.get("type") == "Document":
            status = params["response"]["status"]
            if not isinstance(status, int):
                raise ValueError(status)
            self.statuses[_str(params["requestId"])] = status

    def attached(self, session, params):
        """A frame or worker of the page in a session of its own: routed like the page, then let run."""
        child = _str(params["sessionId"])
        self.sessions.add(child)
        for method, options in self.routing() + [("Runtime.runIfWaitingForDebugger", {})]:
            self.conn.post(method, options, child)

    def detached(self, session, params):
        self.sessions.discard(params.get("sessionId"))

    def crashed(self, session, params):
        if session == self.session:
            self.gone = self.gone or cdp.CdpError("Target crashed")

    HANDLERS = {"Fetch.requestPaused": paused, "Fetch.authRequired": auth, "Network.requestWillBeSent": sent,
                "Network.loadingFinished": finished, "Network.loadingFailed": finished,
                "Network.dataReceived": received, "Network.responseReceived": answered,
                "Target.attachedToTarget": attached, "Target.detachedFromTarget": detached,
                "Inspector.targetCrashed": crashed}

    # --- the page's state, asked by render ---------------------------------------------------

    def check(self, url):
        if self.gone is not None:
            raise self.gone
        self.state.check(url)
        if self.loader in self.failures:
            raise FetchError("network", f"the page's request failed: {self.failures[self.loader]}", url)

    def committed(self, loader):
        self.loader = loader if isinstance(loader, str) else None
        if not self.inflight and self.quiet_since is None:
            self.quiet_since = time.monotonic()

    def idle(self):
        return not self.inflight and self.quiet_since is not None and time.monotonic() - self.quiet_since >= IDLE_S

    def status(self):
        """The status of the navigation's own response (0 when it had none, as Playwright's `None`)."""
        return self.statuses.get(self.loader, 0)

    def has(self, selector, url):
        """Whether the CSS `selector` is in the page now (not yet while a navigation replaces its document)."""
        try:
            answer = self.evaluate(f"document.querySelector({json.dumps(selector)}) !== null")
        except cdp.CommandFailed:
            return False    # no document to look in, between two
        exception = answer.get("exceptionDetails")
        if isinstance(exception, dict):
            if (exception.get("exception") or {}).get("className") == "SyntaxError":
                raise FetchError("network", f"the browser failed: the settle selector {selector!r} is no CSS "
                                            "selector", url)
            return False
        return (answer.get("result") or {}).get("value") is True

    def content(self, url, deadline_s):
        """(the page's URL, its HTML); FetchError `too_large` over the page's byte cap."""
        while True:
            try:
                answer = self.evaluate(CONTENT.format(limit=self.state.max_bytes))
            except cdp.CommandFailed:
                answer = {}     # between two documents: looked at again
            value = (answer.get("result") or {}).get("value")
            if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
                final_url, html = value
                if html is None or (isinstance(html, str) and len(html.encode()) > self.state.max_bytes):
                    raise FetchError("too_large", f"the rendered page is larger than "
                                                  f"{self.state.max_bytes / 2**20:g} MB", url)
                if isinstance(html, str):
                    return final_url, html
            if time.monotonic() >= self.state.deadline:
                raise timeout_error(url, deadline_s)
            self.conn.pump(min(self.state.deadline, time.monotonic() + POLL_S))
            self.check(url)

    def evaluate(self, expression):
        try:
            return self.conn.send("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                                  self.session, self.state.deadline)
        except cdp.Timeout:
            return {}


def _str(value):
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _text(result, key):
    """A string the browser's answer must carry; cdp.ProtocolError when it does not."""
    value = result.get(key)
    if not isinstance(value, str) or not value:
        raise cdp.ProtocolError(f"the browser's answer has no {key}")
    return value
