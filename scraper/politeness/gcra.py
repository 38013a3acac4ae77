"""The rate limiter of a PostgreSQL database: one GCRA reservation per domain in its `domains` row
(`scraper.db.slots`), shared by every process on every machine. Same interface as `DomainLimiter`."""

from collections.abc import Callable

from scraper.base.clock import SYSTEM, Clock
from scraper.db import slots, store
from scraper.db.pg import Link
from scraper.politeness.budget import RateOf, RateReads, wait_for_slot


class GcraLimiter:
    """`acquire(domain)` waits for the domain's slot. Open it inside the process that uses it: it holds
    its own connection, so a slot is never taken inside another transaction."""

    def __init__(self, db_url: str, rate_per_s: float, burst: int, rate_of: RateOf | None = None,
                 clock: Clock = SYSTEM, link: Link | None = None) -> None:
        """`rate_of(domain) -> (rate_per_s, burst)` is read again every RATE_TTL_S (`RateReads`), as in `DomainLimiter`
        (robots.txt and the adaptive slow-down change a domain's rate during a run); `link`: a run's
        connection (made again when lost, `db/pg.Link`)."""
        self._conn = store.open_postgres(db_url, link)    # the schema first: a first seed walks before it stores
        self._default = slots.gcra(rate_per_s, burst)
        self._reads = RateReads(rate_of, clock)
        self._known: dict[str, tuple[float, float]] = {}
        self._clock = clock

    def refresh(self, domain: str) -> None:
        """Read the domain's rate again before the next slot (it was just changed in this process)."""
        self._reads.forget(domain)

    def _params(self, domain: str) -> tuple[float, float]:
        params = self._known.get(domain)
        if params is None or self._reads.due(domain):
            if params is None:
                slots.ensure(self._conn, domain)
            own = self._reads.read(domain)
            params = self._known[domain] = self._default if own is None else slots.gcra(*own)
        return params

    def wait_s(self, domain: str) -> float:
        return slots.wait(self._conn, domain, self._params(domain)[1])

    def try_acquire(self, domain: str) -> float:
        """Take one slot now: 0.0 when admitted, else the seconds until one may be free."""
        interval, tolerance = self._params(domain)
        return slots.take(self._conn, domain, interval, tolerance)

    def acquire(self, domain: str, timeout_s: float | None = None,
                should_stop: Callable[[], bool] = lambda: False, on_try: Callable[[], None] = lambda: None) -> bool:
        """Wait for a slot; False when `timeout_s` passed or `should_stop()` turned true first (`on_try`:
        `budget.wait_for_slot`'s)."""
        return wait_for_slot(lambda: self.try_acquire(domain), self._clock, timeout_s, should_stop, on_try)

    def close(self) -> None:
        self._conn.close()
