"""Politeness towards each domain: its rate slot (the shared limiter), its 429 pause and its breaker.

`Politeness` is the seam a worker talks to; `domain.Politeness` implements it for one domain.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from scraper.base.errors import FetchError


class Politeness(Protocol):
    """One domain's politeness for one worker: asked before every request, told what came of it."""

    domain: str

    def wait_s(self) -> float:
        """Seconds until the domain's rate slot is free (0.0: now); takes nothing."""

    def before(self, probe: bool, renew: Callable[[], bool], url: str | None = None) -> str:
        """Wait for the rate slot and any 429 pause: `domain.GO`, `domain.STOPPED` or `domain.OPENED`."""

    def probe_abandoned(self) -> None:
        """The probe job was handed back unsent: free the half-open breaker for another."""

    def answered(self) -> None:
        """The domain answered (a success for its breaker)."""

    def failed(self, e: FetchError) -> None:
        """A request failed in a way that speaks of the domain."""
