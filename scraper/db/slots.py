"""Each domain's rate slot on PostgreSQL: a GCRA reservation in the domain's `domains` row, taken on the
database's clock, so every process on every machine shares one budget per domain.

GCRA (the generic cell rate algorithm) keeps one number per domain, `slot_at`: the theoretical arrival
time of the next request. A request may leave when `slot_at - now <= tolerance` (the burst as an
allowance); leaving moves `slot_at` to `max(slot_at, now) + interval`. One UPDATE does the test and the
move under the row's lock, on `clock_timestamp()` (seconds since the epoch: no time zone can shift it;
pyrate-limiter's PostgresBucket stores zone-less timestamps, which another session's time zone shifts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scraper.policy import margin

if TYPE_CHECKING:
    from scraper.db.pg import Connection

_NOW = "extract(epoch FROM clock_timestamp())::float8"

TAKE = f"""
WITH up AS (
    UPDATE domains SET slot_at = GREATEST(slot_at, {_NOW}) + %(interval)s
    WHERE domain = %(domain)s AND slot_at - {_NOW} <= %(tolerance)s
    RETURNING 1)
SELECT CASE WHEN EXISTS (SELECT 1 FROM up) THEN 0.0
            ELSE (SELECT GREATEST(0.001, slot_at - {_NOW} - %(tolerance)s) FROM domains WHERE domain = %(domain)s)
       END"""

WAIT = f"SELECT GREATEST(0.0, slot_at - {_NOW} - %(tolerance)s) FROM domains WHERE domain = %(domain)s"

# only a clock stepped back (the database's) leaves a slot more than `margin.CLOCK_STEP_S` past a whole
# interval and the tolerance (a slower rate's wait, before a change of rate, is less): the schedule starts
# again from now instead of waiting out the step
CLAMP = f"""UPDATE domains SET slot_at = {_NOW} + %(tolerance)s + %(interval)s
            WHERE domain = %(domain)s AND slot_at - {_NOW} > %(tolerance)s + %(interval)s + %(step)s"""

ENSURE = "INSERT INTO domains (domain, updated_at) VALUES (%(domain)s, 0) ON CONFLICT (domain) DO NOTHING"


def gcra(rate_per_s: float, burst: int) -> tuple[float, float]:
    """(interval, tolerance) in seconds for `rate_per_s` with `burst`. The tolerance keeps back
    `policy/margin`'s time for the slot-to-arrival delay, a fraction of a unit where that is what it
    is, so a server enforcing exactly (rate, burst) never answers 429."""
    return 1.0 / rate_per_s, margin.tolerance_s(rate_per_s, burst)


def ensure(conn: Connection, domain: str) -> None:
    conn.raw(ENSURE, {"domain": domain})


def take(conn: Connection, domain: str, interval: float, tolerance: float) -> float:
    """Take the domain's slot now: 0.0 when taken, else the seconds until one may be free."""
    params = {"domain": domain, "interval": interval, "tolerance": tolerance}
    wait = conn.raw(TAKE, params).one()[0]
    if wait is not None and wait > interval + margin.CLOCK_STEP_S:
        conn.raw(CLAMP, {**params, "step": margin.CLOCK_STEP_S})
        return interval
    return 0.0 if wait is None else float(wait)


def wait(conn: Connection, domain: str, tolerance: float) -> float:
    """Seconds until the domain's slot is free (0.0: now); takes nothing."""
    row = conn.raw(WAIT, {"domain": domain, "tolerance": tolerance}).fetchone()
    return 0.0 if row is None else float(row[0])
