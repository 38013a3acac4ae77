"""A browser provider at capacity: a relay in front of a DevTools (CDP) endpoint that admits at most M
websocket sessions at once and answers the next upgrade with HTTP 429, as Browserless does when its running
and queued slots are full.

    python -m scripts.standin.cdprelay --upstream http://127.0.0.1:9222 [--max-sessions 2]

It prints ``cdp-relay listening on http://127.0.0.1:PORT`` and serves until SIGTERM/SIGINT (exit 0).
``GET /json/version`` (with or without the slash) is the upstream's, its ``webSocketDebuggerUrl`` pointing at
the relay (Playwright dials whatever that field names); other ``/json`` routes are passed through. A
websocket upgrade is passed to the upstream without its ``Origin`` header (Chromium refuses an Origin it was
not told to allow) and without compression (``Sec-WebSocket-Extensions``), and its bytes piped both ways.

Control routes: ``GET /_standin/stats`` (``{"open", "max_open", "opened", "refused", "cut"}``: sessions open
now, the most ever open at once, admitted, refused with 429, cut by the relay), ``POST /_standin/cut``
(``{}``: cut every open session now; ``{"on": TEXT, "times": K}``: cut a session whenever the upstream sends
it TEXT, such as ``Fetch.requestPaused`` (a page's request paused for the client: the page is under way), the
next K times), ``GET /pressure`` (Browserless's figures: running, maxConcurrent, isAvailable, reason).
Standard library only; binds 127.0.0.1 and dials only the loopback upstream.
"""

import argparse
import asyncio
import json
import signal
import urllib.request
from urllib.parse import urlsplit

from .state import LOOPBACK

HEAD_MAX = 65536            # a request head larger than this is refused
CHUNK = 65536


class Relay:
    """The relay's state: the sessions open (each a pair of writers), its counters, the armed cuts."""

    def __init__(self, upstream, max_sessions):
        parts = urlsplit(upstream)
        if parts.hostname not in (LOOPBACK, "127.0.0.2", "localhost"):
            raise ValueError(f"the upstream must be on loopback, not {upstream!r}")
        self.up_host, self.up_port = parts.hostname, parts.port or 80
        self.upstream = f"http://{self.up_host}:{self.up_port}"
        self.max_sessions = max_sessions
        self.sessions = set()
        self.stats = {"open": 0, "max_open": 0, "opened": 0, "refused": 0, "cut": 0}
        self.cut_on, self.cut_times = b"", 0
        self.url = None

    async def handle(self, reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        line, *header_lines = head.decode("latin-1").split("\r\n")
        method, path = (line.split(" ") + ["", ""])[:2]
        headers = {}
        for h in header_lines:
            if ":" in h:
                k, v = h.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        body = b""
        if int(headers.get("content-length") or 0):
            body = await reader.readexactly(min(int(headers["content-length"]), HEAD_MAX))
        if headers.get("upgrade", "").lower() == "websocket":
            await self.session(reader, writer, header_lines, line)
            return
        status, answer = await self.route(method, path, body)
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(answer)}\r\n"
                     f"Connection: close\r\n\r\n".encode() + answer)
        await writer.drain()
        writer.close()

    async def route(self, method, path, body):
        """(status line, JSON body) of a plain HTTP request."""
        if path == "/_standin/stats":
            return "200 OK", json.dumps(self.stats).encode()
        if path == "/_standin/cut" and method == "POST":
            ask = json.loads(body or b"{}")
            if ask.get("on"):
                self.cut_on, self.cut_times = ask["on"].encode(), int(ask.get("times", 1))
                return "200 OK", json.dumps({"armed": self.cut_times}).encode()
            n = len(self.sessions)
            for pair in list(self.sessions):
                self.cut(pair)
            return "200 OK", json.dumps({"cut": n}).encode()
        if path.rstrip("/") == "/pressure":
            full = self.stats["open"] >= self.max_sessions
            return "200 OK", json.dumps({"pressure": {
                "running": self.stats["open"], "queued": 0, "maxConcurrent": self.max_sessions, "maxQueued": 0,
                "isAvailable": not full, "reason": "full" if full else "",
                "recentlyRejected": self.stats["refused"]}}).encode()
        if path.startswith("/json"):
            try:
                answer = await asyncio.to_thread(self.fetch, path)
            except OSError as e:
                return "502 Bad Gateway", json.dumps({"error": str(e)}).encode()
            if path.rstrip("/") == "/json/version":
                version = json.loads(answer)
                ws = urlsplit(version["webSocketDebuggerUrl"])
                version["webSocketDebuggerUrl"] = f"ws://{urlsplit(self.url).netloc}{ws.path}"
                answer = json.dumps(version).encode()
            return "200 OK", answer
        return "404 Not Found", b'{"error": "not found"}'

    def fetch(self, path):
        with urllib.request.urlopen(self.upstream + path, timeout=10) as up:
            return up.read()

    async def session(self, reader, writer, header_lines, line):
        """A websocket session: 429 past the capacity, else the upgrade passed on and the bytes piped."""
        if self.stats["open"] >= self.max_sessions:
            self.stats["refused"] += 1
            writer.write(b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        self.stats["open"] += 1     # taken before the upstream connects: a session arriving meanwhile sees it
        try:
            up_reader, up_writer = await asyncio.open_connection(self.up_host, self.up_port)
        except OSError:
            self.stats["open"] -= 1
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            writer.close()
            return
        # no Origin (Chromium refuses one it was not told to allow), and no compression, so that the frames
        # carry their JSON as text and an armed cut can see it
        kept = [h for h in header_lines
                if h and not h.lower().startswith(("origin:", "host:", "sec-websocket-extensions:"))]
        up_writer.write("\r\n".join([line, f"Host: {self.up_host}:{self.up_port}", *kept, "", ""]).encode("latin-1"))
        pair = (writer, up_writer)
        self.sessions.add(pair)
        self.stats["opened"] += 1
        self.stats["max_open"] = max(self.stats["max_open"], self.stats["open"])
        try:
            await asyncio.gather(self.pipe(reader, up_writer, pair, watch=False),
                                 self.pipe(up_reader, writer, pair, watch=True))
        finally:
            self.sessions.discard(pair)
            self.stats["open"] -= 1
            for w in pair:
                w.close()

    async def pipe(self, src, dst, pair, watch):
        """Copy `src` to `dst` until either side ends; the upstream's bytes are watched for an armed cut."""
        tail = b""
        try:
            while chunk := await src.read(CHUNK):
                if watch and self.cut_times:
                    seen = tail + chunk
                    if self.cut_on in seen:
                        self.cut_times -= 1
                        self.cut(pair)
                        return
                    tail = seen[-len(self.cut_on):]
                dst.write(chunk)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            for w in pair:      # one side ended: the session is over
                w.close()

    def cut(self, pair):
        """End a session abruptly (both sockets reset), as a provider dropping it or its browser dying."""
        if pair in self.sessions:
            self.stats["cut"] += 1
        for w in pair:
            w.transport.abort()


async def _serve(relay, host, port):
    server = await asyncio.start_server(relay.handle, host, port, limit=HEAD_MAX)
    relay.url = f"http://{host}:{server.sockets[0].getsockname()[1]}"
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"cdp-relay listening on {relay.url}", flush=True)
    async with server:
        await stop.wait()
        for pair in list(relay.sessions):
            relay.cut(pair)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="the CDP endpoint's http base (on loopback)")
    parser.add_argument("--max-sessions", type=int, default=2, help="websocket sessions open at once; 429 beyond")
    parser.add_argument("--host", default=LOOPBACK, help=f"must be {LOOPBACK}")
    parser.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    args = parser.parse_args(argv)
    if args.host != LOOPBACK:
        parser.error(f"the relay binds {LOOPBACK} only")
    try:
        relay = Relay(args.upstream, args.max_sessions)
    except ValueError as e:
        parser.error(str(e))
    asyncio.run(_serve(relay, args.host, args.port))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
