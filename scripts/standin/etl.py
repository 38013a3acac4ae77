"""An ETL API stand-in: the run-reporting API of the system scraper grew from, in either field spelling.

    python -m scripts.standin.etl [--spelling camel|snake] [--key SECRET]

It prints ``etl listening on http://127.0.0.1:PORT`` and serves until SIGTERM/SIGINT (exit 0). A run object
is ``{_id, domain, status, createdAt, startedAt, finishedAt, totalCount, finishedCount, failedCount,
invalidCount}`` (camel) or ``{id, ..., created_at, started_at, ...}`` (snake); status is running or finished.

- ``POST /runs {"domain", "started_at", "items": [{"id", "url"}]}`` creates a run (201); an
  ``Idempotency-Key`` seen before answers the run it made, and makes none;
- ``POST /runs/<id>/items {"items": [{"id", "url", "status": done|failed|invalid, "failedReason"}]}``: a
  batch of item updates (an item not in the run is added);
- ``POST /runs/<id>/finalize {"started_at", "finished_at", "total_count", "finished_count", "failed_count",
  "invalid_count"}`` finishes it (again: the same answer);
- ``GET /runs?domain=D&status=S&limit=N&offset=M``: ``{"runs": [...], "total": n}``, newest first;
- ``GET /runs/latest?domain=D``: the newest run of the domain (404 without one); ``GET /runs/<id>``.

With ``--key`` every request needs ``Authorization: Bearer KEY`` (else 401). Control routes:
``GET /_standin/etl`` (every run with its items, the counters, and whether a key was ever sent wrong),
``POST /_standin/etl {"spelling", "fail": N, "slow": N, "slow_s": S, "hostile": N, "only": "POST /runs"}``:
the next N API requests (those starting with ``only``, when given) answer 500, are done but answered only
after ``slow_s`` (a client's timeout), or answer 200 with a body that is no run. Standard library only;
binds 127.0.0.1 only.
"""

import datetime
import sys
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from .control import read_json
from .service import JsonService, answer, body_of, serve_main

SPELLINGS = {
    "camel": {"id": "_id", "created": "createdAt", "started": "startedAt", "finished": "finishedAt",
              "total": "totalCount", "done": "finishedCount", "failed": "failedCount", "invalid": "invalidCount"},
    "snake": {"id": "id", "created": "created_at", "started": "started_at", "finished": "finished_at",
              "total": "total_count", "done": "finished_count", "failed": "failed_count",
              "invalid": "invalid_count"},
}
ITEM_STATUSES = ("done", "failed", "invalid")


def _now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self._route("GET", b"")

    def do_POST(self):
        self._route("POST", body_of(self))

    def _route(self, method, raw):
        site = self.server.site
        parts = urlsplit(self.path)
        if parts.path == "/_standin/etl":
            try:
                answer(self, 200, site.snapshot() if method == "GET" else site.control(**read_json(raw)))
            except (ValueError, TypeError) as exc:
                answer(self, 400, {"error": str(exc)})
            return
        if site.key and self.headers.get("authorization") != f"Bearer {site.key}":
            site.count("unauthorized")
            answer(self, 401, {"error": "unauthorized"})
            return
        fault = site.take_fault(f"{method} {parts.path}")
        if fault == "fail":
            answer(self, 500, {"error": "internal error (stand-in fault)"})
            return
        if fault == "hostile":
            answer(self, 200, ["not", "a", "run"])
            return
        try:
            status, obj = site.handle(method, parts.path, parse_qs(parts.query),
                                      read_json(raw) if method == "POST" else {},
                                      self.headers.get("idempotency-key"))
        except (ValueError, TypeError, KeyError) as exc:
            status, obj = 400, {"error": f"bad request: {exc}"}
        if fault == "slow":     # done, but answered after the client gave up
            site.stopping.wait(site.slow_s)
            self.close_connection = True
            return
        answer(self, status, obj)


class EtlApi(JsonService):
    """The runs, their items and counters; ``handle`` is the API, ``control`` steers it."""

    handler = _Handler
    name = "etl"

    def __init__(self, spelling="camel", key=None, **kw):
        super().__init__(**kw)
        self.key = key
        self.runs = {}              # id -> run (internal names) with "items": {item id: {url, status, reason}}
        self.keys = {}              # idempotency key -> run id
        self.counters = {"creates": 0, "replays": 0, "item_posts": 0, "item_updates": 0, "finalizes": 0,
                         "unauthorized": 0, "requests": 0}
        self.faults = {"fail": 0, "slow": 0, "hostile": 0}
        self.slow_s = 2.0
        self.only = ""
        self.control(spelling=spelling)

    def control(self, spelling=None, fail=0, slow=0, slow_s=None, hostile=0, only=""):
        with self.lock:
            if spelling is not None:
                if spelling not in SPELLINGS:
                    raise ValueError(f"spelling is one of {', '.join(SPELLINGS)}")
                self.spelling = spelling
            for name, n in (("fail", fail), ("slow", slow), ("hostile", hostile)):
                self.faults[name] += int(n)
            if slow_s is not None:
                self.slow_s = float(slow_s)
            self.only = str(only)
            return {"spelling": self.spelling, "faults": dict(self.faults)}

    def take_fault(self, request):
        with self.lock:
            self.counters["requests"] += 1
            if not request.startswith(self.only):
                return None
            for name in ("fail", "slow", "hostile"):
                if self.faults[name] > 0:
                    self.faults[name] -= 1
                    return name
        return None

    def count(self, name):
        with self.lock:
            self.counters[name] += 1

    def shown(self, run, items=False):
        """A run as the API answers it, in the current spelling."""
        names = SPELLINGS[self.spelling]
        out = {names["id"]: run["id"], "domain": run["domain"], "status": run["status"],
               names["created"]: run["created"], names["started"]: run["started"],
               names["finished"]: run["finished"], names["total"]: len(run["items"])}
        for k in ("done", "failed", "invalid"):
            out[names[k]] = run["counts"].get(k)
        if items:
            out["items"] = [{"id": i, **v} for i, v in run["items"].items()]
        return out

    def handle(self, method, path, query, body, idempotency_key):
        """(status, answer) of one API request."""
        segments = [s for s in path.split("/") if s]
        with self.lock:
            if segments == ["runs"] and method == "POST":
                return self._create(body, idempotency_key)
            if segments == ["runs"]:
                return 200, self._list(query)
            if segments == ["runs", "latest"]:
                domain = query.get("domain", [""])[0]
                found = [r for r in self.runs.values() if r["domain"] == domain]
                return (200, self.shown(found[-1])) if found else (404, {"error": f"no run of {domain}"})
            if len(segments) >= 2 and segments[0] == "runs":
                run = self.runs.get(segments[1])
                if run is None:
                    return 404, {"error": "no such run"}
                if len(segments) == 2:
                    return 200, self.shown(run, items=True)
                if segments[2:] == ["items"] and method == "POST":
                    return 200, self._items(run, body["items"])
                if segments[2:] == ["finalize"] and method == "POST":
                    return 200, self._finalize(run, body)
        return 404, {"error": "not found"}

    def _create(self, body, key):
        if key and key in self.keys:
            self.counters["replays"] += 1
            return 200, self.shown(self.runs[self.keys[key]])
        if not isinstance(body.get("domain"), str) or not isinstance(body.get("items"), list):
            raise ValueError("a run needs a domain and a list of items")
        run_id = f"r{len(self.runs) + 1:04d}"
        self.runs[run_id] = {"id": run_id, "domain": body["domain"], "status": "running", "created": _now_iso(),
                             "started": body.get("started_at"), "finished": None, "counts": {},
                             "items": {str(i["id"]): {"url": i.get("url"), "status": "pending", "reason": None}
                                       for i in body["items"]}}
        if key:
            self.keys[key] = run_id
        self.counters["creates"] += 1
        return 201, self.shown(self.runs[run_id])

    def _items(self, run, updates):
        self.counters["item_posts"] += 1
        for u in updates:
            if u["status"] not in ITEM_STATUSES:
                raise ValueError(f"an item's status is one of {', '.join(ITEM_STATUSES)}")
            item = run["items"].setdefault(str(u["id"]), {"url": u.get("url"), "status": "pending", "reason": None})
            item["status"], item["reason"] = u["status"], u.get("failedReason")
            self.counters["item_updates"] += 1
        return {"updated": len(updates)}

    def _finalize(self, run, body):
        self.counters["finalizes"] += 1
        run["status"], run["finished"], run["started"] = "finished", body.get("finished_at"), body.get("started_at")
        run["counts"] = {"done": body.get("finished_count"), "failed": body.get("failed_count"),
                         "invalid": body.get("invalid_count"), "total": body.get("total_count")}
        return self.shown(run)

    def _list(self, query):
        runs = [r for r in reversed(self.runs.values())
                if r["domain"] == query.get("domain", [r["domain"]])[0]
                and r["status"] == query.get("status", [r["status"]])[0]]
        offset, limit = int(query.get("offset", ["0"])[0]), int(query.get("limit", ["50"])[0])
        return {"runs": [self.shown(r) for r in runs[offset:offset + limit]], "total": len(runs)}

    def snapshot(self):
        """Every run with its items (internal names), the counters and the faults left."""
        with self.lock:
            return {"runs": [{**r, "counts": dict(r["counts"]), "items": {k: dict(v) for k, v in r["items"].items()}}
                             for r in self.runs.values()],
                    "counters": dict(self.counters), "faults": dict(self.faults), "spelling": self.spelling,
                    "at": time.time()}


def _arguments(parser):
    parser.add_argument("--spelling", choices=tuple(SPELLINGS), default="camel",
                        help="camel: _id, createdAt ...; snake: id, created_at ...")
    parser.add_argument("--key", default=None, help="require Authorization: Bearer KEY")


def main(argv=None):
    return serve_main(lambda a: EtlApi(a.spelling, a.key, host=a.host, port=a.port), __doc__, _arguments, argv)


if __name__ == "__main__":
    sys.exit(main())
