"""One rate slot per domain, shared by every process on this machine: a GCRA in the limiter's file beside the
jobs database (`db/ratelog`), as PostgreSQL keeps it in the domain's row (`gcra.GcraLimiter`, `db/slots`).

GCRA (the generic cell rate algorithm) keeps one number per domain, the theoretical arrival time of its next
request; a request may leave when that time is within the tolerance (the burst, less `policy/margin`'s time
for the slot-to-arrival delay), and leaving moves it one interval on. A slot taken late does not move the
next one later: the schedule is the rate's, not the admissions', so lateness never compounds (issue 45: the
sliding log it replaces, pyrate-limiter's, counted each window from the real admissions, and every wake-up
a little late cost a little more of the rate: 0.945-0.969 of 20/s). The burst is the site's less 200 ms
of it (`policy/margin`), a fraction of a unit where that is what it is (the sliding log kept whole units back).

The take happens under a blocking fcntl.flock (the kernel hands it over as soon as it is free) and the wait
outside it, for exactly the time the slot says, so no process holds others up.
"""

import fcntl
import os
from collections.abc import Callable
from typing import Any

from scraper.base.clock import SYSTEM, Clock
from scraper.db import ratelog, slots
from scraper.politeness.budget import RateOf, RateReads, wait_for_slot


class _Flock:
    """A cross-process lock on a file, blocking in the kernel."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    def __enter__(self) -> "_Flock":
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self.fd)


class DomainLimiter:
    """`acquire(domain)` waits for a slot of the domain's shared GCRA. Open it inside the process (or lane)
    that uses it (nothing here survives a fork)."""

    def __init__(self, path: str, rate_per_s: float, burst: int, rate_of: RateOf | None = None,
                 clock: Clock = SYSTEM) -> None:
        """`rate_of(domain) -> (rate_per_s, burst)` gives a domain its own budget, read again every
        RATE_TTL_S (it may change during a run: robots.txt, the adaptive slow-down); else (rate_per_s, burst).

        Every process takes the shared slot with the rate it read; as they all read the same row, a lowered
        rate holds across processes within RATE_TTL_S."""
        self._default = slots.gcra(rate_per_s, burst)
        self._reads = RateReads(rate_of, clock)
        self._known: dict[str, tuple[float, float]] = {}
        self._lock = _Flock(path + ".lock")
        with self._lock:
            self._conn = ratelog.connect(path)
            ratelog.create(self._conn)
        self._clock = clock

    def refresh(self, domain: str) -> None:
        """Read the domain's rate again before the next slot (it was just changed in this process)."""
        self._reads.forget(domain)

    def params(self, domain: str) -> tuple[float, float]:
        """(interval, tolerance) of the domain's slot, in seconds (`db.slots.gcra`)."""
        params = self._known.get(domain)
        if params is None or self._reads.due(domain):
            own = self._reads.read(domain)
            params = self._known[domain] = self._default if own is None else slots.gcra(*own)
        return params

    def wait_s(self, domain: str) -> float:
        """Seconds until the domain has a slot (0.0: one is free now); takes nothing."""
        tolerance = self.params(domain)[1]
        with self._lock:
            return ratelog.wait(self._conn, domain, self._clock(), tolerance)

    def try_acquire(self, domain: str) -> float:
        """Take one slot now: returns 0.0 when admitted, else the seconds until one may be free."""
        interval, tolerance = self.params(domain)
        with self._lock:
            # the time is read under the lock, just before the take: a slot is never stamped in the past
            return ratelog.take(self._conn, domain, self._clock(), interval, tolerance)

    def acquire(self, domain: str, timeout_s: float | None = None,
                should_stop: Callable[[], bool] = lambda: False, on_try: Callable[[], None] = lambda: None) -> bool:
        """Wait for a slot; False when `timeout_s` passed or `should_stop()` turned true first (`on_try`:
        `budget.wait_for_slot`'s)."""
        return wait_for_slot(lambda: self.try_acquire(domain), self._clock, timeout_s, should_stop, on_try)

    def close(self) -> None:
        self._conn.close()
        self._lock.close()


def open_limiter(settings: Any, rate_of: RateOf | None = None) -> Any:
    """The limiter of the settings' database: the file-backed buckets beside a SQLite file, the GCRA rows
    of a PostgreSQL database (`gcra.GcraLimiter`); NoLimiter with --no-limit. Each domain's budget is
    `settings.rate_for(domain)` unless `rate_of` says otherwise."""
    rate_of = rate_of or settings.rate_for
    if settings.no_limit:
        return NoLimiter()
    if settings.postgres:
        from scraper.db import store
        from scraper.politeness.gcra import GcraLimiter
        return GcraLimiter(settings.db_path, settings.rate_per_s, settings.burst, rate_of=rate_of,
                           link=store.run_link(settings))
    return DomainLimiter(settings.limiter_path, settings.rate_per_s, settings.burst, rate_of=rate_of)


class NoLimiter:
    """The limiter when `--no-limit` is given (benchmarks of the queue alone)."""

    def refresh(self, domain: str) -> None:
        pass

    def acquire(self, domain: str, timeout_s: float | None = None,
                should_stop: Callable[[], bool] = lambda: False, on_try: Callable[[], None] = lambda: None) -> bool:
        on_try()
        return not should_stop()

    def wait_s(self, domain: str) -> float:
        return 0.0

    def close(self) -> None:
        pass
