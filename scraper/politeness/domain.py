"""Politeness towards one domain: its rate slot, its 429 pause and its circuit breaker, behind one object.

A worker asks its domain's `Politeness` before every request (`before`) and tells it what came of the
request after (`answered`, `failed`). The rate slot lives in the shared limiter, the pause and the
breaker in the domain's row of the `domains` table (through the queue); the breaker's rules are the pure
functions of `breaker`."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from scraper.base.clock import SYSTEM, Clock
from scraper.base.errors import FetchError
from scraper.policy import breaker, fairness, margin, retry

if TYPE_CHECKING:
    from scraper.base.settings import Settings
    from scraper.politeness import Breakers, Limiter

log = logging.getLogger(__name__)

ACQUIRE_SLICE_S = 5.0        # a wait for a rate slot is cut in slices, the lease is renewed between them
PAUSE_NAP_S = 0.25           # the nap inside a 429 pause: a stop request stays responsive

# what `before` tells the worker
GO = "go"                   # send the request now
STOPPED = "stopped"         # a stop came (or the lease was lost) while waiting: hand the job back
OPENED = "opened"           # the breaker opened after the job was taken: send nothing, hand the job back



@dataclasses.dataclass(eq=False)
class Politeness:
    """One domain's politeness for one worker process (opened after the fork, like its limiter).

    `queue` holds the domain's breaker row, `limiter` the shared rate buckets; `name` (the worker's)
    prefixes the log lines; `clock` (a `base.clock.Clock`) is read and waited on for the pauses;
    `stopping()` is true once the worker is asked to stop."""

    s: Settings             # the run's settings
    domain: str
    queue: Breakers
    limiter: Limiter
    name: str = ""
    clock: Clock = SYSTEM
    stopping: Callable[[], bool] = lambda: False
    waited_s: float = dataclasses.field(default=0.0, init=False)   # slot wait since the last logged request
    granted_at: float = dataclasses.field(default=float("-inf"), init=False)   # monotonic: the last slot's grant

    # --- before a request ----------------------------------------------------------------

    def wait_s(self) -> float:
        """Seconds until the domain's rate slot is free (0.0: now); takes nothing (for fair claims)."""
        return self.limiter.wait_s(self.domain)

    def rate(self) -> tuple[float, int]:
        """(rate_per_s, burst) of the domain: the one place its budget is read."""
        return self.s.rate_for(self.domain)

    def demand(self, requests_per_job: int = 1) -> fairness.Demand:
        """What a fair claim needs to know of the domain (`fairness.Demand`)."""
        return fairness.Demand(self.wait_s(), self.rate()[0], requests_per_job)

    def take_waited(self) -> float:
        """Seconds spent waiting for the slot (and 429 pauses) before the request about to be logged."""
        waited, self.waited_s = self.waited_s, 0.0
        return waited

    def before(self, probe: bool, renew: Callable[[], bool], url: str | None = None) -> str:
        """Wait for the domain's rate slot and any 429 pause; GO, STOPPED or OPENED.

        `probe`: the job tests a half-open domain (an open breaker does not stop it); `renew()` renews the
        job's lease and says whether it is still ours. FetchError (network) when the lease is lost
        before the request or during a pause.

        Nothing that can wait on a lock sits between the slot and the request: a request that left
        late would arrive bunched with the next ones and eat the burst margin. The time waited is kept
        in `waited_s` and logged with the request after its answer (`take_waited`)."""
        started = self.clock.monotonic()
        try:
            return self._before(probe, renew, url)
        finally:
            self.waited_s += self.clock.monotonic() - started

    def _before(self, probe: bool, renew: Callable[[], bool], url: str | None) -> str:
        while True:
            if not renew():
                raise FetchError(retry.NETWORK, "lease lost before the request", url=url)
            if not self._wait_for_slot(renew):
                return STOPPED
            b = self._breaker()
            if b.state == breaker.OPEN and not probe:
                return OPENED
            paused_until = b.paused_until
            if paused_until <= self.clock():
                return GO
            # the domain was paused (429) after the job was taken: wait it out, then take a new slot
            while paused_until > self.clock() and not self.stopping():
                self.clock.sleep(min(PAUSE_NAP_S, paused_until - self.clock()))
                if not renew():
                    raise FetchError(retry.NETWORK, "lease lost during a 429 pause", url=url)

    def _wait_for_slot(self, renew: Callable[[], bool]) -> bool:
        tried: list[float] = []

        def trying() -> None:       # the slot dates from its try, not from when the take's answer came back
            tried[:] = [self.clock.monotonic()]

        while not self.limiter.acquire(self.domain, ACQUIRE_SLICE_S, self.stopping, trying):
            if self.stopping():
                return False
            if not renew():
                return False
        self.granted_at = tried[0] if tried else self.clock.monotonic()
        return True

    def stale(self) -> bool:
        """The last slot was granted longer ago than `margin.stale_after_s` allows: a request sent on it now
        could arrive bunched with the next ones past what the burst absorbs, so it takes another
        (`Client._through`)."""
        return self.clock.monotonic() - self.granted_at > margin.stale_after_s(*self.rate())

    def _breaker(self) -> breaker.Breaker:
        return self.queue.breaker(self.domain)

    def rest_s(self) -> float:
        """Seconds the domain's breaker stays open (0.0: closed, or its open period is over and a request
        may test it); for a request with no job to hand back (a walk's), which cannot wait in a claim."""
        return breaker.rest_s(self._breaker(), self.clock())

    def probe_abandoned(self) -> None:
        """The probe job was handed back unfinished: another worker may probe at once."""
        self.queue.update_domain(self.domain, breaker.on_probe_abandoned, self.clock())

    # --- after a request -----------------------------------------------------------------

    def answered(self) -> None:
        """The server answered (any status that speaks of the job, not of the server): close the breaker."""
        b = self.queue.breaker(self.domain)
        if b.state != breaker.CLOSED or b.failures or b.pause_s:
            before, _ = self.queue.update_domain(self.domain, breaker.on_success, self.clock())
            if before.state != breaker.CLOSED:
                log.info("%s breaker of %s closed (was %s)", self.name, self.domain, before.state)

    def give_up(self, reason: str, until: float) -> None:
        """This run sends nothing more to the domain until `until` (a breaker transition,
        `breaker.on_give_up`): its jobs stay pending for the next run."""
        self.queue.give_up(self.domain, reason, self.clock(), until)

    def robots_unavailable(self) -> breaker.Breaker:
        """The domain's robots.txt could not be fetched: nothing more is sent until it can (RFC 9309). The
        breaker opens at once, as for a block, so the domain waits like a down site: its jobs wait the
        doubling open periods, each probe fetches robots.txt again, and the domain is given up only as
        `breaker.gives_up` says (--max-open-cycles and --give-up-after). Returns the breaker after."""
        now, s = self.clock(), self.s
        _, b = self.queue.update_domain(
            self.domain, lambda b: breaker.on_blocked(b, now, s.breaker_open_s, s.max_open_cycles,
                                                      s.give_up_after_s), now)
        return b

    def failed(self, e: FetchError) -> None:
        """A request failed with FetchError `e`: a block opens the breaker, a 429 pauses the domain, a sick
        server (network, timeout, 5xx) counts towards opening it; any other kind is an answer."""
        now, s, domain = self.clock(), self.s, self.domain
        if e.kind == retry.BLOCKED:
            _, b = self.queue.update_domain(
                domain, lambda b: breaker.on_blocked(b, now, s.breaker_open_s, s.max_open_cycles,
                                                            s.give_up_after_s), now
            )
            log.warning("%s %s blocks this address: breaker open for %.0f s", self.name, domain, b.open_until - now)
        elif e.kind == retry.HTTP_429:
            _, b = self.queue.update_domain(
                domain, lambda b: breaker.on_429(b, now, e.retry_after, s.pause_429_s, s.pause_max_s), now
            )
            log.warning("%s 429 from %s: domain paused for %.1f s", self.name, domain, b.paused_until - now)
        elif e.kind in retry.BREAKER_KINDS:
            before, b = self.queue.update_domain(
                domain, lambda b: breaker.on_failure(b, now, s.breaker_failures, s.breaker_open_s, s.max_open_cycles,
                                              s.give_up_after_s), now
            )
            if b.gave_up and not before.gave_up:
                log.error("%s gave up on %s: %d probes in a row failed (%s), open for %.0f s; its breaker stays open "
                          "and its jobs stay pending for the next run", self.name, domain, b.open_cycles, e,
                          now - b.opened_at)
            elif b.state == breaker.OPEN and before.state != breaker.OPEN:
                log.warning("%s breaker of %s open until +%.0f s (%d failures)",
                            self.name, domain, b.open_until - now, b.failures)
        else:
            self.answered()


if TYPE_CHECKING:
    import scraper.politeness

    def _conforms(p: Politeness) -> scraper.politeness.Politeness:   # mypy: it follows the seam
        return p
