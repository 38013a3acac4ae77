"""One rate-limit bucket per domain, shared by every process on this machine.

pyrate-limiter's SQLiteBucket keeps an exact sliding log in a SQLite file beside the jobs
database. We drive the bucket ourselves instead of through `Limiter`, for two reasons measured
with pyrate-limiter 4.5:
- the item is stamped while we hold the cross-process lock, just before it is stored; Limiter
  stamps it before waiting for the lock, so real admissions drift past the limit;
- the wait happens outside the lock, for exactly the time the bucket says, so no process holds
  others up and no non-blocking call misreads a busy lock as "limited".
The lock is a blocking fcntl.flock: the kernel hands it over as soon as it is free (filelock
polls every 50 ms, which wastes slots and is unfair).
"""

import fcntl
import math
import os
from collections.abc import Callable
from typing import Any

from pyrate_limiter import Rate, RateItem, SQLiteBucket

from scraper.base.clock import SYSTEM, Clock
from scraper.db import ratelog
from scraper.policy import margin
from scraper.politeness.budget import RateOf, RateReads, wait_for_slot

LEAK_EVERY = 200            # admissions between clean-ups of rows that left every window


def rates_for(rate_per_s: float, burst: int) -> list[Rate]:
    """Sliding-window rates that never exceed a token bucket of `rate_per_s` with `burst`.

    Part of the burst is kept back as a margin for the time between admission here and arrival
    at the server (`policy/margin`): a server that enforces exactly (rate, burst) then never
    answers 429. The sustained rate is unchanged."""
    window_units = margin.burst_units(rate_per_s, burst)
    interval_ms = math.ceil(window_units * 1000 / rate_per_s)
    return [Rate(window_units, interval_ms)]


def _key(rates: list[Rate]) -> list[tuple[int, int]]:
    return [(r.limit, r.interval) for r in rates]


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
    """`acquire(domain)` waits for a slot in the domain's shared bucket. Open it inside the process
    that uses it (nothing here survives a fork)."""

    def __init__(self, path: str, rate_per_s: float, burst: int, rate_of: RateOf | None = None,
                 clock: Clock = SYSTEM) -> None:
        """`rate_of(domain) -> (rate_per_s, burst)` gives a domain its own budget, read again every
        RATE_TTL_S (it may change during a run: robots.txt, the adaptive slow-down); else (rate_per_s, burst).

        Every process checks the shared log against the rates it read; as they all read the same row,
        a lowered rate holds across processes within RATE_TTL_S."""
        self.rates = rates_for(rate_per_s, burst)
        self._reads = RateReads(rate_of, clock)
        self._lock = _Flock(path + ".lock")
        with self._lock:
            self._conn = ratelog.connect(path)
        self._buckets: dict[str, SQLiteBucket] = {}
        self._clock = clock
        self._admitted = 0

    def refresh(self, domain: str) -> None:
        """Read the domain's rate again before the next slot (it was just changed in this process)."""
        self._reads.forget(domain)

    def _bucket(self, domain: str) -> SQLiteBucket:
        bucket = self._buckets.get(domain)
        if bucket is None or self._reads.due(domain):
            table = ratelog.table_of(domain)
            if bucket is None:
                ratelog.create(self._conn, table)
            own = self._reads.read(domain)
            rates = self.rates if own is None else rates_for(*own)
            if bucket is None or _key(rates) != _key(bucket.rates):
                bucket = self._buckets[domain] = SQLiteBucket(rates, self._conn, table)
        return bucket

    def wait_s(self, domain: str) -> float:
        """Seconds until the domain's bucket has a slot (0.0: one is free now); takes nothing.

        Read from the shared log itself: pyrate's `waiting()` only knows this process's last refusal."""
        with self._lock:
            bucket = self._bucket(domain)
            now, wait_ms = bucket.now(), 0
            for rate in bucket.rates:
                oldest = ratelog.nth_newest(self._conn, bucket.table, now - rate.interval, rate.limit)
                if oldest is not None:
                    wait_ms = max(wait_ms, oldest + rate.interval - now)
            return wait_ms / 1000.0

    def try_acquire(self, domain: str) -> float:
        """Take one slot now: returns 0.0 when admitted, else the seconds until one may be free."""
        with self._lock:
            bucket = self._bucket(domain)
            item = RateItem(domain, bucket.now())    # stamped under the lock, just before it is stored
            decision: Any = bucket.put_decision(item)    # a Decision: this bucket is synchronous
            if decision.allowed:
                self._admitted += 1
                if self._admitted % LEAK_EVERY == 0:
                    bucket.leak(item.timestamp)
                return 0.0
        wait_ms = decision.retry_after_ms
        return max(0.001, (wait_ms if wait_ms is not None else 50) / 1000.0)

    def acquire(self, domain: str, timeout_s: float | None = None,
                should_stop: Callable[[], bool] = lambda: False) -> bool:
        """Wait for a slot; False when `timeout_s` passed or `should_stop()` turned true first."""
        return wait_for_slot(lambda: self.try_acquire(domain), self._clock, timeout_s, should_stop)

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
        from scraper.politeness.gcra import GcraLimiter
        return GcraLimiter(settings.db_path, settings.rate_per_s, settings.burst, rate_of=rate_of)
    return DomainLimiter(settings.limiter_path, settings.rate_per_s, settings.burst, rate_of=rate_of)


class NoLimiter:
    """The limiter when `--no-limit` is given (benchmarks of the queue alone)."""

    def refresh(self, domain: str) -> None:
        pass

    def acquire(self, domain: str, timeout_s: float | None = None,
                should_stop: Callable[[], bool] = lambda: False) -> bool:
        return not should_stop()

    def wait_s(self, domain: str) -> float:
        return 0.0

    def close(self) -> None:
        pass
