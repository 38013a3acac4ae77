"""The stand-ins' request log over time and their slow phases.

A ``Timeline`` keeps the arrival time of every counted request, per kind of path, as seconds since the
site started, so a test can compute requests per second over time (``GET /_standin/requests``, or
``client.Standin.rate_series``). It also holds the slow phases: for ``seconds`` from their start, every
answer waits ``factor`` times the base latency (``--latency-ms``; when that is 0, ``SLOW_FLOOR_MS``, or the
phase's own ``base_ms``).

Command line: ``--slow-phase-factor F --slow-phase-s N [--slow-phase-after-s D]`` starts a phase D seconds
after the site started. At run time: ``POST /_standin/slow {"factor": 10, "seconds": 20}`` (optional
``"after": D``, ``"base_ms": B``); ``{"seconds": 0}`` ends the phase now. ``/_standin/reset`` clears the
log but keeps the phases.
"""

import threading
import time

SLOW_FLOOR_MS = 10.0


class Timeline:
    """Arrival times per kind and the slow phases of one site, under one lock."""

    def __init__(self, latency_ms=0.0):
        if latency_ms < 0:
            raise ValueError("latency_ms must be >= 0")
        self.latency_ms = float(latency_ms)
        self._lock = threading.Lock()
        self.t0 = time.monotonic()
        self.t0_wall = time.time()
        self._phases = []  # [start, end, factor, base_ms] in seconds since t0
        self.clear()

    def clear(self):
        """Forget every arrival (the phases stay)."""
        with self._lock:
            self._by_kind = {}
            self._rejected = []

    def now(self):
        """Seconds since the site started."""
        return time.monotonic() - self.t0

    def record(self, kind, rejected=False, at=None):
        """Log one arrival of ``kind`` (``rejected``: answered 429 by the rate limit); returns its time."""
        t = self.now() if at is None else at
        with self._lock:
            self._by_kind.setdefault(kind, []).append(round(t, 4))
            if rejected:
                self._rejected.append(round(t, 4))
        return t

    def slow(self, factor, seconds, after=0.0, base_ms=None):
        """Start a slow phase ``after`` seconds from now for ``seconds``; 0 seconds ends any phase now."""
        factor, seconds, after = float(factor), float(seconds), float(after)
        if not (factor >= 1 and seconds >= 0 and after >= 0) or seconds == float("inf"):
            raise ValueError("factor must be >= 1, seconds and after finite and >= 0")
        if base_ms is not None and not float(base_ms) >= 0:
            raise ValueError("base_ms must be >= 0")
        now = self.now()
        with self._lock:
            for phase in self._phases:  # a new phase replaces what is left of the others
                phase[1] = min(phase[1], now + after)
            if seconds > 0:
                base = self._base_ms() if base_ms is None else float(base_ms)
                self._phases.append([now + after, now + after + seconds, factor, base])
            return self._phase_info(self._phases[-1]) if self._phases and seconds > 0 else None

    def _base_ms(self):
        return self.latency_ms if self.latency_ms > 0 else SLOW_FLOOR_MS

    def latency_s(self, at=None):
        """The delay of an answer to a request that arrived at ``at`` (seconds since start; default now)."""
        t = self.now() if at is None else at
        with self._lock:
            for start, end, factor, base in self._phases:
                if start <= t < end:
                    return factor * base / 1000.0
        return self.latency_ms / 1000.0

    @staticmethod
    def _phase_info(phase):
        start, end, factor, base = phase
        return {"start_s": round(start, 4), "end_s": round(end, 4), "factor": factor,
                "latency_ms": factor * base}

    def phases(self):
        with self._lock:
            return [self._phase_info(p) for p in self._phases if p[1] > p[0]]

    def snapshot(self, kind=None, since=0.0):
        """What ``GET /_standin/requests`` serves."""
        with self._lock:
            by_kind = {k: [t for t in times if t >= since] for k, times in self._by_kind.items()
                       if kind is None or k == kind}
            rejected = [t for t in self._rejected if t >= since]
        return {"t0_wall": self.t0_wall, "now_s": round(self.now(), 4), "latency_ms": self.latency_ms,
                "by_kind": by_kind, "rejected_429": rejected, "slow_phases": self.phases()}


def rate_series(times, bucket_s=1.0, until=None):
    """Counts of the ``times`` (seconds) in consecutive buckets of ``bucket_s`` from 0 (to ``until``)."""
    if bucket_s <= 0:
        raise ValueError("bucket_s must be > 0")
    end = max([*times, until or 0.0])
    counts = [0] * (int(end // bucket_s) + 1)
    for t in times:
        counts[int(t // bucket_s)] += 1
    return counts


def add_arguments(parser):
    """The ``--slow-phase-*`` options of a stand-in's command line."""
    parser.add_argument("--slow-phase-factor", type=float, default=10.0,
                        help="latency multiplier of the slow phase")
    parser.add_argument("--slow-phase-s", type=float, default=0.0,
                        help="start a slow phase lasting this long (0 = none)")
    parser.add_argument("--slow-phase-after-s", type=float, default=0.0,
                        help="seconds from start until the slow phase")
