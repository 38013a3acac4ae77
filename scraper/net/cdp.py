"""A small synchronous client of the Chrome DevTools Protocol (CDP), over one websocket: what a worker speaks
to a remote Chromium (`browser_endpoint = "cdp:URL"`, and Browserbase's connectUrl) without Playwright's
node driver, which cost about 71 MB of PSS in every worker that rendered remotely.

`Connection.open(url, timeout_s, max_message_bytes)` resolves an http(s) base through its
`/json/version`'s `webSocketDebuggerUrl` (as Playwright's connect_over_cdp does) and connects; a ws(s) URL
is dialled as it is. `send` sends one command and waits for its answer under a deadline, dispatching the
events that arrive meanwhile to `listener(session_id, method, params)`; `post` sends one whose answer is
not waited for (a listener must not wait: it runs inside a wait); `pump` waits for events alone. Commands
to a page go to its flat session (`Target.attachToTarget {flatten: true}`): the `session` argument.

Everything the remote browser sends is hostile until parsed: a message is bounded in size by the websocket
itself, must be a JSON object that is an answer to a command of ours or an event; anything else is a
`ProtocolError`, after which the connection is closed (it can no longer be trusted to mean what it says).
A connection that went (the remote browser, a relay or the provider closed it) is `Closed`. The endpoint
refusing or not reachable when connecting is `Refused`. No reason quotes a message of the browser's beyond
its first 200 characters, and none names the URL dialled (it may carry a token).
"""

import itertools
import json
import logging
import time
from urllib.parse import urlsplit, urlunsplit

log = logging.getLogger(__name__)

VERSION_MAX_BYTES = 64 * 1024   # /json/version's answer is under 1 KB
WS_URL_MAX_CHARS = 4096
CLOSE_TIMEOUT_S = 2.0           # the close handshake; Chromium answers at once, a hung relay is not waited for
SAID_MAX_CHARS = 200            # of a browser's error message, in a reason


class CdpError(Exception):
    """Something of the remote browser's ended what we asked of it (its reason names no URL)."""


class Refused(CdpError):
    """The endpoint refused the connection, was full (an HTTP 429 to the upgrade) or could not be reached."""


class Closed(CdpError):
    """The connection went: the remote browser, a relay or the provider closed it."""


class ProtocolError(CdpError):
    """The browser sent what is no answer we can use: not JSON, no object, too large, an answer to nothing."""


class CommandFailed(CdpError):
    """The browser answered a command with an error (its message)."""


class Timeout(CdpError):
    """No answer before the deadline."""


def websocket_url(url, timeout_s):
    """The ws(s) URL of the browser at `url`: itself, or an http(s) base's `/json/version` webSocketDebuggerUrl
    (the base's path and query kept, as Playwright asks it); Refused with a reason otherwise."""
    import requests

    from scraper.base.errors import FetchError
    from scraper.net import http
    parts = urlsplit(url)
    if parts.scheme in ("ws", "wss"):
        return url
    version = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + "/json/version/", parts.query, ""))
    started = time.monotonic()
    try:
        # direct, as the websocket is: the endpoint's own network, not the environment's proxy
        resp = requests.get(version, timeout=timeout_s, stream=True, allow_redirects=False,
                            proxies={"http": None, "https": None})
    except requests.RequestException as e:
        raise Refused(f"/json/version: no answer ({type(e).__name__})") from None
    try:
        if resp.status_code != 200:
            raise Refused(f"/json/version: HTTP {resp.status_code}")
        raw = bytes(http.read_body(resp, version, started + timeout_s, timeout_s, VERSION_MAX_BYTES))
    except FetchError as e:
        raise Refused(f"/json/version: {e.kind} while reading the answer") from None
    except OSError as e:
        raise Refused(f"/json/version: {type(e).__name__} while reading the answer") from None
    finally:
        resp.close()
    try:
        found = json.loads(raw.decode("utf-8")).get("webSocketDebuggerUrl")
    except (UnicodeDecodeError, ValueError, AttributeError):
        raise Refused("/json/version: the answer is no JSON object") from None
    if not isinstance(found, str) or len(found) > WS_URL_MAX_CHARS or urlsplit(found).scheme not in ("ws", "wss") \
            or not urlsplit(found).hostname or any(c.isspace() for c in found):
        raise Refused("/json/version: the answer names no usable webSocketDebuggerUrl")
    return found


class Connection:
    """One websocket to a browser; `listener(session_id, method, params)` gets its events (None: dropped)."""

    def __init__(self, ws, max_message_bytes):
        self.ws, self.max_message_bytes = ws, max_message_bytes
        self.listener = None
        self.ids = itertools.count(1)
        self.dropped = set()    # ids whose answers are not waited for (posted, or whose wait timed out)
        self.awaited = set()    # ids whose answers a send is waiting for
        self.answers = {}       # id -> an awaited answer that came
        self.closed = None      # why the connection is over (a Closed or ProtocolError), once it is

    @classmethod
    def open(cls, url, timeout_s, max_message_bytes):
        """Connect to the browser at `url` (see `websocket_url`) within `timeout_s`; Refused otherwise."""
        from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI
        from websockets.sync.client import connect
        ws_url = websocket_url(url, timeout_s)
        try:
            # no compression (Chromium offers none), no proxy from the environment, no pings (Chromium needs
            # none; a page's deadline bounds every wait), no Origin (Chromium refuses one it was not told of)
            # (entered as a context manager: the form websockets keeps; the connection outlives the call and is
            # closed by `close`)
            ws = connect(ws_url, open_timeout=timeout_s, close_timeout=CLOSE_TIMEOUT_S, max_size=max_message_bytes,
                         compression=None, proxy=None, ping_interval=None, user_agent_header=None).__enter__()
        except InvalidStatus as e:
            raise Refused(f"the websocket upgrade was answered HTTP {e.response.status_code}") from None
        except InvalidURI:
            raise Refused("the websocket URL is not valid") from None
        except (InvalidHandshake, OSError, TimeoutError) as e:
            raise Refused(f"the websocket could not be opened ({type(e).__name__})") from None
        return cls(ws, max_message_bytes)

    def is_connected(self):
        """Not closed by either side: the websocket's own state says when the browser closed it while idle
        (a provider's session timed out between pages), before a command finds out."""
        from websockets.protocol import State
        return self.closed is None and self.ws.state is State.OPEN

    def close(self):
        """Drop the connection (the browser disposes of the contexts made `disposeOnDetach`)."""
        if self.closed is None:
            self.closed = Closed("Connection closed")
        try:
            self.ws.close()
        except Exception as e:     # a connection that went already
            log.debug("closing a CDP connection: %s", e)

    def post(self, method, params=None, session=None):
        """Send a command without waiting for its answer (dropped when it comes, errors included)."""
        self.dropped.add(self._send(method, params, session))

    def send(self, method, params=None, session=None, deadline=None):
        """Send a command and return its answer's `result` (a dict), dispatching events until it comes;
        CommandFailed, Timeout at `deadline` (a monotonic time), Closed, ProtocolError."""
        return self.send_all([(method, params)], session, deadline)[0]

    def send_all(self, commands, session=None, deadline=None):
        """Send [(method, params)] at once (the browser runs a session's commands in order) and return their
        results in order, as `send` does: one round trip's wait for all of them."""
        ids = [self._send(method, params, session) for method, params in commands]
        self.awaited.update(ids)
        try:
            for n in ids:
                while n not in self.answers:
                    self._read(deadline)
        except Timeout:
            self.dropped.update(n for n in ids if n not in self.answers)   # they may still come
            raise
        finally:
            self.awaited.difference_update(ids)
            answers = [self.answers.pop(n, None) for n in ids]
        return [self._result(method, answer) for (method, _), answer in zip(commands, answers, strict=True)]

    def pump(self, deadline):
        """Dispatch the events that arrive until `deadline` (a monotonic time); Closed, ProtocolError."""
        try:
            while True:
                self._read(deadline)
        except Timeout:
            return

    # --- the wire ------------------------------------------------------------------------

    def _send(self, method, params, session):
        from websockets.exceptions import ConnectionClosed
        if self.closed is not None:
            raise type(self.closed)(str(self.closed))
        n = next(self.ids)
        message = {"id": n, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        try:
            self.ws.send(json.dumps(message, separators=(",", ":")))    # compact, as Chromium's own clients send
        except ConnectionClosed as e:
            raise self._gone(e) from None
        return n

    def _read(self, deadline):
        """Read one message and file it: an event dispatched, an awaited answer kept, a dropped one dropped.
        Timeout at `deadline` (None: none)."""
        from websockets.exceptions import ConnectionClosed
        if self.closed is not None:
            raise type(self.closed)(str(self.closed))
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise Timeout("no answer before the deadline")
        try:
            raw = self.ws.recv(timeout=left)
        except TimeoutError:
            raise Timeout("no answer before the deadline") from None
        except ConnectionClosed as e:
            raise self._gone(e) from None
        message = self._parse(raw)
        n = message.get("id")
        if n is None:
            if self.listener is not None:
                self.listener(message.get("sessionId"), message["method"], message.get("params", {}))
        elif n in self.awaited:
            self.answers[n] = message
        elif n in self.dropped:
            self.dropped.discard(n)
        else:
            raise self._broken(f"an answer to no command of ours (id {str(n)[:20]})")

    def _result(self, method, answer):
        if "error" in answer:
            raise CommandFailed(f"{method}: {_said(answer['error'])}")
        result = answer.get("result")
        if not isinstance(result, dict):
            raise self._broken(f"an answer to {method} with no result object")
        return result

    def _parse(self, raw):
        if not isinstance(raw, str):
            raise self._broken("a binary message")
        try:
            message = json.loads(raw)
        except ValueError:
            raise self._broken("a message that is not JSON") from None
        if not isinstance(message, dict):
            raise self._broken(f"a JSON {type(message).__name__}, not an object")
        n, method = message.get("id"), message.get("method")
        if n is not None and (not isinstance(n, int) or isinstance(n, bool)):
            raise self._broken("an answer whose id is no number")
        if n is None and not (isinstance(method, str) and isinstance(message.get("params", {}), dict)
                              and isinstance(message.get("sessionId", ""), str)):
            raise self._broken("a message that is neither an answer nor an event")
        return message

    def _gone(self, e):
        """The connection closed under us: Closed, or ProtocolError when we closed it for a message too large."""
        sent = getattr(e, "sent", None)
        if sent is not None and sent.code == 1009:     # "message too big": the websocket's own cap
            self.closed = ProtocolError(f"the browser sent a message larger than {self.max_message_bytes / 2**20:g} MB")
        else:
            self.closed = Closed("Connection closed")
        return self.closed

    def _broken(self, what):
        """A message that cannot be trusted: the connection is closed, the reason kept for every later call."""
        self.closed = ProtocolError(f"the browser sent {what}")
        try:
            self.ws.close()
        except Exception as e:
            log.debug("closing a CDP connection: %s", e)
        return self.closed


def _said(error):
    """A command's error answer, in a few words: its message, cut."""
    said = error.get("message") if isinstance(error, dict) else None
    return (said if isinstance(said, str) else "an error")[:SAID_MAX_CHARS]
