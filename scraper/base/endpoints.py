"""A browser endpoint as configured (`browser_endpoint`): where a source's pages are rendered.

`local` (the default) launches the system's Chromium here; `cdp:URL` attaches to a Chromium elsewhere over
the DevTools protocol (an http(s) base such as http://127.0.0.1:9222, whose /json/version names the
websocket, or the ws(s):// URL itself); `playwright:WS-URL` attaches to a Playwright server (`launchServer`,
`run-server`, Browserless's /chromium/playwright) over Playwright's own protocol; `browserbase` creates a
session through Browserbase's session API (`browserbase_url`, the key from SCRAPER_BROWSERBASE_KEY) for each
connection (net/browserbase).

`Endpoint` is a `str` whose text is the shown form: a user name or password as `***`, every query value as
`***` (Browserless takes its token as `?token=`), so settings rows, `scraper config`, logs and errors show
no secret; only the code that connects reads `.url`."""

import dataclasses
import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

LOCAL = "local"
KINDS = ("local", "cdp", "playwright", "browserbase")
ALLOWED = "local, cdp:URL (an http(s) or ws(s) URL of a DevTools endpoint), playwright:WS-URL or browserbase"
_SCHEMES = {"cdp": ("http", "https", "ws", "wss"), "playwright": ("ws", "wss")}
_SCHEMES_SAID = {"cdp": "an http(s) or ws(s) URL", "playwright": "a ws(s) URL"}


class Endpoint(str):
    """A browser endpoint: the text is the shown form; `.kind` one of KINDS, `.url` the URL to connect to
    (None for local and browserbase)."""

    kind: str
    url: str | None

    def __new__(cls, kind: str, url: str | None = None) -> "Endpoint":
        out = super().__new__(cls, kind if url is None else f"{kind}:{shown_url(url)}")
        out.kind, out.url = kind, url
        return out

    @property
    def remote(self) -> bool:
        """Pages are rendered elsewhere: no local Chromium, no local browser slot."""
        return self.kind != LOCAL

    def __reduce__(self) -> tuple[type["Endpoint"], tuple[str, str | None]]:   # a copy keeps the URL
        return (Endpoint, (self.kind, self.url))


@dataclasses.dataclass(frozen=True)
class Plan:
    """The browser a source's pages use: its endpoint, the sessions open at once (remote), the pages and the
    age (s, None: no limit) after which a session is retired, and for browserbase the API's URL."""

    endpoint: Endpoint
    sessions: int
    session_pages: int
    session_timeout_s: float | None
    api_url: str | None = None      # browserbase: the session API's base URL

    @property
    def key(self) -> tuple[str, str | None, int, int, float | None, str | None]:
        """What tells two plans apart (the endpoint by its URL: two shown alike may differ in their tokens)."""
        return (self.endpoint.kind, self.endpoint.url, self.sessions, self.session_pages, self.session_timeout_s,
                self.api_url)


def parse(text: object) -> Endpoint:
    """The Endpoint of `text`; ValueError when it is none of ALLOWED (never quoting the URL's secrets)."""
    if isinstance(text, Endpoint):
        return text
    if not isinstance(text, str):
        raise ValueError(f"it must be {ALLOWED}")
    text = text.strip()
    if text.lower() in (LOCAL, "browserbase"):
        return Endpoint(text.lower())
    kind, _, url = text.partition(":")
    kind = kind.lower()
    if kind not in _SCHEMES:
        raise ValueError(f"it must be {ALLOWED}")
    parts = urlsplit(url)
    if parts.scheme.lower() not in _SCHEMES[kind] or not parts.hostname or re.search(r"\s", url):
        raise ValueError(f"{kind}: must be followed by {_SCHEMES_SAID[kind]}")
    return Endpoint(kind, url)


def shown_url(url: str) -> str:
    """`url` with any user name or password, and every query value, as ***."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***:***@" + netloc.rpartition("@")[2]
    query = urlencode([(k, "***") for k, _ in parse_qsl(parts.query, keep_blank_values=True)], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, "" if not parts.fragment else "***"))


def shown(text: str) -> str:
    """Any text naming an endpoint (a mistaken one too) with a URL's user:password@ and query values as ***."""
    text = re.sub(r"([?&][^=&\s#]*=)[^&\s#]*", r"\1***", text)
    return re.sub(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/@]*@", r"\1***:***@", text)
