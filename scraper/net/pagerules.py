"""What a rendered page may send, and how long it may take: the rules both renderers apply to every request a
page sends, Playwright's (net/browser) and the driverless one over CDP (net/cdppage).

Images, fonts and media are refused, other domains too unless allowed, and each request let through first
passes `gate(url)` (the caller's rate slot and robots check; it may raise to refuse that request). The page's
own request refused ends the attempt with the gate's reason; another request refused ends it only for a stop
(not for a refusal such as robots). A redirect to another domain fails the page. A page is bounded like an
HTTP answer: one deadline over navigation and settling, and a cap on the bytes its responses carry.
"""

import time

from scraper.base.errors import FetchError, JobInvalid
from scraper.base.urls import domain_of

MAX_REDIRECTS = 5               # as plain HTTP's
SETTLE_SLICE_S = 0.25           # how often the settle wait looks at the byte count and the gate's verdict
BLOCKED_TYPES = frozenset({"image", "font", "media"})


class PageState:
    """What the routing and event handlers learnt about one page (they run inside the renderer's waits)."""

    def __init__(self, url, allow, deadline, max_bytes):
        self.deadline, self.max_bytes = deadline, max_bytes
        self.domain = domain_of(url)
        self.allow = allow
        self.error = None       # an exception that ends the attempt (the page request refused, a stop)
        self.bytes = 0
        self.sent = 0           # requests let through
        self.refused = 0        # other domains, images, fonts, media, refused by the gate
        self.redirect = None    # where the page's own request was redirected (render navigates there)

    def allowed(self, url):
        return domain_of(url) in self.allow or domain_of(url) == self.domain

    def check(self, url):
        """Raise what ends the attempt now: an error a handler kept, or the byte cap passed."""
        if self.error is not None:
            raise self.error
        if self.bytes > self.max_bytes:
            raise FetchError("too_large", f"the page transferred more than {self.max_bytes / 2**20:g} MB", url)


def admit(state, gate, url, resource_type, own):
    """Whether a request of the page (`own`: the page's own document) may be sent: refuse what is not needed or
    not ours, gate the rest. A refusal the gate raised for the page's own request, or a stop for any, is kept
    in `state.error` (it ends the attempt)."""
    if resource_type in BLOCKED_TYPES or not url.startswith(("http://", "https://")) or not state.allowed(url):
        state.refused += 1
        return False
    try:
        gate(url)
    except Exception as e:
        state.refused += 1
        if state.error is None and (own or not isinstance(e, (FetchError, JobInvalid))):
            state.error = e
        return False
    state.sent += 1
    return True


def redirect_refused(state, url, status=None):
    """A redirect's next hop to a domain the page may not reach: it fails the page (True, the error kept)."""
    if state.allowed(url):
        return False
    state.error = state.error or FetchError("http_4xx", f"redirect to another domain refused: {url}", url, status)
    return True


def ms_left(deadline, url, deadline_s):
    left = deadline - time.monotonic()
    if left <= 0:
        raise timeout_error(url, deadline_s)
    return max(1.0, left * 1000)


def timeout_error(url, deadline_s):
    return FetchError("timeout", f"the page did not settle within {deadline_s:g} s", url)


def first_line(e):
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
