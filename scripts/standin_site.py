#!/usr/bin/env python3
"""A local stand-in for api.n8n.io and n8n.io, for tests and benchmarks without internet.

One port serves both hosts: the API lives under ``/api`` and the HTML pages under ``/workflows``.
Point the scraper at it with ``SCRAPER_API_URL=http://127.0.0.1:PORT/api`` and
``SCRAPER_SITE_URL=http://127.0.0.1:PORT``.

The corpus is built deterministically from the real data in ``tests/fixtures/n8n``. Every counted
request (anything not under ``/_standin``) goes through one strict token bucket, so the counters in
``/_standin/stats`` are the proof that a client was polite. Faults (5xx, resets, truncated bodies,
slow answers, 404/403) are assigned to template ids from ``--seed`` and listed by ``/_standin/corpus``.
``POST /_standin/library`` changes the library between runs (``{"add": N, "edit": [ids],
"edit_workflow": [ids], "remove": [ids], "restore": [ids], "views": rounds}``).

Standard library only. Binds 127.0.0.1 only.
"""

import argparse
import collections
import hashlib
import html
import json
import math
import random
import re
import signal
import socket
import socketserver
import struct
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "n8n"
LOOPBACK = "127.0.0.1"
MAX_TEMPLATES = 6022
MAX_ROWS = 100
YOUTUBE_CHANNEL = "https://www.youtube.com/@n8n-io"
BLOB_ASSETS = "https://n8niostorageaccount.blob.core.windows.net/n8nio-strapi-blobs-prod/assets/"
DEFAULT_OG_IMAGE = BLOB_ASSETS + "n8n_workflow_template_og.png"

# Hostile answers: each is what a broken or malicious server may send with a 200.
#   deep      valid JSON nested a few hundred thousand levels
#   trickle   the headers, then one byte every --trickle-s seconds, never done
#   bomb      a small gzip body that expands to hundreds of MB
#   badutf8   the template's answer with bytes that are not UTF-8
#   surrogate the template's answer with a lone surrogate escape ("\ud800"): valid JSON, not valid UTF-8
#   huge      the template's answer padded to 60 MB (its Content-Length says so)
#   endless   a chunked body of blanks that never ends
#   wrong     another template's answer
HOSTILE_KINDS = ("deep", "trickle", "bomb", "badutf8", "surrogate", "huge", "endless", "wrong")
# Not in --hostile, as only the client's lease ends it: "stall" trickles its headers, a byte every --trickle-s.
FAULT_KINDS = ("503", "500", "502", "504", "reset", "truncate", "slow", "404", "403", *HOSTILE_KINDS, "stall")
# 404/403 and the hostile kinds are permanent unless a count is given; the rest hit once unless a count is given.
_PERMANENT_BY_DEFAULT = ("404", "403", *HOSTILE_KINDS, "stall")
DEEP_LEVELS = 300_000
BOMB_MB = 256
HUGE_MB = 60
_bomb_lock = threading.Lock()
_bomb = []
_FAULT_RE = re.compile(r"^(%s)(?:x(\d+))?:([0-9]*\.?[0-9]+)$" % "|".join(FAULT_KINDS))

# Used when a template's nodes carry no category at all.
_FALLBACK_CATEGORIES = (
    {"id": 9, "name": "Core Nodes"},
    {"id": 5, "name": "Development"},
    {"id": 4, "name": "Productivity"},
    {"id": 3, "name": "Data & Storage"},
)

# Per-id values are spliced into JSON serialised once per (search item, definition) pair.
_PH_RE = re.compile(rb'"@@STANDIN_([A-Z]+)@@"')
_PH_ID = "@@STANDIN_ID@@"
_PH_NAME = "@@STANDIN_NAME@@"
_PH_IMAGE = "@@STANDIN_IMAGE@@"
_PH_VIEWS = "@@STANDIN_VIEWS@@"
_PH_RECENT = "@@STANDIN_RECENT@@"

_SEARCH_RE = re.compile(r"^/api/templates/search/?$")
_DETAIL_RE = re.compile(r"^/api/templates/workflows/(\d+)/?$")
_IMPORT_RE = re.compile(r"^/api/workflows/templates/(\d+)/?$")
_PAGE_RE = re.compile(r"^/workflows/(\d+)(?:-[^/]*)?/?$")
_CTRL_TEMPLATE_RE = re.compile(r"^/_standin/template/(\d+)/?$")


def _dumps(obj):
    """Compact UTF-8 JSON bytes, like the real API."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _compile(obj):
    """Serialise obj once; return [bytes, key, bytes, key, ..., bytes] split at the placeholders."""
    return _PH_RE.split(_dumps(obj))


def _render(parts, values):
    """Fill a compiled template; values maps placeholder key (bytes) -> JSON bytes."""
    out = list(parts)
    out[1::2] = [values[key] for key in parts[1::2]]
    return b"".join(out)


def parse_faults(spec):
    """Parse ``kind[xN]:fraction,...`` into a list of (kind, times, fraction).

    times is None for "forever" (404/403 without a count, or any kind with x0).
    """
    faults = []
    for chunk in (spec or "").split(","):
        chunk = chunk.strip()
        if not chunk:
            continue
        match = _FAULT_RE.match(chunk)
        if not match:
            raise ValueError(
                f"bad fault {chunk!r}: expected kind[xN]:fraction with kind in {', '.join(FAULT_KINDS)}"
            )
        kind, count, fraction = match.group(1), match.group(2), float(match.group(3))
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"bad fault {chunk!r}: fraction must be within 0..1")
        if count is None:
            times = None if kind in _PERMANENT_BY_DEFAULT else 1
        else:
            times = int(count) or None
        faults.append((kind, times, fraction))
    return faults


def _share(fraction, total):
    """Round fraction*total to the nearest integer, halves up (not banker's rounding)."""
    return int(math.floor(fraction * total + 0.5 + 1e-9))


def plain_text(markdown):
    """Markdown description -> one line of plain text (for meta descriptions)."""
    text = re.sub(r"@\[youtube\]\([^)]*\)", " ", markdown)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[#*_`>]+", "", text)
    return " ".join(text.split())


def _meta_description(markdown, limit=150):
    text = plain_text(markdown)
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return cut[:space] if space > limit // 2 else cut


def _slug_of(url, template_id):
    tail = url.rstrip("/").rsplit("/", 1)[-1]
    prefix = f"{template_id}-"
    return tail[len(prefix):] if tail.startswith(prefix) else ""


class _Corpus:
    """The deterministic template corpus, with JSON answers precompiled per data combination."""

    def __init__(self, data_dir, templates, seed, faults, missing_fraction):
        data_dir = Path(data_dir)
        if not 1 <= templates <= MAX_TEMPLATES:
            raise ValueError(f"templates must be within 1..{MAX_TEMPLATES}, got {templates}")
        if not 0.0 <= missing_fraction <= 1.0:
            raise ValueError("missing_fraction must be within 0..1")
        search_items = json.loads((data_dir / "search_page1_rows100.json").read_text("utf-8"))
        definitions = json.loads((data_dir / "workflow_definitions_20.json").read_text("utf-8"))
        t6270 = json.loads((data_dir / "workflows_templates_6270.json").read_text("utf-8"))
        rows = []
        with open(data_dir / "workflow_urls_6022.jsonl", encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    rows.append(json.loads(line))
        rows.sort(key=lambda row: row["id"])
        self._spare = rows[templates:]      # what /_standin/library adds, in id order
        rows = rows[:templates]

        # The 6270 file is a genuine importable answer: prefer it over the cached copy of 6270.
        workflows = [t6270["workflow"] if d["id"] == t6270["id"] else d["workflow"] for d in definitions]

        self.ids = [row["id"] for row in rows]
        self.slugs = {row["id"]: _slug_of(row["url"], row["id"]) for row in rows}
        self.position = {tid: k for k, tid in enumerate(self.ids)}
        self.names = {}
        self._base_names = [item["name"] for item in search_items]
        for k, tid in enumerate(self.ids):
            self.names[tid] = self._name(k, tid)
        # the library as changed by /_standin/library: removed ids, edit counts, a views round
        self.removed, self.edits, self.views_round = set(), {}, 0

        # Since 20 divides 100, k % 100 fixes k % 20: at most 100 distinct combinations.
        n_combo = min(len(search_items), templates)
        self._base_views = [int(search_items[c].get("totalViews") or 0) for c in range(n_combo)]
        self._search_parts, self._detail_parts, self._import_parts, self._page_info = [], [], [], []
        for c in range(n_combo):
            item = search_items[c]
            wf = workflows[c % len(workflows)]
            self._search_parts.append(_compile(self._search_item(item)))
            self._detail_parts.append(_compile(self._detail(item, wf, c)))
            self._import_parts.append(_compile({"id": _PH_ID, "name": _PH_NAME, "workflow": self._inner(wf)}))
            self._page_info.append(
                {
                    "description": item.get("description") or "",
                    "meta": _meta_description(item.get("description") or ""),
                    "user": item.get("user") or {},
                    "categories": self._categories(item, c),
                    "created": item.get("createdAt") or "",
                }
            )
        self._values = {}
        self._images = {}
        for tid in self.ids:
            self._images[tid] = self._image_list(tid)
            self._values[tid] = self._values_of(tid)

        # One shuffle decides everything: missing ids first, then one slice per fault kind.
        order = list(self.ids)
        random.Random(seed).shuffle(order)
        n_missing = _share(missing_fraction, templates)
        self.missing = set(order[:n_missing])
        pos = n_missing
        self.faults = {}
        for kind, times, fraction in faults:
            n = _share(fraction, templates)
            if pos + n > templates:
                raise ValueError("faults and missing ids add up to more than the whole corpus")
            for tid in order[pos:pos + n]:
                self.faults[tid] = (kind, times)
            pos += n

    def _name(self, k, tid):
        base = self._base_names[k % len(self._base_names)]
        return base if k < len(self._base_names) else f"{base} #{tid}"

    def _values_of(self, tid):
        views = self._base_views[self.combo(tid)] + self.views_round * (tid % 50 + 1)
        return {b"ID": str(tid).encode(), b"NAME": _dumps(self.names[tid]), b"IMAGE": _dumps(self._images[tid]),
                b"VIEWS": str(views).encode(), b"RECENT": str(views // 10).encode()}

    def listed(self):
        """The ids the listing shows, in its order."""
        return [tid for tid in self.ids if tid not in self.removed] if self.removed else self.ids

    def change(self, add=0, edit=(), edit_workflow=(), remove=(), restore=(), views=0):
        """Change the library between runs: add the next `add` templates, edit some visibly (name,
        description, workflow), some only in the workflow JSON, remove or restore some, and move every
        view count on by `views` rounds. Returns the ids added."""
        unknown = [t for t in [*edit, *edit_workflow, *remove, *restore] if t not in self.position]
        if unknown or add < 0 or add > len(self._spare):
            raise ValueError(f"unknown ids {unknown[:5]} or bad add {add} (at most {len(self._spare)})")
        added = []
        for row in self._spare[:add]:
            tid = row["id"]
            self.position[tid] = len(self.ids)
            self.ids.append(tid)
            self.slugs[tid] = _slug_of(row["url"], tid)
            self.names[tid] = self._name(self.position[tid], tid)
            self._images[tid] = self._image_list(tid)
            added.append(tid)
        del self._spare[:add]
        for tid in edit:
            visible, workflow_only = self.edits.get(tid, (0, 0))
            self.edits[tid] = (visible + 1, workflow_only)
            self.names[tid] = f"{self._name(self.position[tid], tid)} (edit {visible + 1})"
        for tid in edit_workflow:
            visible, workflow_only = self.edits.get(tid, (0, 0))
            self.edits[tid] = (visible, workflow_only + 1)
        self.removed = (self.removed | set(remove)) - set(restore)
        self.views_round += views
        for tid in self.ids:
            self._values[tid] = self._values_of(tid)
        return added

    def _edited(self, tid, body, detail):
        """body with tid's edits applied (only edited ids pay for the JSON round trip)."""
        visible, workflow_only = self.edits.get(tid, (0, 0))
        if not visible and not workflow_only:
            return body
        obj = json.loads(body)
        item = obj["workflow"] if detail else obj
        if visible:
            item["description"] = f"{item.get('description') or ''}\n\nEdited {visible} times on the stand-in."
        if detail:
            meta = item["workflow"].setdefault("meta", {})
            meta.update({"standinEdit": visible, "standinRevision": workflow_only})
        return _dumps(obj)

    @staticmethod
    def _search_item(item):
        out = dict(item)
        out["id"] = _PH_ID
        out["name"] = _PH_NAME
        if "totalViews" in out:
            out["totalViews"] = _PH_VIEWS
        return out

    @staticmethod
    def _inner(wf):
        out = dict(wf)
        if "id" in out:
            out["id"] = _PH_ID
        if "name" in out:
            out["name"] = _PH_NAME
        return out

    @staticmethod
    def _categories(item, c):
        seen = {}
        for node in item.get("nodes") or []:
            for cat in node.get("nodeCategories") or []:
                if cat.get("id") is not None and cat["id"] not in seen:
                    seen[cat["id"]] = {"id": cat["id"], "name": cat["name"]}
        cats = list(seen.values())[:3]
        return cats or [dict(_FALLBACK_CATEGORIES[c % len(_FALLBACK_CATEGORIES)])]

    @staticmethod
    def _image_list(tid):
        images = []
        for j in range(tid % 3):
            digest = hashlib.sha1(f"{tid}-{j}".encode()).hexdigest()[:10]
            images.append({"id": tid * 10 + j, "url": f"{BLOB_ASSETS}workflow_{tid}_{j}_{digest}.png"})
        return images

    def _detail(self, item, wf, c):
        nodes = wf.get("nodes") or []
        counts = collections.Counter(node.get("type", "") for node in nodes)
        inner = self._inner(wf)
        for key, empty in (("settings", {}), ("meta", {}), ("tags", []), ("pinData", {})):
            inner.setdefault(key, empty)
        user = item.get("user") or {}
        detail = {
            "id": _PH_ID,
            "name": _PH_NAME,
            "views": _PH_VIEWS,
            "recentViews": _PH_RECENT,
            "totalViews": _PH_VIEWS,
            "createdAt": item.get("createdAt"),
            "description": item.get("description"),
            "lastUpdatedBy": user.get("id"),
            "status": "published",
            "reviewStatus": "approved",
            "readyToDemo": c % 7 == 0,
            "workflowInfo": {
                "nodeCount": len(nodes),
                "nodeTypes": {t: {"count": n} for t, n in sorted(counts.items())},
            },
            "user": user,
            "nodes": item.get("nodes") or [],
            "categories": self._categories(item, c),
            "image": _PH_IMAGE,
            "purchaseUrl": item.get("purchaseUrl"),
        }
        if "price" in item:
            detail["price"] = item["price"]
        detail["workflow"] = inner
        return {"workflow": detail}

    def combo(self, tid):
        """Index of the (search item, definition) pair that template tid is built from."""
        return self.position[tid] % len(self._search_parts)

    def search_item(self, tid):
        """JSON bytes of tid's search item."""
        return self._edited(tid, _render(self._search_parts[self.combo(tid)], self._values[tid]), False)

    def detail(self, tid):
        """JSON bytes of tid's detail answer (no faults)."""
        return self._edited(tid, _render(self._detail_parts[self.combo(tid)], self._values[tid]), True)

    def importable(self, tid):
        """JSON bytes of tid's importable answer {id, name, workflow}."""
        return _render(self._import_parts[self.combo(tid)], self._values[tid])

    def page(self, tid):
        """The HTML page of one template (built per request: it is small and cheap)."""
        info = self._page_info[self.combo(tid)]
        esc = html.escape
        title = f"{self.names[tid]} | n8n workflow template"
        images = self._images[tid]
        image = images[0]["url"] if images else DEFAULT_OG_IMAGE
        user = info["user"]
        paragraphs = "\n".join(
            f"<p>{esc(p.strip())}</p>" for p in re.split(r"\n\s*\n", info["description"]) if p.strip()
        )
        cats = "".join(f"<li>{esc(c['name'])}</li>" for c in info["categories"])
        return (
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{esc(title)}</title>\n"
            f"<meta name=\"description\" content=\"{esc(info['meta'])}\">\n"
            f"<meta property=\"og:title\" content=\"{esc(title)}\">\n"
            f"<meta property=\"og:description\" content=\"{esc(info['meta'])}\">\n"
            f"<meta property=\"og:image\" content=\"{esc(image)}\">\n"
            "<meta property=\"og:type\" content=\"website\">\n"
            "<meta name=\"twitter:card\" content=\"summary_large_image\">\n"
            f"<meta name=\"twitter:title\" content=\"{esc(title)}\">\n"
            f"<meta name=\"twitter:description\" content=\"{esc(info['meta'])}\">\n"
            f"<meta name=\"twitter:image\" content=\"{esc(image)}\">\n"
            "</head>\n<body>\n<header><a href=\"/\">n8n</a> <a href=\"/workflows/\">Templates</a></header>\n"
            f"<main>\n<h1>{esc(self.names[tid])}</h1>\n"
            f"<p class=\"author\">Created by {esc(str(user.get('name') or ''))} "
            f"(@{esc(str(user.get('username') or ''))}) on {esc(info['created'][:10])}</p>\n"
            f"<section class=\"description\">\n{paragraphs}\n</section>\n"
            f"<n8n-demo frame=\"true\" workflow-id=\"{tid}\"></n8n-demo>\n"
            f"<ul class=\"categories\">{cats}</ul>\n</main>\n"
            "<footer><a href=\"https://github.com/n8n-io/n8n\">GitHub</a> "
            f"<a href=\"{YOUTUBE_CHANNEL}\">YouTube</a> "
            "<a href=\"https://community.n8n.io\">Forum</a></footer>\n</body>\n</html>\n"
        ).encode("utf-8")


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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "n8n-standin/1.0"
    timeout = 60  # idle keep-alive connections are dropped after this

    def setup(self):
        super().setup()
        # Headers and body go out in two writes: without NODELAY, Nagle + delayed ACK add ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.site._track(self.connection, add=True)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.site._track(self.connection, add=False)

    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        """Quiet: nothing per request on stderr."""

    def parse_request(self):
        # The arrival is stamped here, right after the request line was read and before any
        # latency sleep, under the site's lock so arrival order and bucket order agree.
        site = self.server.site
        parts = self.raw_requestline.split()
        target = parts[1].decode("latin-1") if len(parts) >= 2 else ""
        path = urlsplit(target).path
        self._counted = not path.startswith("/_standin")
        self._retry_after, self._storm = (site._arrive(_kind_of(path)) if self._counted else (0, False))
        return super().parse_request()

    # -- answers -------------------------------------------------------------------------------

    def _send(self, status, body, ctype="application/json; charset=utf-8", headers=None):
        site = self.server.site
        if self._counted:
            site._count_status(status)
        try:
            self.send_response(status)
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

    def _json(self, status, obj, headers=None):
        self._send(status, _dumps(obj), headers=headers)

    def _error(self, status, message):
        self._json(status, {"status": status, "message": message})

    def _gateway_error(self, status, reason):
        # Gateways (Cloudflare) answer 502/503/504 with a small HTML page, not JSON.
        body = f"<html><head><title>{status} {reason}</title></head><body><h1>{status} {reason}</h1></body></html>"
        self._send(status, body.encode(), ctype="text/html; charset=utf-8")

    def _reset(self):
        """Close the TCP connection without answering, so the client sees a reset (RST)."""
        self.close_connection = True
        sock = self.connection
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.rfile.close()  # drop makefile()'s reference, otherwise close() would not close the fd
        sock.close()

    # -- dispatch ------------------------------------------------------------------------------

    def do_GET(self):  # noqa: N802 - http.server naming
        """Serve every GET (API, pages and control endpoints)."""
        split = urlsplit(self.path)
        if not self._counted:
            self._control_get(split.path)
            return
        if not self._gate():
            return
        self._public_get(split.path, parse_qs(split.query))

    def do_POST(self):  # noqa: N802 - http.server naming
        """Control endpoints /_standin/storm, /_standin/library and /_standin/reset; anything else is 404."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        path = urlsplit(self.path).path.rstrip("/")
        site = self.server.site
        if self._counted:
            if self._gate():
                self._error(404, "Not Found")
            return
        if path == "/_standin/storm":
            try:
                seconds = float(json.loads(raw or b"{}").get("seconds", 0))
            except (ValueError, AttributeError):
                self._error(400, 'body must be JSON {"seconds": S}')
                return
            if not seconds >= 0 or math.isinf(seconds):
                self._error(400, "seconds must be a finite number >= 0")
                return
            site.storm(seconds)
            self._json(200, {"storm_seconds": seconds})
        elif path == "/_standin/library":
            try:
                with site._lock:
                    added = site.corpus.change(**json.loads(raw or b"{}"))
            except (ValueError, TypeError) as e:
                self._error(400, f"bad library change: {e}")
                return
            self._json(200, {"added": added, "listed": len(site.corpus.listed())})
        elif path == "/_standin/reset":
            site.reset()
            self._json(200, {"reset": True})
        else:
            self._error(404, "Not Found")

    def _gate(self):
        """Rate limit, latency and storm for a counted request; True if it may be answered."""
        site = self.server.site
        if self._retry_after:
            self._json(
                429,
                {"status": 429, "message": "Too Many Requests", "retryAfter": self._retry_after},
                headers={"Retry-After": str(self._retry_after)},
            )
            return False
        if site.latency_ms > 0:
            time.sleep(site.latency_ms / 1000.0)
        if self._storm:
            self._gateway_error(503, "Service Unavailable")
            return False
        return True

    def _public_get(self, path, query):
        site = self.server.site
        corpus = site.corpus
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
                self._send(200, corpus.page(tid), ctype="text/html; charset=utf-8")
            else:
                body = b"<!DOCTYPE html><html><head><title>Page not found | n8n</title></head><body><h1>404</h1></body></html>"
                self._send(404, body, ctype="text/html; charset=utf-8")
            return
        if path.rstrip("/") == "/api/health":
            self._json(200, {"status": "OK"})
            return
        self._error(404, "Not Found")

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
        listed = corpus.listed()
        chunk = listed[(page - 1) * rows: page * rows]
        body = b"".join(
            [
                b'{"totalWorkflows":%d,"workflows":[' % len(listed),
                b",".join(corpus.search_item(tid) for tid in chunk),
                b'],"filters":[]}',
            ]
        )
        self._send(200, body)

    def _detail(self, tid):
        site = self.server.site
        fault = site._detail_hit(tid)
        if tid not in site.corpus.position:
            self._error(404, "Workflow not found")
            return
        if fault is None:
            if tid in site.corpus.missing or tid in site.corpus.removed:
                self._error(404, "Workflow not found")
            else:
                self._send(200, site.corpus.detail(tid))
            return
        kind = fault
        site._count_fault(kind)
        if kind == "reset":
            self._reset()
        elif kind == "truncate":
            body = site.corpus.detail(tid)
            self._send(200, body[: len(body) // 2])
        elif kind == "slow":
            time.sleep(site.slow_s)
            self._send(200, site.corpus.detail(tid))
        elif kind in HOSTILE_KINDS or kind == "stall":
            self._hostile(kind, tid)
        elif kind == "500":
            self._error(500, "Internal Server Error")
        elif kind == "404":
            self._error(404, "Workflow not found")
        elif kind == "403":
            self._error(403, "Forbidden")
        else:
            reasons = {"502": "Bad Gateway", "503": "Service Unavailable", "504": "Gateway Timeout"}
            self._gateway_error(int(kind), reasons[kind])

    def _hostile(self, kind, tid):
        site = self.server.site
        body = site.corpus.detail(tid)
        if kind == "deep":
            self._send(200, b'{"id":%d,"workflow":' % tid + b"[" * DEEP_LEVELS + b"]" * DEEP_LEVELS + b"}")
        elif kind == "badutf8":
            self._send(200, body.replace(b'"name":"', b'"name":"\xff\xfe\xc3', 1))
        elif kind == "surrogate":
            self._send(200, body.replace(b'"name":"', b'"name":"\\ud800', 1))
        elif kind == "wrong":
            ids = site.corpus.ids
            other = ids[(site.corpus.position[tid] + 1) % len(ids)]
            self._send(200, site.corpus.detail(other) if other != tid else b'{"id":0}')
        elif kind == "bomb":
            self._send(200, _bomb_body(), headers={"Content-Encoding": "gzip"})
        else:
            self._stream(kind, body)

    def _stream(self, kind, body):
        """trickle, huge, endless and stall: written piece by piece until done or the client goes away."""
        site = self.server.site
        site._count_status(200)
        self.close_connection = True
        try:
            if kind == "stall":
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Pad: ")
                while True:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(site.trickle_s)
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            if kind == "endless":
                self.send_header("Transfer-Encoding", "chunked")
            elif kind == "huge":
                self.send_header("Content-Length", str(HUGE_MB * 2**20))
            else:
                self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            if kind == "trickle":
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(site.trickle_s)
            elif kind == "huge":
                blank = b" " * 2**20
                self.wfile.write(body)
                left = HUGE_MB * 2**20 - len(body)
                while left > 0:
                    self.wfile.write(blank[:left])
                    left -= len(blank)
            else:
                chunk = b"%x\r\n%s\r\n" % (2**16, b" " * 2**16)
                while True:
                    self.wfile.write(chunk)
        except (ConnectionError, TimeoutError, OSError):
            pass

    def _control_get(self, path):
        site = self.server.site
        path = path.rstrip("/")
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


def _bomb_body():
    """gzip of BOMB_MB MB of blanks (about 250 KB), made once."""
    with _bomb_lock:
        if not _bomb:
            z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            blank = b" " * 2**20
            _bomb.append(b"".join([*(z.compress(blank) for _ in range(BOMB_MB)), z.flush()]))
        return _bomb[0]


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
    return "other"


class StandinSite:
    """The stand-in site: build the corpus, then ``start()`` to serve it on 127.0.0.1.

    Usage::

        site = StandinSite(templates=200, rate=20, burst=5).start()
        requests.get(site.url + "/api/templates/search?page=1&rows=100")
        site.stats(); site.shutdown()
    """

    def __init__(
        self,
        templates=200,
        rate=20.0,
        burst=5,
        latency_ms=0,
        faults="",
        seed=1,
        slow_s=3.0,
        trickle_s=1.0,
        missing_fraction=0.0,
        host=LOOPBACK,
        port=0,
        data_dir=None,
    ):
        if host != LOOPBACK:
            raise ValueError(f"the stand-in binds {LOOPBACK} only, not {host!r}")
        if rate < 0:
            raise ValueError("rate must be >= 0 (0 disables the limit)")
        if rate > 0 and burst < 1:
            raise ValueError("burst must be >= 1 when the rate limit is on")
        if latency_ms < 0 or slow_s < 0:
            raise ValueError("latency_ms and slow_s must be >= 0")
        self.host, self.port = host, int(port)
        self.rate, self.burst = float(rate), int(burst)
        self.latency_ms, self.slow_s, self.seed = float(latency_ms), float(slow_s), seed
        self.trickle_s = float(trickle_s)
        self.fault_spec = parse_faults(faults) if isinstance(faults, str) else list(faults)
        self.corpus = _Corpus(data_dir or DEFAULT_DATA_DIR, int(templates), seed, self.fault_spec,
                              float(missing_fraction))
        self._lock = threading.Lock()
        self._conn_lock = threading.Lock()
        self._conns = set()
        self._server = None
        self._thread = None
        self.url = None
        self._zero()

    # -- counters (always called with or under self._lock) ------------------------------------

    def _zero(self):
        self._requests = 0
        self._http_429 = 0
        self._max_in_1s = 0
        self._window = collections.deque()
        self._by_status = {}
        self._by_kind = {"search": 0, "detail": 0, "importable": 0, "page": 0}
        self._detail_requests = {}
        self._faults_served = {kind: 0 for kind, _, _ in self.fault_spec}
        self._tokens = float(self.burst)
        self._last = time.monotonic()
        self._storm_until = 0.0

    def _arrive(self, kind):
        """Count one arrival; return (retry_after seconds or 0 if admitted, storm active)."""
        with self._lock:
            now = time.monotonic()
            self._requests += 1
            self._by_kind[kind] = self._by_kind.get(kind, 0) + 1
            window = self._window
            while window and window[0] <= now - 1.0:
                window.popleft()
            window.append(now)
            self._max_in_1s = max(self._max_in_1s, len(window))
            retry_after = 0
            if self.rate > 0:
                self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate)
                self._last = now
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                else:
                    retry_after = max(1, math.ceil((1.0 - self._tokens) / self.rate))
                    self._http_429 += 1
            return retry_after, now < self._storm_until

    def _count_status(self, status):
        with self._lock:
            key = str(status)
            self._by_status[key] = self._by_status.get(key, 0) + 1

    def _count_fault(self, kind):
        with self._lock:
            self._faults_served[kind] = self._faults_served.get(kind, 0) + 1

    def _detail_hit(self, tid):
        """Count a detail request that got past limit and storm; return the fault kind to serve or None."""
        with self._lock:
            key = str(tid)
            n = self._detail_requests.get(key, 0) + 1
            self._detail_requests[key] = n
        fault = self.corpus.faults.get(tid)
        if fault is None:
            return None
        kind, times = fault
        return kind if times is None or n <= times else None

    def _track(self, conn, add):
        with self._conn_lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    # -- public ---------------------------------------------------------------------------------

    def is_live(self, tid):
        """True if tid is in the corpus and not one of the listed-but-gone (missing) ids."""
        return tid in self.corpus.position and tid not in self.corpus.missing and tid not in self.corpus.removed

    def storm(self, seconds):
        """Answer every counted request with 503 for the next ``seconds`` seconds."""
        with self._lock:
            self._storm_until = time.monotonic() + float(seconds)

    def reset(self):
        """Zero every counter; also refill the bucket, end any storm and restart the xN faults."""
        with self._lock:
            self._zero()

    def stats(self):
        """A snapshot of the counters (the same dict /_standin/stats serves)."""
        with self._lock:
            return {
                "requests": self._requests,
                "http_429": self._http_429,
                "max_in_1s": self._max_in_1s,
                "by_status": dict(self._by_status),
                "by_kind": dict(self._by_kind),
                "detail_requests": dict(self._detail_requests),
                "faults_served": dict(self._faults_served),
                "rate": self.rate,
                "burst": self.burst,
                "templates": len(self.corpus.ids),
                "latency_ms": self.latency_ms,
                "storm_remaining_s": max(0.0, self._storm_until - time.monotonic()),
            }

    def corpus_info(self):
        """Which ids exist, which are missing and which carry which fault (for tests)."""
        corpus = self.corpus
        return {
            "ids": list(corpus.ids),
            "missing": sorted(corpus.missing),
            "removed": sorted(corpus.removed),
            "faults": {str(tid): {"kind": kind, "times": times} for tid, (kind, times) in sorted(corpus.faults.items())},
            "slugs": {str(tid): slug for tid, slug in corpus.slugs.items()},
            "seed": self.seed,
        }

    def start(self):
        """Bind and serve in a daemon thread; returns self (``.url`` is then set)."""
        if self._server is not None:
            raise RuntimeError("already started")
        self._server = _Server((self.host, self.port), _Handler)
        self._server.site = self
        self.port = self._server.server_address[1]
        self.url = f"http://{self.host}:{self.port}"
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


def _build_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default=LOOPBACK, help="must be 127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    parser.add_argument("--templates", type=int, default=200, help=f"corpus size, 1..{MAX_TEMPLATES}")
    parser.add_argument("--rate", type=float, default=20.0, help="token refill per second; 0 = no limit")
    parser.add_argument("--burst", type=int, default=5, help="token bucket capacity")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay before each admitted answer")
    parser.add_argument("--faults", default="", help="e.g. 503:0.03,500x2:0.02,reset:0.01,404:0.01")
    parser.add_argument("--seed", type=int, default=1, help="decides missing ids and fault ids")
    parser.add_argument("--slow-s", type=float, default=3.0, help="delay of the 'slow' fault")
    parser.add_argument("--trickle-s", type=float, default=1.0, help="pause between bytes of the 'trickle' fault")
    parser.add_argument("--hostile", type=float, default=0.0,
                        help=f"hostile mode: this share of ids for each of {', '.join(HOSTILE_KINDS)}")
    parser.add_argument("--missing-fraction", type=float, default=0.0,
                        help="share of ids listed by search but 404 on detail")
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR), help=argparse.SUPPRESS)
    return parser


def _with_hostile(faults, fraction):
    """--faults plus each hostile kind at `fraction` (the --hostile mode)."""
    if not fraction:
        return faults
    extra = ",".join(f"{kind}:{fraction:g}" for kind in HOSTILE_KINDS)
    return f"{faults},{extra}" if faults else extra


def main(argv=None):
    """Command-line entry point: serve until SIGTERM/SIGINT, then exit 0."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.host != LOOPBACK:
        parser.error(f"--host must be {LOOPBACK}: the stand-in never listens on other interfaces")
    try:
        site = StandinSite(
            templates=args.templates, rate=args.rate, burst=args.burst, latency_ms=args.latency_ms,
            faults=_with_hostile(args.faults, args.hostile), seed=args.seed, slow_s=args.slow_s,
            trickle_s=args.trickle_s,
            missing_fraction=args.missing_fraction, host=args.host, port=args.port, data_dir=args.data_dir,
        )
    except (ValueError, OSError) as exc:
        parser.error(str(exc))
    stop = threading.Event()

    def _on_signal(signum, frame):
        stop.set()  # only a flag: the main loop below does the shutdown

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        site.start()
    except OSError as exc:  # e.g. the port is taken
        parser.error(f"cannot listen on {args.host}:{args.port}: {exc}")
    print(f"standin listening on {site.url}", flush=True)
    while not stop.wait(0.5):
        pass
    site.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
