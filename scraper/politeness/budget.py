"""What both limiters share (the file-backed `limiter.DomainLimiter`, PostgreSQL's `gcra.GcraLimiter`): each
domain's own rate, read again every RATE_TTL_S (`RateReads`), and the loop that waits for a slot
(`wait_for_slot`). Apart from both, so that `limiter.open_limiter` may pick either without a circle."""

from collections.abc import Callable

from scraper.base.clock import Clock

RateOf = Callable[[str], tuple[float, int]]     # a domain's (rate_per_s, burst)
RATE_TTL_S = 1.0            # a domain's rate is read again this often: a lowered rate reaches every process


def wait_for_slot(try_acquire: Callable[[], float], clock: Clock, timeout_s: float | None = None,
                  should_stop: Callable[[], bool] = lambda: False,
                  on_try: Callable[[], None] = lambda: None) -> bool:
    """The acquire loop of both limiters: `try_acquire()` (0.0 admitted, else seconds to wait) until it
    admits; False when `timeout_s` passed on `clock` or `should_stop()` turned true first. `on_try()` runs
    just before each try: the slot a try grants is computed after it, so the caller dates the slot no later
    than the admitting try's start (a PostgreSQL take returns only after its commit)."""
    deadline = None if timeout_s is None else clock.monotonic() + timeout_s
    while True:
        if should_stop():
            return False
        on_try()
        wait = try_acquire()
        if wait == 0.0:
            return True
        if deadline is not None:
            left = deadline - clock.monotonic()
            if left <= 0:
                return False
            wait = min(wait, left)
        clock.sleep(min(wait, 0.25))   # short naps keep a stop request responsive


class RateReads:
    """Each domain's own rate (`rate_of(domain) -> (rate_per_s, burst)`, or None: the default for all),
    read again every RATE_TTL_S on the injected clock: robots.txt and the adaptive slow-down change it during
    a run, and every process reading the same row within RATE_TTL_S makes a lowered rate hold across them.
    Both limiters keep their rates through it."""

    def __init__(self, rate_of: RateOf | None, clock: Clock) -> None:
        self._rate_of = rate_of
        self._clock = clock
        self._read_at: dict[str, float] = {}     # domain -> when its rate was last read

    def forget(self, domain: str) -> None:
        """Read the domain's rate again before its next slot (it was just changed in this process)."""
        self._read_at.pop(domain, None)

    def due(self, domain: str) -> bool:
        """Whether the domain's rate should be read again now."""
        return (self._rate_of is not None
                and self._clock.monotonic() - self._read_at.get(domain, -1e18) >= RATE_TTL_S)

    def read(self, domain: str) -> tuple[float, int] | None:
        """The domain's (rate_per_s, burst), or None when there is one rate for all."""
        if self._rate_of is None:
            return None
        self._read_at[domain] = self._clock.monotonic()
        return self._rate_of(domain)
