"""A local stand-in for a second kind of site: a city's events calendar, found through its sitemaps.

    python -m scripts.standin.catalogue --host 127.0.0.2 --port 0 --events 60 --seed 1 [--rate 5 --burst 3]
        [--robots rules --robots-crawl-delay 1] [--latency-ms 20 --slow-phase-s 5 --slow-phase-factor 10]

It prints ``catalogue standin listening on http://127.0.0.2:PORT`` and serves until SIGTERM/SIGINT (exit 0):

- ``/robots.txt``: modes as ``robots`` says; the default, ``rules``, allows all and names the sitemap;
- ``/sitemap.xml``: a sitemap index of ``/sitemaps/events-1.xml.gz``, ``events-2.xml.gz`` and
  ``pages.xml.gz`` (gzip files served as ``application/gzip``, no Content-Encoding), every URL with lastmod;
- ``/events/<slug>-<id>``: a page with a schema.org Event in JSON-LD and OpenGraph tags; about a fifth of the
  events name their organizer only in the HTML (``<p class="organizer">``);
- ``/live/<slug>-<id>`` (about a quarter): an empty ``<div id="app">`` and a script that fetches
  ``/api/live/<id>.json`` and then builds the JSON-LD and the DOM;
- ``/``, ``/about``, ``/contact``, ``/tags/<tag>``: pages that are not events.

Validators (``--validators MODE``, ``scripts/standin/validators.py``; default ``strong``) on robots.txt, the
sitemaps and the pages, a 304 to a matching conditional request; sitemap dates (``--lastmod``): ``true`` (an
edit moves its page's date), ``frozen`` (a generator that never updates them: edits keep their date), ``build``
(every date is the time of the request, as a generator stamping its build date).

Control routes (not counted, not limited): ``GET /_standin/stats`` (counters: requests, robots, sitemap,
http_429, by_kind, by_path, by_status, max_in_1s), ``GET /_standin/truth`` (the expected record of every
event), ``POST /_standin/catalogue {"add": N, "edit": [ids], "remove": [ids]}``, ``POST /_standin/reset``,
and the shared ``/_standin/robots``, ``/_standin/slow``, ``/_standin/requests`` (``control``). The rate
limit (``--rate R --burst B``, off by default) is one strict token bucket per client address, answering
429 with Retry-After. Standard library only; binds 127.0.0.1 or 127.0.0.2 only.
"""

import argparse
import collections
import datetime as dt
import json
import math
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from . import catalogue_pages as pages
from . import robots as robots_mod
from . import timeline as timeline_mod
from .catalogue_data import Catalogue
from .control import SharedControl, read_json
from .server import _Server
from .validators import MODES, Validators

HOSTS = ("127.0.0.2", "127.0.0.1")
LASTMODS = ("true", "frozen", "build")
_EVENT_RE = re.compile(r"^/(events|live)/([a-z0-9-]+)-(\d+)$")
_LIVE_JSON_RE = re.compile(r"^/api/live/(\d+)\.json$")
_CHILD_RE = re.compile(r"^/sitemaps/(events-1|events-2|pages)\.xml\.gz$")


def kind_of(path):
    """The kind of a counted path (the keys of ``by_kind``)."""
    if path == "/robots.txt":
        return "robots"
    if path == "/sitemap.xml":
        return "sitemap_index"
    if _CHILD_RE.match(path):
        return "sitemap"
    match = _EVENT_RE.match(path)
    if match:
        return "event" if match.group(1) == "events" else "live_page"
    if _LIVE_JSON_RE.match(path):
        return "live_json"
    if pages.other_page(path, []) is not None:
        return "page"
    return "other"


class CatalogueSite:
    """The catalogue, its counters, per-client token buckets, robots.txt and timeline; ``start()`` serves."""

    def __init__(self, events=60, seed=1, rate=0.0, burst=5, latency_ms=0.0, robots=None, host=HOSTS[0], port=0,
                 validators="strong", lastmod="true"):
        if host not in HOSTS:
            raise ValueError(f"the catalogue binds {' or '.join(HOSTS)} only, not {host!r}")
        if rate < 0 or (rate > 0 and burst < 1):
            raise ValueError("rate must be >= 0 and burst >= 1")
        self.host, self.port = host, int(port)
        self.rate, self.burst, self.latency_ms = float(rate), int(burst), float(latency_ms)
        self.catalogue = Catalogue(events, seed)
        if lastmod not in LASTMODS:
            raise ValueError(f"lastmod must be one of {', '.join(LASTMODS)}")
        self.catalogue.lastmod_mode = lastmod
        self.validators = Validators(validators)
        self.robots = (robots if isinstance(robots, robots_mod.Robots)
                       else robots_mod.Robots(robots or "rules", defaults={"sitemap": "/sitemap.xml"}))
        self.timeline = timeline_mod.Timeline(self.latency_ms)
        self._lock = threading.Lock()
        self._server = self._thread = self.url = None
        self._zero()

    def _zero(self):
        self._bytes_sent = 0
        self._requests, self._http_429, self._max_in_1s = 0, 0, 0
        self._window = collections.deque()
        self._by_kind, self._by_path, self._by_status, self._by_address = (collections.Counter() for _ in range(4))
        self._buckets = {}  # client address -> [tokens, last]

    def arrive(self, client, path):
        """Count one request; return (retry_after or 0 if admitted, latency in seconds)."""
        kind = kind_of(path)
        with self._lock:
            now = time.monotonic()
            self._requests += 1
            self._by_kind[kind] += 1
            self._by_path[path] += 1
            self._by_address[client] += 1      # the source address: a proxy's outgoing one, or 127.0.0.1
            while self._window and self._window[0] <= now - 1.0:
                self._window.popleft()
            self._window.append(now)
            self._max_in_1s = max(self._max_in_1s, len(self._window))
            retry_after = 0
            if self.rate > 0:
                tokens, last = self._buckets.get(client, (float(self.burst), now))
                tokens = min(float(self.burst), tokens + (now - last) * self.rate)
                if tokens >= 1.0:
                    tokens -= 1.0
                else:
                    retry_after = max(1, math.ceil((1.0 - tokens) / self.rate))
                    self._http_429 += 1
                self._buckets[client] = (tokens, now)
            at = self.timeline.record(kind, rejected=bool(retry_after), at=now - self.timeline.t0)
        return retry_after, self.timeline.latency_s(at)

    def count_status(self, status, size=0):
        with self._lock:
            self._by_status[str(status)] += 1
            self._bytes_sent += size

    def reset(self):
        """Zero the counters and the request log, refill the buckets (slow phases go on)."""
        with self._lock:
            self._zero()
        self.timeline.clear()

    def stats(self):
        with self._lock:
            return {
                "requests": self._requests, "robots": self._by_kind["robots"],
                "sitemap": self._by_kind["sitemap_index"], "http_429": self._http_429,
                "max_in_1s": self._max_in_1s, "by_kind": dict(self._by_kind), "by_path": dict(self._by_path),
                "by_address": dict(self._by_address),
                "by_status": dict(self._by_status), "rate": self.rate, "burst": self.burst,
                "events": len(self.catalogue.live()), "latency_ms": self.latency_ms,
                "robots_mode": self.robots.mode, "slow_phases": self.timeline.phases(),
                "bytes_sent": self._bytes_sent, "validators": self.validators.stats(),
            }

    def truth(self):
        return self.catalogue.truth(self.url)

    def start(self):
        self._server = _Server((self.host, self.port), _Handler)
        self._server.site = self
        self.port = self._server.server_address[1]
        self.url = self.robots.site_url = f"http://{self.host}:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="standin-catalogue", daemon=True)
        self._thread.start()
        return self

    def shutdown(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(5)
            self._server = None

    def __enter__(self):
        return self.start() if self._server is None else self

    def __exit__(self, *exc):
        self.shutdown()


class _Handler(SharedControl, BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "catalogue-standin/1.0"
    timeout = 60

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format, *args):
        """Quiet."""

    def _send(self, status, body, ctype="text/html; charset=utf-8", headers=None, counted=True):
        if counted:
            self.server.site.count_status(status, len(body))
        try:
            self.send_response(status)
            if status != 304:   # a 304 has no content, so neither its type nor its length
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)
        except (ConnectionError, TimeoutError):
            self.close_connection = True

    def _validated(self, body, kind, ctype="text/html; charset=utf-8"):
        """A 200 with the validators of the site's mode, or a 304 to a request whose validators match."""
        status, headers = self.server.site.validators.answer(self.headers, body, kind, path=self.path)
        self._send(status, b"" if status == 304 else body, ctype, headers)

    def _json(self, status, obj):
        self._send(status, json.dumps(obj, ensure_ascii=False).encode(), "application/json; charset=utf-8",
                   counted=False)

    def _error(self, status, message):
        self._json(status, {"status": status, "message": message})

    def _admit(self, path):
        """Count, rate-limit and delay one public request; False when the 429 was already sent."""
        retry_after, latency_s = self.server.site.arrive(self.client_address[0], path)
        if retry_after:
            self._send(429, b"Too Many Requests\n", "text/plain; charset=utf-8",
                       headers={"Retry-After": str(retry_after)})
            return False
        if latency_s > 0:
            time.sleep(latency_s)
        return True

    def do_GET(self):
        """Public pages, sitemaps and robots.txt; GET control routes."""
        split = urlsplit(self.path)
        path = split.path
        if path.startswith("/_standin"):
            self._control_get(path.rstrip("/"), split.query)
        elif self._admit(path):
            self._public(path)

    def do_POST(self):
        """Control routes; any public POST is a 404."""
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = urlsplit(self.path).path.rstrip("/")
        if not path.startswith("/_standin"):
            if self._admit(path):
                self._send(404, pages.NOT_FOUND)
            return
        if self._shared_post(path, raw):
            return
        site = self.server.site
        if path == "/_standin/catalogue":
            try:
                added = site.catalogue.change(**read_json(raw))
            except (ValueError, TypeError) as exc:
                self._error(400, f"bad catalogue change: {exc}")
                return
            self._json(200, {"added": added, "events": len(site.catalogue.live())})
        elif path == "/_standin/reset":
            site.reset()
            self._json(200, {"reset": True})
        else:
            self._error(404, "Not Found")

    def _control_get(self, path, query):
        site = self.server.site
        if self._shared_get(path, query):
            return
        if path == "/_standin/stats":
            self._json(200, site.stats())
        elif path == "/_standin/truth":
            self._json(200, site.truth())
        else:
            self._error(404, "Not Found")

    def _public(self, path):
        site = self.server.site
        url, catalogue = site.url, site.catalogue
        if path == "/robots.txt":
            what = robots_mod.answer(site.robots)
            if what[0] == "text":
                self._validated(what[1], "robots", "text/plain; charset=utf-8")
            elif what[0] == "status":
                self._send(what[1], what[2])
            elif what[0] == "reset":
                robots_mod.reset_connection(self)
            else:
                self._send(404, pages.NOT_FOUND)
            return
        build = catalogue.lastmod_mode == "build"
        # each read of the index is a new build: its date, a second later than the last one at least
        stamp = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(
            seconds=site.stats()["by_kind"].get("sitemap_index", 0))
        if path == "/sitemap.xml":
            lastmods = {name: catalogue.chunk(int(name[-1]))[1] for name in pages.CHILD_SITEMAPS[:2]}
            lastmods["pages"] = pages.pages_entries(url)[0][1]
            if build:
                lastmods = dict.fromkeys(lastmods, stamp)
            self._validated(pages.sitemap_index(url, lastmods), "sitemap_index", "application/xml; charset=utf-8")
            return
        match = _CHILD_RE.match(path)
        if match:
            name = match.group(1)
            entries = (pages.pages_entries(url) if name == "pages"
                       else [(url + e.path, e.lastmod) for e in catalogue.chunk(int(name[-1]))[0]])
            if build:
                entries = [(u, stamp) for u, _ in entries]
            self._validated(pages.urlset(entries), "sitemap", "application/gzip")
            return
        match = _EVENT_RE.match(path)
        if match:
            event = catalogue.get(int(match.group(3)))
            if event is None or event.path != path:
                self._send(404, pages.NOT_FOUND)
            elif event.script:
                self._validated(pages.live_page(event, url), "live_page")
            else:
                self._validated(pages.event_page(event, url), "event")
            return
        match = _LIVE_JSON_RE.match(path)
        if match:
            event = catalogue.get(int(match.group(1)))
            if event is None or not event.script:
                self._send(404, b'{"error":"not found"}', "application/json")
            else:
                self._send(200, pages.live_json(event, url), "application/json; charset=utf-8")
            return
        body = pages.other_page(path, catalogue.live())
        self._send(200 if body else 404, body or pages.NOT_FOUND)


def main(argv=None):
    """Command-line entry point: serve until SIGTERM/SIGINT, then exit 0."""
    parser = argparse.ArgumentParser(prog="python -m scripts.standin.catalogue",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default=HOSTS[0], help="127.0.0.2 (default) or 127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    parser.add_argument("--events", type=int, default=60, help="how many events at start")
    parser.add_argument("--seed", type=int, default=1, help="decides every event")
    parser.add_argument("--rate", type=float, default=0.0, help="token refill per second per client; 0 = no limit")
    parser.add_argument("--burst", type=int, default=5, help="token bucket capacity")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay before each admitted answer")
    parser.add_argument("--validators", default="strong", choices=MODES, help="ETag/Last-Modified and 304s")
    parser.add_argument("--lastmod", default="true", choices=LASTMODS, help="how the sitemaps date the pages")
    robots_mod.add_arguments(parser, default_mode="rules")
    timeline_mod.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        site = CatalogueSite(args.events, args.seed, args.rate, args.burst, args.latency_ms,
                             robots_mod.from_args(args, defaults={"sitemap": "/sitemap.xml"}), args.host, args.port,
                             args.validators, args.lastmod)
        if args.slow_phase_s > 0:
            site.timeline.slow(args.slow_phase_factor, args.slow_phase_s, args.slow_phase_after_s)
        site.start()
    except (ValueError, TypeError, OSError) as exc:
        parser.error(str(exc))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"catalogue standin listening on {site.url}", flush=True)
    while not stop.wait(0.5):
        pass
    site.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
