"""Politeness towards each domain: its rate slot (the shared limiter), its 429 pause and its breaker, its
robots.txt, the proxy pool, and the one polite client every request to a site leaves through (`client`).

`Politeness` is the seam the client talks to; `domain.Politeness` implements it for one domain.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from scraper.base.errors import FetchError
from scraper.policy.breaker import Breaker


class Politeness(Protocol):
    """One domain's politeness for one worker: asked before every request, told what came of it."""

    domain: str

    def wait_s(self) -> float:
        """Seconds until the domain's rate slot is free (0.0: now); takes nothing."""

    def rate(self) -> tuple[float, int]:
        """(rate_per_s, burst) of the domain: the one place its budget is read."""

    def demand(self, requests_per_job: int = 1) -> Any:
        """What a fair claim needs to know of the domain (a `policy.fairness.Demand`)."""

    def take_waited(self) -> float:
        """Seconds spent waiting for the slot (and 429 pauses) before the request about to be logged."""

    def before(self, probe: bool, renew: Callable[[], bool], url: str | None = None) -> str:
        """Wait for the rate slot and any 429 pause: `domain.GO`, `domain.STOPPED` or `domain.OPENED`."""

    def probe_abandoned(self) -> None:
        """The probe job was handed back unsent: free the half-open breaker for another."""

    def robots_unavailable(self) -> Breaker:
        """The domain's robots.txt could not be fetched: its breaker opens; returns the breaker after."""

    def answered(self) -> None:
        """The domain answered (a success for its breaker)."""

    def failed(self, e: FetchError) -> None:
        """A request failed in a way that speaks of the domain."""


class Limiter(Protocol):
    """The shared rate slots of every domain (`limiter.DomainLimiter` on SQLite, `gcra.GcraLimiter` on
    PostgreSQL, `limiter.NoLimiter` for --no-limit)."""

    def wait_s(self, domain: str) -> float:
        """Seconds until the domain has a slot (0.0: now); takes nothing."""

    def acquire(self, domain: str, timeout_s: float | None = None,
                should_stop: Callable[[], bool] = ..., on_try: Callable[[], None] = ...) -> bool:
        """Wait for a slot; False when `timeout_s` passed or `should_stop()` turned true first; `on_try()`
        just before each try (the admitting one's start is the latest time the slot can date from)."""

    def refresh(self, domain: str) -> None:
        """Read the domain's rate again before the next slot."""

    def close(self) -> None: ...


class Breakers(Protocol):
    """What politeness asks of the queue: each domain's breaker row, read and changed."""

    def domains(self) -> dict[str, Breaker]: ...

    def breaker(self, domain: str) -> Breaker:
        """The domain's breaker, read by its key (a closed one when it has no row)."""

    def give_up(self, domain: str, reason: str, now: float, until: float) -> Any:
        """This run sends nothing more to `domain` until `until` (`breaker.on_give_up`), for `reason`."""

    def update_domain(self, domain: str, change: Callable[[Breaker], Breaker], now: float) -> Any:
        """Apply `change` to the domain's breaker in one transaction; (before, after)."""
