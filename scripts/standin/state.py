"""The stand-in site's state: its corpus, its one strict token bucket, its counters and its storm.

Every counted request (anything not under ``/_standin``) passes ``arrive`` once, so the counters that
``/_standin/stats`` serves are the proof that a client was polite.
"""

import collections
import math
import random
import threading
import time

from .corpus import DATA_DIR, Corpus
from .faults import parse_faults
from .robots import Robots
from .timeline import Timeline
from .validators import Validators

LOOPBACK = "127.0.0.1"
ID_PATHS = ("/api/templates/workflows/", "/workflows/")


class SiteState:
    """The corpus and every counter of one stand-in site, each change under one lock.

    The server (``server.StandinSite``) adds the sockets; its handler asks and tells this object only
    through the public methods below.
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
        robots=None,
        video_every=0,
        drift=False,
        paid_every=0,
        validators="none",
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
        self.banned_addresses = set()   # source addresses answered 403 (a proxy's outgoing address, say)
        self.secrets = ()               # texts no request may carry (a proxy's password)
        self.rate, self.burst = float(rate), int(burst)
        self.latency_ms, self.slow_s, self.seed = float(latency_ms), float(slow_s), seed
        self.trickle_s = float(trickle_s)
        self.fault_spec = parse_faults(faults) if isinstance(faults, str) else list(faults)
        self.corpus = Corpus(data_dir or DATA_DIR, int(templates), seed, self.fault_spec,
                              float(missing_fraction), video_every=int(video_every),
                             paid_every=int(paid_every))
        # the default listing order as recorded: a ranking that moves between calls (sort=createdAt is stable)
        self.drift = bool(drift)
        self._drift_calls = 0
        # robots.txt: a Robots, or a mode; its Disallow by template id covers the API and the pages
        self.robots = robots if isinstance(robots, Robots) else Robots(robots or "none", id_paths=ID_PATHS)
        self.timeline = Timeline(self.latency_ms)  # its clock starts once the corpus is built
        self.validators = Validators(validators)   # ETag/Last-Modified and 304s, as its mode says
        self._lock = threading.Lock()
        self._zero()

    def listing(self, sort=None):
        """(ids in the order of this call, whether the entries' createdAt follow it). `sort`
        createdAt:asc or :desc pages in creation order; the default order is the ids' unless `drift`,
        where each call reshuffles it, as n8n.io's popularity ranking moves while a walk pages."""
        listed = self.corpus.listed()
        key = (sort or "").split(",")[0]
        if key == "createdAt:asc":
            return listed, True
        if key == "createdAt:desc":
            return listed[::-1], True
        if not self.drift:
            return listed, False
        with self._lock:
            self._drift_calls += 1
            calls = self._drift_calls
        order = list(listed)
        random.Random(self.seed * 1_000_003 + calls).shuffle(order)
        return order, True

    def _zero(self):
        """Every counter back to its start (called under self._lock, or before any thread exists)."""
        self._requests = 0
        self._http_429 = 0
        self._max_in_1s = 0
        self._window = collections.deque()
        self._by_status = {}
        self._by_kind = {"search": 0, "detail": 0, "importable": 0, "page": 0}
        self._robots = 0
        self._detail_requests = {}
        self._faults_served = {kind: 0 for kind, _, _ in self.fault_spec}
        self._tokens = float(self.burst)
        self._last = time.monotonic()
        self._storm_until = 0.0
        self._storm_share, self._storm_seen = 1.0, 0
        self._by_address = {}
        self._secrets_seen = 0
        self._bytes_sent = 0

    # -- what the handler reports, one request at a time -----------------------------------------

    def arrive(self, kind):
        """Count one arrival; return (retry_after seconds or 0 if admitted, storm active)."""
        with self._lock:
            now = time.monotonic()
            self._requests += 1
            self._by_kind[kind] = self._by_kind.get(kind, 0) + 1
            if kind == "robots":
                self._robots += 1
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
            self.timeline.record(kind, rejected=bool(retry_after), at=now - self.timeline.t0)
            storm = now < self._storm_until and retry_after == 0
            if storm and self._storm_share < 1.0:
                # a share of the answers, spread evenly: the 3rd, 6th, 9th ... at a share of a third
                before = int(self._storm_seen * self._storm_share)
                self._storm_seen += 1
                storm = int(self._storm_seen * self._storm_share) > before
            return retry_after, storm

    def count_status(self, status, size=0):
        with self._lock:
            self._bytes_sent += size
            key = str(status)
            self._by_status[key] = self._by_status.get(key, 0) + 1

    def count_fault(self, kind):
        with self._lock:
            self._faults_served[kind] = self._faults_served.get(kind, 0) + 1

    def detail_hit(self, tid):
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

    # -- public ---------------------------------------------------------------------------------

    def is_live(self, tid):
        """True if tid is in the corpus and not one of the listed-but-gone (missing) ids."""
        return tid in self.corpus.position and tid not in self.corpus.missing and tid not in self.corpus.removed

    def change_library(self, **change):
        """Change the library between runs (``Corpus.change``); returns (ids added, ids listed)."""
        with self._lock:
            added = self.corpus.change(**change)
            return added, len(self.corpus.listed())

    def storm(self, seconds, share=1.0):
        """Answer every counted request (or ``share`` of them, evenly spread) with 503 for the next
        ``seconds`` seconds."""
        with self._lock:
            self._storm_until = time.monotonic() + float(seconds)
            self._storm_share, self._storm_seen = float(share), 0

    def client(self, address, headers, request_line):
        """A counted request came from `address` (its source: a proxy's outgoing address, or 127.0.0.1 when
        direct) with `headers`: counted by address; any header or request line holding one of `secrets`, or a
        Proxy-Authorization header, is counted as a leak. True when `address` is in `banned_addresses` (the
        handler answers 403)."""
        text = request_line + "\n" + "\n".join(f"{k}: {v}" for k, v in headers.items())
        leaked = "proxy-authorization" in (k.lower() for k in headers) or any(s in text for s in self.secrets)
        with self._lock:
            self._by_address[address] = self._by_address.get(address, 0) + 1
            self._secrets_seen += leaked
        return address in self.banned_addresses

    def reset(self):
        """Zero every counter and the request log; also refill the bucket, end any storm and restart the xN
        faults (a slow phase goes on)."""
        with self._lock:
            self._zero()
        self.timeline.clear()

    def stats(self):
        """A snapshot of the counters (the same dict /_standin/stats serves)."""
        with self._lock:
            return {
                "requests": self._requests,
                "robots": self._robots,
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
                "robots_mode": self.robots.mode,
                "slow_phases": self.timeline.phases(),
                "by_address": dict(self._by_address),
                "secrets_seen": self._secrets_seen,
                "bytes_sent": self._bytes_sent,
                "validators": self.validators.stats(),
            }

    def corpus_info(self):
        """Which ids exist, which are missing and which carry which fault (for tests)."""
        corpus = self.corpus
        return {
            "ids": list(corpus.ids),
            "missing": sorted(corpus.missing),
            "removed": sorted(corpus.removed),
            "faults": {str(tid): {"kind": kind, "times": times}
                       for tid, (kind, times) in sorted(corpus.faults.items())},
            "slugs": {str(tid): slug for tid, slug in corpus.slugs.items()},
            "seed": self.seed,
        }
