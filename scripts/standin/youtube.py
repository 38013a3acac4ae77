"""A local stand-in for www.youtube.com as youtube-transcript-api 1.2 sees it, for tests and demos.

    python -m scripts.standin.youtube --rate 5 --burst 2 [--block-after N --block-s S --block-mode M]

Point the scraper at it with ``SCRAPER_YOUTUBE_URL=http://127.0.0.1:PORT``. It answers the three
requests the library sends for one transcript (read from its source, youtube_transcript_api/_transcripts.py):

- ``GET /watch?v=ID``: a page holding ``"INNERTUBE_API_KEY": "..."``;
- ``POST /youtubei/v1/player?key=KEY`` with ``{"context": ..., "videoId": ID}``: ``playabilityStatus``
  and ``captions.playerCaptionsTracklistRenderer.captionTracks[]`` (``baseUrl``, ``name.runs[0].text``,
  ``languageCode``, ``kind`` "asr" for generated ones, ``isTranslatable``);
- ``GET /api/timedtext?v=ID&lang=LL[&kind=asr]``: ``<transcript><text start dur>..</text></transcript>``,
  its text HTML-escaped inside the XML, served as UTF-8.

Each video has a kind (``KINDS``): the ids the n8n stand-in's templates show have fixed kinds (``CATALOGUE``),
any other id gets one from a hash of it. A blocked phase (``--block-after N --block-s S``, or
``POST /_standin/block``) answers as YouTube does when it blocks an address: a reCAPTCHA page instead of
the watch page (``recaptcha``), the player API's "not a bot" check (``bot``), or 429 to everything (``429``).
Every counted request passes one strict token bucket (``--rate``, ``--burst``); ``GET /_standin/stats``
gives the counts that prove a client polite. ``/robots.txt`` serves YouTube's own rules for ``User-agent: *``
by default (``ROBOTS_TXT``: ``/api/`` and ``/youtubei/``, which the library uses, are disallowed), so a
client that obeys robots.txt fetches no transcript here either; ``--robots none`` answers 404 instead (as
the stand-in did before), and the other ``--robots*`` options of the stand-ins apply. Standard library only.
Binds 127.0.0.1 only.
"""

import argparse
import collections
import hashlib
import html
import json
import signal
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from . import robots as robots_mod

LOOPBACK = "127.0.0.1"
PUBLIC_URL = "https://www.youtube.com"      # what the answers link to; the client redirects it here
API_KEY = "AIzaSyStandinKey_0123456789abcdefghij"
BLOCK_MODES = ("recaptcha", "bot", "429")
# www.youtube.com/robots.txt for every user agent, as served in late 2026 (notes/crawling-anchors.md names
# /api/, /youtubei/, /timedtext_video, /get_video_info and /results among its rules, and its sitemaps)
ROBOTS_TXT = """# robots.txt file for YouTube
User-agent: Mediapartners-Google*
Disallow:

User-agent: *
Disallow: /api/
Disallow: /comment
Disallow: /feeds/videos.xml
Disallow: /file_download
Disallow: /get_video
Disallow: /get_video_info
Disallow: /get_midroll_info
Disallow: /live_chat
Disallow: /login
Disallow: /results
Disallow: /signup
Disallow: /timedtext_video
Disallow: /verify_age
Disallow: /watch_ajax
Disallow: /watch_fragments_ajax
Disallow: /watch_popup
Disallow: /watch_queue_ajax
Disallow: /youtubei/

Sitemap: https://www.youtube.com/sitemaps/sitemap.xml
Sitemap: https://www.youtube.com/product/sitemap.xml
"""

# kind -> caption tracks as (language code, language name, generated)
TRACKS = {
    "manual": [("en", "English", False), ("en", "English (auto-generated)", True)],
    "generated": [("en", "English (auto-generated)", True)],
    "other_language": [("de", "German", False), ("de", "German (auto-generated)", True)],
    "several": [("fr", "French", False), ("en", "English", False), ("es", "Spanish (auto-generated)", True)],
    "no_transcript": [],
}
KINDS = (*TRACKS, "disabled", "unavailable", "age_restricted")
# the videos of the n8n stand-in's corpus (from its data/), one of each kind
CATALOGUE = {
    "AzOgpdn8ngY": "manual",
    "laHIzhsz12E": "generated",
    "PAmgrwYnzWs": "other_language",
    "ROgf5dVqYPQ": "several",
    "07-HZZQs5h0": "no_transcript",
    "KgmNiV7SwkU": "disabled",
    "hxQshcD3e1Y": "unavailable",
    "dEtV7OYuMFQ": "age_restricted",
}
WITH_TRANSCRIPT = tuple(k for k, tracks in TRACKS.items() if tracks)


def kind_of(video_id):
    """The kind of a video: the catalogue's, else one picked by a hash of the id."""
    if video_id in CATALOGUE:
        return CATALOGUE[video_id]
    return KINDS[int(hashlib.sha1(video_id.encode()).hexdigest(), 16) % len(KINDS)]


def segments(video_id, lang, generated):
    """The transcript's (start, duration, text): a few lines that name the video and the track."""
    label = "generated" if generated else "manual"
    return [(2.5 * i, 2.5, f"line {i + 1} of {video_id} ({lang}, {label}) & <more>") for i in range(4)]


def watch_page(video_id):
    """What the library reads from the watch page: the innertube key (the page is HTML-escaped once)."""
    config = html.escape(json.dumps({"INNERTUBE_API_KEY": API_KEY, "VIDEO_ID": video_id}))
    return (f"<!DOCTYPE html><html><head><title>{video_id} - YouTube</title></head><body>"
            f"<script>ytcfg.set({config});</script></body></html>").encode()


RECAPTCHA_PAGE = (b"<!DOCTYPE html><html><body><form id=\"captcha-form\" method=\"post\">"
                  b"<div class=\"g-recaptcha\" data-sitekey=\"standin\"></div></form></body></html>")


def player_answer(video_id, kind):
    """The player API's JSON for one video."""
    if kind == "unavailable":
        return {"playabilityStatus": {"status": "ERROR", "reason": "This video is unavailable"}}
    if kind == "age_restricted":
        return {"playabilityStatus": {"status": "LOGIN_REQUIRED",
                                      "reason": "This video may be inappropriate for some users."}}
    answer = {"playabilityStatus": {"status": "OK", "playableInEmbed": True}, "videoDetails": {"videoId": video_id}}
    if kind == "disabled":
        return answer
    tracks = []
    for lang, name, generated in TRACKS[kind]:
        url = f"{PUBLIC_URL}/api/timedtext?v={video_id}&lang={lang}" + ("&kind=asr" if generated else "")
        track = {"baseUrl": url + "&fmt=srv3", "name": {"runs": [{"text": name}]}, "languageCode": lang,
                 "isTranslatable": True}
        if generated:
            track["kind"] = "asr"
        tracks.append(track)
    answer["captions"] = {"playerCaptionsTracklistRenderer": {
        "captionTracks": tracks,
        "translationLanguages": [{"languageCode": "it", "languageName": {"runs": [{"text": "Italian"}]}}],
    }}
    return answer


def timedtext(video_id, lang, generated):
    body = "".join(
        f'<text start="{start}" dur="{dur}">{html.escape(html.escape(text))}</text>'
        for start, dur, text in segments(video_id, lang, generated)
    )
    return f'<?xml version="1.0" encoding="utf-8" ?><transcript>{body}</transcript>'.encode()


class StandinYouTube:
    """The server and its counters; use start()/shutdown() or `with`."""

    def __init__(self, rate=5.0, burst=2, latency_ms=0.0, block_after=None, block_s=0.0, block_mode="recaptcha",
                 host=LOOPBACK, port=0, robots=None):
        if host != LOOPBACK:
            raise ValueError(f"the stand-in binds {LOOPBACK} only, not {host!r}")
        if rate < 0 or (rate > 0 and burst < 1):
            raise ValueError("rate must be >= 0 and burst >= 1")
        if block_mode not in BLOCK_MODES:
            raise ValueError(f"block mode must be one of {', '.join(BLOCK_MODES)}")
        self.host, self.port = host, port
        self.rate, self.burst, self.latency_s = float(rate), int(burst), latency_ms / 1000.0
        self.block_after, self.block_s, self.block_mode = block_after, float(block_s), block_mode
        self._lock = threading.Lock()
        self._tokens, self._last = float(burst), time.monotonic()
        self._window = collections.deque()
        self.requests, self.http_429, self.blocked, self.max_in_1s = 0, 0, 0, 0
        self.by_route = collections.Counter()
        self.by_video = collections.Counter()
        self.block_until = 0.0
        self.block_started_at = self.block_ended_at = None    # wall-clock times, for the tests' ordering checks
        self.robots = (robots if isinstance(robots, robots_mod.Robots)
                       else robots_mod.Robots(robots or "rules", body=ROBOTS_TXT))
        self._server = self._thread = self.url = None

    def block(self, seconds, mode=None):
        with self._lock:
            self._start_block(seconds, mode or self.block_mode)

    def _start_block(self, seconds, mode):
        self.block_mode = mode
        self.block_until = time.monotonic() + seconds
        self.block_started_at = time.time()
        self.block_ended_at = self.block_started_at + seconds

    def arrive(self, route):
        """Count one request; returns (over the rate limit, blocked now, block mode)."""
        with self._lock:
            now = time.monotonic()
            self.requests += 1
            self.by_route[route] += 1
            while self._window and self._window[0] <= now - 1.0:
                self._window.popleft()
            self._window.append(now)
            self.max_in_1s = max(self.max_in_1s, len(self._window))
            over = False
            if self.rate > 0:
                self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate)
                self._last = now
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                else:
                    over = True
                    self.http_429 += 1
            if self.block_after is not None and self.requests > self.block_after and self.block_started_at is None:
                self._start_block(self.block_s, self.block_mode)
            blocked = not over and now < self.block_until
            if blocked:
                self.blocked += 1
            return over, blocked, self.block_mode

    def stats(self):
        with self._lock:
            return {"requests": self.requests, "http_429": self.http_429, "blocked": self.blocked,
                    "max_in_1s": self.max_in_1s, "by_route": dict(self.by_route), "by_video": dict(self.by_video),
                    "block_started_at": self.block_started_at, "block_ended_at": self.block_ended_at,
                    "rate": self.rate, "burst": self.burst}

    def start(self):
        self._server = _Server((self.host, self.port), _Handler)
        self._server.site = self
        self.port = self._server.server_address[1]
        self.url = f"http://{self.host}:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        daemon=True)
        self._thread.start()
        return self

    def shutdown(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(5)
            self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.shutdown()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self):
        socketserver.TCPServer.server_bind(self)     # no reverse DNS look-up
        self.server_name, self.server_port = self.server_address[:2]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "youtube-standin/1.0"

    def log_message(self, format, *args):
        """Quiet."""

    def _send(self, status, body, ctype):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status, obj):
        self._send(status, json.dumps(obj).encode(), "application/json; charset=UTF-8")

    def do_GET(self):
        """Watch pages, caption tracks and /_standin/stats."""
        split = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(split.query).items()}
        site = self.server.site
        if split.path == "/_standin/stats":
            return self._json(200, site.stats())
        route = {"/watch": "watch", "/api/timedtext": "timedtext", "/robots.txt": "robots"}.get(split.path, "other")
        if not self._admit(route):
            return
        video_id = query.get("v", "")
        if route == "robots":
            what = robots_mod.answer(site.robots)
            if what[0] == "text":
                self._send(200, what[1], "text/plain; charset=utf-8")
            elif what[0] == "status":
                self._send(what[1], what[2], "text/html; charset=utf-8")
            elif what[0] == "reset":
                robots_mod.reset_connection(self)
            else:
                self._send(404, b"Not Found", "text/plain; charset=utf-8")
        elif route == "watch":
            site.by_video[video_id] += 1
            self._send(200, watch_page(video_id), "text/html; charset=utf-8")
        elif route == "timedtext" and kind_of(video_id) in WITH_TRANSCRIPT:
            self._send(200, timedtext(video_id, query.get("lang", "en"), query.get("kind") == "asr"),
                       "text/xml; charset=UTF-8")
        else:
            self._send(404, b"Not Found", "text/plain; charset=utf-8")

    def do_POST(self):
        """The player API, and /_standin/block {"seconds": S, "mode": M}."""
        split = urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        site = self.server.site
        if split.path == "/_standin/block":
            body = json.loads(raw or b"{}")
            mode = body.get("mode", site.block_mode)
            if mode not in BLOCK_MODES:
                return self._json(400, {"error": f"mode must be one of {BLOCK_MODES}"})
            site.block(float(body.get("seconds", 0)), mode)
            return self._json(200, {"blocked_for_s": body.get("seconds", 0), "mode": mode})
        if split.path != "/youtubei/v1/player":
            return self._send(404, b"Not Found", "text/plain; charset=utf-8") if self._admit("other") else None
        if not self._admit("player"):
            return
        query = {k: v[0] for k, v in parse_qs(split.query).items()}
        try:
            video_id = json.loads(raw)["videoId"]
        except (ValueError, KeyError, TypeError):
            return self._json(400, {"error": {"code": 400, "message": "Request contains an invalid argument."}})
        if query.get("key") != API_KEY:
            return self._json(400, {"error": {"code": 400, "message": "API key not valid."}})
        if self._blocked_mode == "bot":
            return self._json(200, {"playabilityStatus": {"status": "LOGIN_REQUIRED",
                                                          "reason": "Sign in to confirm you’re not a bot"}})
        self._json(200, player_answer(video_id, kind_of(video_id)))

    def _admit(self, route):
        """Rate limit, blocked phase and latency; False when the answer was already sent."""
        over, blocked, mode = self.server.site.arrive(route)
        self._blocked_mode = mode if blocked else None
        if over:
            self._send(429, b"Too Many Requests", "text/plain; charset=utf-8")
            return False
        if blocked and mode == "429":
            self._send(429, b"Too Many Requests", "text/plain; charset=utf-8")
            return False
        if blocked and mode == "recaptcha" and route == "watch":
            self._send(200, RECAPTCHA_PAGE, "text/html; charset=utf-8")
            return False
        if self.server.site.latency_s:
            time.sleep(self.server.site.latency_s)
        return True


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scripts.standin.youtube", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default=LOOPBACK, help="must be 127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    parser.add_argument("--rate", type=float, default=5.0, help="token refill per second; 0 = no limit")
    parser.add_argument("--burst", type=int, default=2, help="token bucket capacity")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay before each admitted answer")
    parser.add_argument("--block-after", type=int, help="start the blocked phase after this many requests")
    parser.add_argument("--block-s", type=float, default=0.0, help="how long the blocked phase lasts")
    parser.add_argument("--block-mode", choices=BLOCK_MODES, default="recaptcha")
    robots_mod.add_arguments(parser, default_mode="rules")
    args = parser.parse_args(argv)
    try:
        robots = (robots_mod.from_args(args) if args.robots_body or any(
            getattr(args, f"robots_{k}") not in (None, "") for k in robots_mod.RULE_KEYS)
            else robots_mod.Robots(args.robots, body=ROBOTS_TXT))
        site = StandinYouTube(args.rate, args.burst, args.latency_ms, args.block_after, args.block_s,
                              args.block_mode, args.host, args.port, robots=robots)
        site.start()
    except (ValueError, OSError) as exc:
        parser.error(str(exc))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"youtube standin listening on {site.url}", flush=True)
    while not stop.wait(0.5):
        pass
    site.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
