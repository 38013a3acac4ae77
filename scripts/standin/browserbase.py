"""A Browserbase-like session API on loopback, with real browsers behind it.

    python -m scripts.standin.browserbase --key KEY [--max-sessions M]

It prints ``browserbase listening on http://127.0.0.1:PORT`` and serves until SIGTERM/SIGINT (exit 0).
Routes (every one but the control route needs ``X-BB-API-Key: KEY``, else 401, counted as ``bad_key``):

- ``POST /v1/sessions {projectId, timeout, keepAlive}``: a session, ``{id, status: "RUNNING", connectUrl,
  signingKey, startedAt, expiresAt, keepAlive: false, projectId}`` (201); 429 while ``--max-sessions`` are
  running (counted as ``refused``);
- ``POST /v1/sessions/<id> {"status": "REQUEST_RELEASE"}``: ends it (its connection is closed) and counts a
  release; an id never created answers 404 and counts ``unknown_releases``; a second release of one id
  counts ``double_releases``;
- ``GET /v1/sessions``: every session ``{id, status, pages, connections}``;
- ``connectUrl`` (``ws://127.0.0.1:PORT/connect/<id>?signingKey=...``): the session's DevTools websocket.
  The stand-in relays it to the browser's own after checking the signing key (401 otherwise; 410 once the
  session ended) and counts the pages the client opens (``Target.createTarget``). As at Browserbase a
  session ends when its client disconnects (``ended_by_disconnect``).

``GET /_standin/browserbase``: the counters and every session; ``POST /_standin/browserbase {"max_sessions": M,
"hostile": KIND, "hostile_n": N}``: the next N creates answer hostile (``malformed``, ``not-utf8``,
``wrong-type``, ``no-id``, ``no-connect-url``, ``huge``: 3 MB), and the limit of running sessions.

Behind the sessions is one Debian Chromium (``cdp.endpoint``), not one per session: a session is what
its client makes of its connection (a context per page, disposed when the connection goes), and a browser
per session would cost about 130 MB and a second or two each, for tests that open dozens. Standard library
only (and psutil through ``cdp``); binds 127.0.0.1 only.
"""

import itertools
import json
import secrets
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from scraper.net.chromium import find_browser

from . import cdp
from .control import read_json
from .service import JsonService, answer, body_of, serve_main

HOSTILE = {
    "malformed": b'{"id": "s-1", "connectUrl": ',
    "not-utf8": b'{"id": "\xff\xfe", "connectUrl": "ws://127.0.0.1:9/\xff"}',
    "wrong-type": b'{"id": 42, "connectUrl": ["ws://127.0.0.1:9/"]}',
    "no-id": b'{"status": "RUNNING", "connectUrl": "ws://127.0.0.1:9/x"}',
    "no-connect-url": b'{"id": "hostile-1", "status": "RUNNING"}',  # (the server makes a real session, answered so)

    "huge": b'{"id": "s-2", "connectUrl": "ws://127.0.0.1:9/' + b"x" * 3_000_000 + b'"}',
}


class _Frames:
    """The text messages of one direction of a websocket (masked from a client), fed as bytes arrive."""

    def __init__(self):
        self.buffer, self.parts = b"", []

    def feed(self, data):
        self.buffer += data
        messages = []
        while len(self.buffer) >= 2:
            first, second = self.buffer[0], self.buffer[1]
            length, at = second & 0x7F, 2
            if length == 126:
                if len(self.buffer) < 4:
                    break
                length, at = int.from_bytes(self.buffer[2:4], "big"), 4
            elif length == 127:
                if len(self.buffer) < 10:
                    break
                length, at = int.from_bytes(self.buffer[2:10], "big"), 10
            mask = b""
            if second & 0x80:
                mask, at = self.buffer[at:at + 4], at + 4
            if len(self.buffer) < at + length:
                break
            payload = self.buffer[at:at + length]
            self.buffer = self.buffer[at + length:]
            if mask:    # XOR as one big integer: a byte at a time took 0.3 s of a page whose body goes this way
                key = (mask * (length // 4 + 1))[:length]
                payload = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(length, "big")
            if first & 0x0F in (0x0, 0x1):      # text, or a continuation of one
                self.parts.append(payload)
                if first & 0x80:
                    messages.append(b"".join(self.parts))
                    self.parts = []
        return messages


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        site, path = self.server.site, urlsplit(self.path).path
        if path == "/_standin/browserbase":
            answer(self, 200, site.snapshot())
        elif path.startswith("/connect/"):
            site.relay(self, path.removeprefix("/connect/"), parse_qs(urlsplit(self.path).query))
        elif not site.keyed(self):
            answer(self, 401, {"error": "unauthorized"})
        elif path == "/v1/sessions":
            answer(self, 200, site.listing())
        else:
            answer(self, 404, {"error": "not found"})

    def do_POST(self):
        site, path, raw = self.server.site, urlsplit(self.path).path, body_of(self)
        try:
            if path == "/_standin/browserbase":
                answer(self, 200, site.control(**read_json(raw)))
                return
            if not site.keyed(self):
                answer(self, 401, {"error": "unauthorized"})
            elif path == "/v1/sessions":
                site.create(self, read_json(raw))
            elif path.startswith("/v1/sessions/"):
                status, body = site.release(path.removeprefix("/v1/sessions/"), read_json(raw))
                answer(self, status, body)
            else:
                answer(self, 404, {"error": "not found"})
        except (ValueError, TypeError) as e:
            answer(self, 400, {"error": str(e)})


class BrowserbaseStandin(JsonService):
    """The session API (see the module's docstring) in front of `upstream`, a DevTools endpoint's http base (the
    tests' shared one), or else of a Chromium that `start()` starts in `folder` and `shutdown()` stops."""

    handler = _Handler
    name = "browserbase"

    def __init__(self, key, max_sessions=None, folder=None, upstream=None, **kw):
        super().__init__(**kw)
        self.key, self.max_sessions = key, max_sessions
        self.folder = folder
        self.upstream = upstream
        self.sessions = {}      # id -> dict
        self.counts = dict.fromkeys(("created", "released", "unknown_releases", "double_releases", "refused",
                                     "bad_key", "keep_alive_asked", "ended_by_disconnect"), 0)
        self.hostile, self.hostile_n = None, 0
        self._ids = itertools.count(1)
        self._browser = self._tmp = None
        self.browser_url = self.cdp_base = None     # the Chromium's websocket (host, port, path), its http base

    def start(self):
        base = self.cdp_base = self.upstream
        if base is None:
            if self.folder is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="standin-browserbase-")
                self.folder = self._tmp.name
            self._browser = cdp.endpoint(find_browser("chromium"), self.folder)
            base = self.cdp_base = self._browser.__enter__()[0]
        with urllib.request.urlopen(base + "/json/version", timeout=10) as got:
            ws = json.loads(got.read())["webSocketDebuggerUrl"]
        parts = urlsplit(ws)
        self.browser_url = (parts.hostname, parts.port, parts.path)
        return super().start()

    def shutdown(self):
        with self.lock:
            for s in self.sessions.values():
                self._hang_up(s)
        super().shutdown()
        if self._browser is not None:
            self._browser.__exit__(None, None, None)
            self._browser = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # --- the API ---------------------------------------------------------------------------

    def keyed(self, handler):
        if handler.headers.get("x-bb-api-key") == self.key:
            return True
        with self.lock:
            self.counts["bad_key"] += 1
        return False

    def running(self):
        return sum(1 for s in self.sessions.values() if s["status"] == "RUNNING")

    def create(self, handler, body):
        with self.lock:
            kind = None
            if self.hostile and self.hostile_n > 0:
                self.hostile_n -= 1
                kind = self.hostile
            if kind is not None and kind != "no-connect-url":
                raw = HOSTILE[kind]
                handler.send_response(201)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", str(len(raw)))
                handler.end_headers()
                handler.wfile.write(raw)
                return
            if self.max_sessions is not None and self.running() >= self.max_sessions:
                self.counts["refused"] += 1
                answer(handler, 429, {"error": "too many concurrent sessions"})
                return
            if body.get("keepAlive"):
                self.counts["keep_alive_asked"] += 1
            sid = f"sess-{next(self._ids):04d}-{secrets.token_hex(4)}"
            signing = secrets.token_hex(16)
            now = time.time()
            self.sessions[sid] = {"id": sid, "status": "RUNNING", "signing": signing, "pages": 0, "connections": 0,
                                  "released": 0, "created_at": now, "project": body.get("projectId"),
                                  "timeout": body.get("timeout"), "socks": []}
            self.counts["created"] += 1
        made = {"id": sid, "status": "RUNNING", "projectId": body.get("projectId"), "signingKey": signing,
                "keepAlive": False, "startedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                "expiresAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + (body.get("timeout") or 300)))}
        if kind is None:
            made["connectUrl"] = f"ws://{self.host}:{self.port}/connect/{sid}?signingKey={signing}"
        answer(handler, 201, made)

    def release(self, sid, body):
        with self.lock:
            session = self.sessions.get(sid)
            if session is None:
                self.counts["unknown_releases"] += 1
                return 404, {"error": f"no session {sid}"}
            if body.get("status") != "REQUEST_RELEASE":
                return 400, {"error": "status must be REQUEST_RELEASE"}
            session["released"] += 1
            if session["released"] > 1:
                self.counts["double_releases"] += 1
            else:
                self.counts["released"] += 1
            session["status"] = "COMPLETED"
            self._hang_up(session)
        return 200, {"id": sid, "status": "COMPLETED"}

    def listing(self):
        with self.lock:
            return [{"id": s["id"], "status": s["status"], "pages": s["pages"], "connections": s["connections"]}
                    for s in self.sessions.values()]

    def snapshot(self):
        with self.lock:
            return {**self.counts, "running": self.running(), "max_sessions": self.max_sessions,
                    "sessions": [{k: v for k, v in s.items() if k not in ("socks", "signing")}
                                 for s in self.sessions.values()]}

    def control(self, max_sessions=..., hostile=None, hostile_n=1):
        with self.lock:
            if max_sessions is not ...:
                self.max_sessions = max_sessions
            if hostile is not None and hostile not in HOSTILE:
                raise ValueError(f"hostile must be one of {', '.join(HOSTILE)}")
            self.hostile, self.hostile_n = hostile, int(hostile_n) if hostile else 0
        return self.snapshot()

    # --- the session's websocket --------------------------------------------------------------

    def _hang_up(self, session):
        for sock in session["socks"]:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def relay(self, handler, sid, query):
        """The upgrade of a session's connectUrl, relayed to the browser's websocket as it is (frames untouched),
        the client's messages read on the way for the pages it opens."""
        with self.lock:
            session = self.sessions.get(sid)
            if session is None or query.get("signingKey", [""])[0] != session["signing"]:
                refused = (401, {"error": "bad session or signing key"})
            elif session["status"] != "RUNNING":
                refused = (410, {"error": "the session has ended"})
            else:
                refused = None
                session["connections"] += 1
        if refused:
            answer(handler, *refused)
            return
        host, port, path = self.browser_url
        upstream = socket.create_connection((host, port), timeout=10)
        upstream.settimeout(None)
        # Chromium refuses an upgrade with an Origin it does not allow: the relay sends none
        headers = "".join(f"{k}: {v}\r\n" for k, v in handler.headers.items()
                          if k.lower() not in ("host", "origin"))
        upstream.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{headers}\r\n".encode())
        client = handler.connection
        client.settimeout(None)
        for sock in (client, upstream):     # CDP is many small messages: Nagle's wait would add up to 40 ms each
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.lock:
            session["socks"] += [client, upstream]
        frames = _Frames()

        def count_pages(data):
            pages = sum(m.count(b'"method":"Target.createTarget"') for m in frames.feed(data))
            if pages:
                with self.lock:
                    session["pages"] += pages

        thread = threading.Thread(target=_pump, args=(client, upstream, count_pages), daemon=True,
                                  name=f"relay-{sid}")
        thread.start()
        try:
            _pump(upstream, client)
        finally:
            thread.join(5)
            with self.lock:
                if session["status"] == "RUNNING":      # the client went: at Browserbase the session ends
                    session["status"] = "COMPLETED"
                    self.counts["ended_by_disconnect"] += 1
        handler.close_connection = True


def _pump(source, sink, seen=None):
    """Bytes from `source` to `sink` until either side ends (`seen(data)` sees each chunk), then `sink` closed."""
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
            if seen is not None:
                seen(data)
    except OSError:
        pass
    finally:
        _close(sink)


def _close(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def main(argv=None):
    def add_arguments(parser):
        parser.add_argument("--key", required=True, help="the API key every request must carry (X-BB-API-Key)")
        parser.add_argument("--max-sessions", type=int, default=None, help="429 beyond this many running sessions")
    return serve_main(lambda args: BrowserbaseStandin(args.key, args.max_sessions, host=args.host, port=args.port),
                      __doc__, add_arguments, argv)


if __name__ == "__main__":
    sys.exit(main())
