"""A domain's effective rate: the configured one, lowered by robots.txt and by the adaptive slow-down.

`rate_of` is the one function to read it (the limiter, `status`, and the claim logic of other work call
it); the figures live in the domain's row of `domains`, so every process obeys the same rate. The rules
are the pure functions of `scraper.policy.robots`."""

from __future__ import annotations

import logging
import statistics
from typing import TYPE_CHECKING

from scraper.db import domains
from scraper.db import politeness as rows
from scraper.policy import robots as rules

if TYPE_CHECKING:
    from scraper.base.settings import Settings
    from scraper.db.backend import Conn
    from scraper.politeness.budget import RateOf

log = logging.getLogger(__name__)


def rate_of(conn: Conn, settings: Settings, domain: str) -> rules.Rate:
    """The domain's effective `rules.Rate` (rate_per_s, burst, reason) as every process must obey it now."""
    r = domains.rate_row(conn, domain)
    configured, burst = settings.rate_for(domain)
    return rules.effective(configured, burst, r.get("robots_rate_per_s"), bool(r.get("robots_crawl_delay")),
                           r.get("adaptive_rate_per_s") if settings.adaptive else None)


def store_effective(conn: Conn, settings: Settings, domain: str, now: float) -> rules.Rate:
    """Write the effective rate (and the configured one, and why) into the domain's row, for `status`."""
    rate = rate_of(conn, settings, domain)
    configured, _ = settings.rate_for(domain)
    domains.update_rate(conn, domain, now, lambda r: {"configured_rate_per_s": configured,
                                                      "rate_per_s": rate.rate_per_s, "rate_burst": rate.burst,
                                                      "rate_reason": rate.reason})
    return rate


def adapt(conn: Conn, settings: Settings, domain: str, since: float, now: float, dt_s: float) -> None:
    """One step of the adaptive slow-down for `domain` from its answers since `since` (the run's start)."""
    count, first, last = rows.answers_since(conn, domain, since, rules.WINDOW)
    answers = rules.Answers(count, statistics.median(first) if len(first) >= rules.WINDOW else None,
                            tuple(ms for ms, _ in last), sum(1 for _, status in last if status == 503))
    configured, _ = settings.rate_for(domain)
    row = domains.rate_row(conn, domain)
    current, mark = row.get("adaptive_rate_per_s"), row.get("adaptive_mark")
    new, new_mark, why = rules.adapt(configured, current, mark, answers, dt_s, settings.adaptive_recover_s)
    if new == current and new_mark == mark:
        return
    domains.update_rate(conn, domain, now, lambda r: {"adaptive_rate_per_s": new, "adaptive_mark": new_mark})
    rate = store_effective(conn, settings, domain, now)
    if why == "slow":
        log.warning("%s answers slowly (median %.0f ms of its last %d answers, baseline %.0f ms): rate halved to "
                    "%.3g/s", domain, statistics.median(answers.last_ms), len(answers.last_ms), answers.baseline_ms,
                    rate.rate_per_s)
    elif why == "503":
        log.warning("%s answered 503 to %d of its last %d requests: rate halved to %.3g/s", domain, answers.last_503,
                    len(answers.last_ms), rate.rate_per_s)
    elif why == "recovered":
        log.info("%s recovered: back to its rate of %.3g/s", domain, rate.rate_per_s)


def limiter_rates(conn: Conn, settings: Settings) -> RateOf:
    """The `rate_of` a DomainLimiter takes: domain -> (rate_per_s, burst), effective."""
    def read(domain: str) -> tuple[float, int]:
        rate = rate_of(conn, settings, domain)
        return rate.rate_per_s, rate.burst
    return read
