"""The one clock: wall time (what is stored, what decides), monotonic time (intervals) and sleep.

Everything that reads or waits on time takes a `Clock` (`SYSTEM` unless told otherwise): the limiters,
politeness, the breaker's and the pause's waits, the worker's naps, the supervisor's pacing. A test gives
a `FakeClock`, whose `sleep` moves time on at once, so a 10-minute outage or a Retry-After of 600 s is
driven in milliseconds. A `Clock` is also callable as `clock()` -> `now()`, the form the code passed
around before (`clock=time.time`).

What bounds real I/O (an HTTP request's deadline, a child process's join) stays on the system's time: a
socket does not read a fake clock."""

import time
from collections.abc import Callable


class Clock:
    """The system's clock."""

    def now(self) -> float:
        """Seconds since the epoch: what is stored and compared with stored times."""
        return time.time()

    def monotonic(self) -> float:
        """Seconds for intervals and deadlines (never goes back)."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def __call__(self) -> float:
        return self.now()


SYSTEM = Clock()


def _since_boot() -> float:
    """Seconds since the machine booted: never steps, and (unlike CLOCK_MONOTONIC) counts a suspension."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic()


class SteadyClock(Clock):
    """A run's clock on one machine (SQLite): the wall clock as it read when the run began, moved on by the
    time elapsed since, so the wall clock stepped back (or forward) during the run stalls no lease, backoff,
    pause or rate slot. Made by the supervisor before it forks, it is the same clock in every worker."""

    def __init__(self, wall: Callable[[], float] = time.time, since_boot: Callable[[], float] = _since_boot):
        self._since_boot = since_boot
        self._wall0, self._boot0 = wall(), since_boot()

    def now(self) -> float:
        return self._wall0 + (self._since_boot() - self._boot0)


class DatabaseClock(Clock):
    """Wall time from the database (PostgreSQL: every machine decides on one clock); intervals and
    waits stay local."""

    def __init__(self, now: Callable[[], float]):
        self._now = now

    def now(self) -> float:
        return self._now()


class FakeClock(Clock):
    """A clock a test moves: `t` is the time; `sleep(s)` and `advance(s)` move it on at once.

    `monotonic()` is `t` too: only differences of it mean anything. `slept` lists every sleep, so a test
    can say how long something waited without waiting for it."""

    def __init__(self, t: float = 1_700_000_000.0):
        self.t = t
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        if seconds > 0:
            self.t += seconds

    def advance(self, seconds: float) -> None:
        self.t += seconds

