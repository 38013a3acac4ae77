"""The stand-in site's HTTP server: one port serves both hosts, the API under ``/api`` and the pages
under ``/workflows``; the control routes live under ``/_standin``.

Point the scraper at it with ``SCRAPER_API_URL=http://127.0.0.1:PORT/api`` and
``SCRAPER_SITE_URL=http://127.0.0.1:PORT``. Faults (5xx, resets, truncated bodies, slow answers, 404/403,
hostile answers) are assigned to template ids from the seed and listed by ``/_standin/corpus``.
``POST /_standin/library`` changes the library between runs (``{"add": N, "edit": [ids],
"edit_workflow": [ids], "remove": [ids], "restore": [ids], "views": rounds}``).
``GET /robots.txt`` answers as ``--robots`` says (default: no robots.txt, 404; see ``robots``), and
``POST /_standin/slow`` starts a slow phase (see ``timeline``); both, and ``GET /_standin/requests``, are
the shared control routes of ``control``.
"""

import json
import math
import re
import socket
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from . import robots
from .control import SharedControl
from .corpus import dumps
from .faults import HOSTILE_KINDS
from .hostile import HostileAnswers
from .state import SiteState

MAX_ROWS = 100
NOT_FOUND_PAGE = (b"<!DOCTYPE html><html><head><title>Page not found | n8n</title></head>"
                  b"<body><h1>404</h1></body></html>")

_SEARCH_RE = re.compile(r"^/api/templates/search/?$")
_DETAIL_RE = re.compile(r"^/api/templates/workflows/(\d+)/?$")
_IMPORT_RE = re.compile(r"^/api/workflows/templates/(\d+)/?$")
_PAGE_RE = re.compile(r"^/workflows/(\d+)(?:-[^/]*)?/?$")
_CTRL_TEMPLATE_RE = re.compile(r"^/_standin/template/(\d+)/?$")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def server_bind(self):
        # Skip HTTPServer's getfqdn(): a reverse DNS look-up is slow or hangs without a network.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request, client_address):
        # A client that goes away mid-answer is normal; anything else keeps the default traceback.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _Handler(HostileAnswers, SharedControl, BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "n8n-standin/1.0"
    timeout = 60  # idle keep-alive connections are dropped after this

    def setup(self):
        super().setup()
        # Headers and body go out in two writes: without NODELAY, Nagle + delayed ACK add ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.site.track(self.connection, add=True)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.site.track(self.connection, add=False)

    def log_message(self, format, *args):
        """Quiet: nothing per request on stderr."""

    def parse_request(self):
        # The arrival is stamped here, right after the request line was read and before any
        # latency sleep, under the site's lock so arrival order and bucket order agree.
        site = self.server.site
        parts = self.raw_requestline.split()
        target = parts[1].decode("latin-1") if len(parts) >= 2 else ""
        path = urlsplit(target).path
        self._counted = not path.startswith("/_standin")
        self._retry_after, self._storm = (site.arrive(_kind_of(path)) if self._counted else (0, False))
        self._latency_s = site.timeline.latency_s() if self._counted else 0.0
        return super().parse_request()

    # -- answers -------------------------------------------------------------------------------

    def _send(self, status, body, ctype="application/json; charset=utf-8", headers=None):
        site = self.server.site
        if self._counted:
            site.count_status(status, len(body))
        try:
            self.send_response(status)
            if status != 304:   # a 304 has no content, so neither its type nor its length
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
        except (ConnectionError, TimeoutError):
            self.close_connection = True

    def _validated(self, body, kind, ctype="application/json; charset=utf-8", detail=False):
        """A 200 with the validators of the site's mode, or a 304 to a request whose validators match."""
        status, headers = self.server.site.validators.answer(self.headers, body, kind, detail,
                                                             urlsplit(self.path).path)
        self._send(status, b"" if status == 304 else body, ctype, headers)

    def _json(self, status, obj, headers=None):
        self._send(status, dumps(obj), headers=headers)

    def _error(self, status, message):
        self._json(status, {"status": status, "message": message})

    def _gateway_error(self, status, reason):
        # Gateways (Cloudflare) answer 502/503/504 with a small HTML page, not JSON.
        body = f"<html><head><title>{status} {reason}</title></head><body><h1>{status} {reason}</h1></body></html>"
        self._send(status, body.encode(), ctype="text/html; charset=utf-8")

    def _reset(self):
        """Close the TCP connection without answering, so the client sees a reset (RST)."""
        robots.reset_connection(self)

    # -- dispatch ------------------------------------------------------------------------------

    def do_GET(self):
        """Serve every GET (API, pages and control endpoints)."""
        split = urlsplit(self.path)
        if not self._counted:
            self._control_get(split.path, split.query)
            return
        if self.server.site.client(self.client_address[0], self.headers, self.requestline):
            self._error(403, "Forbidden")
            return
        if not self._gate():
            return
        self._public_get(split.path, parse_qs(split.query))

    def do_POST(self):
        """Control endpoints /_standin/storm, /_standin/library and /_standin/reset; anything else is 404."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        path = urlsplit(self.path).path.rstrip("/")
        site = self.server.site
        if self._counted:
            if self._gate():
                self._error(404, "Not Found")
            return
        if self._shared_post(path, raw):
            return
        if path == "/_standin/storm":
            try:
                body = json.loads(raw or b"{}")
                seconds, share = float(body.get("seconds", 0)), float(body.get("share", 1.0))
            except (ValueError, AttributeError):
                self._error(400, 'body must be JSON {"seconds": S, "share": 0..1}')
                return
            if not seconds >= 0 or math.isinf(seconds) or not 0.0 <= share <= 1.0:
                self._error(400, "seconds must be a finite number >= 0 and share within 0..1")
                return
            site.storm(seconds, share)
            self._json(200, {"storm_seconds": seconds, "share": share})
        elif path == "/_standin/library":
            try:
                added, listed = site.change_library(**json.loads(raw or b"{}"))
            except (ValueError, TypeError) as e:
                self._error(400, f"bad library change: {e}")
                return
            self._json(200, {"added": added, "listed": listed})
        elif path == "/_standin/clients":
            try:
                body = json.loads(raw or b"{}")
                site.banned_addresses = set(body.get("ban", ()))
                site.secrets = tuple(body.get("secrets", ()))
            except (ValueError, TypeError, AttributeError) as e:
                self._error(400, f'body must be JSON {{"ban": [addresses], "secrets": [texts]}}: {e}')
                return
            self._json(200, {"ban": sorted(site.banned_addresses), "secrets": len(site.secrets)})
        elif path == "/_standin/validators":
            try:
                site.validators.set_mode(json.loads(raw or b"{}").get("mode"))
            except (ValueError, TypeError, AttributeError) as e:
                self._error(400, f'body must be JSON {{"mode": one of the validators modes}}: {e}')
                return
            self._json(200, site.validators.stats())
        elif path == "/_standin/reset":
            site.reset()
            self._json(200, {"reset": True})
        else:
            self._error(404, "Not Found")

    def _gate(self):
        """Rate limit, latency and storm for a counted request; True if it may be answered."""
        if self._retry_after:
            self._json(
                429,
                {"status": 429, "message": "Too Many Requests", "retryAfter": self._retry_after},
                headers={"Retry-After": str(self._retry_after)},
            )
            return False
        if self._latency_s > 0:  # --latency-ms, times the factor of a slow phase
            time.sleep(self._latency_s)
        if self._storm:
            self._gateway_error(503, "Service Unavailable")
            return False
        return True

    def _public_get(self, path, query):
        site = self.server.site
        corpus = site.corpus
        if path == "/robots.txt" and self._robots():
            return
        if _SEARCH_RE.match(path):
            self._search(query)
            return
        match = _DETAIL_RE.match(path)
        if match:
            self._detail(int(match.group(1)))
            return
        match = _IMPORT_RE.match(path)
        if match:
            tid = int(match.group(1))
            if site.is_live(tid):
                self._send(200, corpus.importable(tid))
            else:
                self._error(404, "Workflow not found")
            return
        match = _PAGE_RE.match(path)
        if match:
            tid = int(match.group(1))
            if site.is_live(tid):
                self._validated(corpus.page(tid), "page", ctype="text/html; charset=utf-8")
            else:
                self._send(404, NOT_FOUND_PAGE, ctype="text/html; charset=utf-8")
            return
        if path.rstrip("/") == "/api/health":
            self._json(200, {"status": "OK"})
            return
        self._error(404, "Not Found")

    def _robots(self):
        """Answer /robots.txt as its mode says; False for mode none (the site's plain 404)."""
        what = robots.answer(self.server.site.robots)
        if what[0] == "text":
            self._validated(what[1], "robots", ctype="text/plain; charset=utf-8")
        elif what[0] == "status":
            self._send(what[1], what[2], ctype="text/html; charset=utf-8")
        elif what[0] == "reset":
            self._reset()
        return what[0] != "none"

    def _search(self, query):
        corpus = self.server.site.corpus
        try:
            page = int(query.get("page", ["1"])[0])
            rows = int(query.get("rows", ["20"])[0])
        except ValueError:
            self._error(400, "page and rows must be integers")
            return
        if page < 1 or rows < 1:
            self._error(400, "page and rows must be >= 1")
            return
        if rows > MAX_ROWS:
            self._error(400, f"rows must be <= {MAX_ROWS}")
            return
        listed, dated = self.server.site.listing(query.get("sort", [None])[0])
        chunk = listed[(page - 1) * rows: page * rows]
        body = b"".join(
            [
                b'{"totalWorkflows":%d,"workflows":[' % len(listed),
                b",".join(corpus.search_item(tid, dated) for tid in chunk),
                b'],"filters":[]}',
            ]
        )
        self._validated(body, "search")

    def _detail(self, tid):
        site = self.server.site
        fault = site.detail_hit(tid)
        if tid not in site.corpus.position:
            self._error(404, "Workflow not found")
            return
        if fault is None:
            if tid in site.corpus.missing or tid in site.corpus.removed:
                self._error(404, "Workflow not found")
            else:
                self._validated(site.corpus.detail(tid), "detail", detail=True)
            return
        kind = fault
        site.count_fault(kind)
        if kind == "reset":
            self._reset()
        elif kind == "truncate":
            body = site.corpus.detail(tid)
            self._send(200, body[: len(body) // 2])
        elif kind == "slow":
            time.sleep(site.slow_s)
            self._send(200, site.corpus.detail(tid))
        elif kind in HOSTILE_KINDS or kind == "stall":
            self.hostile(kind, tid)
        elif kind == "500":
            self._error(500, "Internal Server Error")
        elif kind == "404":
            self._error(404, "Workflow not found")
        elif kind == "403":
            self._error(403, "Forbidden")
        else:
            reasons = {"502": "Bad Gateway", "503": "Service Unavailable", "504": "Gateway Timeout"}
            self._gateway_error(int(kind), reasons[kind])


    def _control_get(self, path, query=""):
        site = self.server.site
        path = path.rstrip("/")
        if self._shared_get(path, query):
            return
        if path == "/_standin/stats":
            self._json(200, site.stats())
        elif path == "/_standin/corpus":
            self._json(200, site.corpus_info())
        else:
            match = _CTRL_TEMPLATE_RE.match(path)
            if match and site.is_live(int(match.group(1))):
                self._send(200, site.corpus.detail(int(match.group(1))))
            else:
                self._error(404, "Not Found")


def _kind_of(path):
    if _SEARCH_RE.match(path):
        return "search"
    if _DETAIL_RE.match(path):
        return "detail"
    if _IMPORT_RE.match(path):
        return "importable"
    if _PAGE_RE.match(path):
        return "page"
    if path.rstrip("/") == "/api/health":
        return "health"
    if path == "/robots.txt":
        return "robots"
    return "other"


class StandinSite(SiteState):
    """The stand-in site: build the corpus, then ``start()`` to serve it on 127.0.0.1.

    Usage::

        site = StandinSite(templates=200, rate=20, burst=5).start()
        requests.get(site.url + "/api/templates/search?page=1&rows=100")
        site.stats(); site.shutdown()
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._conn_lock = threading.Lock()
        self._conns = set()
        self._server = None
        self._thread = None
        self.url = None

    def track(self, conn, add):
        """Remember an open connection (add) or forget it, so shutdown can drop keep-alive ones."""
        with self._conn_lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def start(self):
        """Bind and serve in a daemon thread; returns self (``.url`` is then set)."""
        if self._server is not None:
            raise RuntimeError("already started")
        self._server = _Server((self.host, self.port), _Handler)
        self._server.site = self
        self.port = self._server.server_address[1]
        self.url = f"http://{self.host}:{self.port}"
        self.robots.site_url = self.url
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="standin-site", daemon=True)
        self._thread.start()
        return self

    def shutdown(self):
        """Stop serving, drop open keep-alive connections and close the socket."""
        if self._server is None:
            return
        self._server.shutdown()
        with self._conn_lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the client or by a reset fault
        self._server.server_close()
        self._thread.join(timeout=5)
        self._server = None

    def __enter__(self):
        return self.start() if self._server is None else self

    def __exit__(self, *exc):
        self.shutdown()
