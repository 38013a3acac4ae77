"""Pure: how much of a site's burst our limiters may use, so that a server enforcing exactly
(rate, burst) as a token bucket never answers 429.

A request reaches the server some time after its slot was granted (process scheduling, a database
round trip, connection set-up, the server's own accept queue). The margin is that time,
`ARRIVAL_JITTER_S`, not a count of requests (issue 31: at 2 requests/s one unit of burst is 500 ms,
against a jitter of milliseconds):
- a GCRA (PostgreSQL's slots, `db/slots`) keeps back exactly that time of its tolerance, a fraction of a
  unit where that is what it is: `tolerance_s`. At 30/s with a burst of 5 it is the 33 ms it always was;
  at n8n.io's 2/s the burst loses a fifth of a unit, not one.
- a sliding log (pyrate-limiter's SQLiteBucket on a SQLite database) counts whole requests, so it keeps
  back the whole units that jitter touches, rounded up (`kept_back`): one under 10/s, three at 30/s. Not
  fewer: a log that uses its whole burst grants the next window's first slots exactly as the server's
  bucket refills, and any arrival later than its slot then meets them there, a 429 (seen at 8/s, burst 2,
  once the burst was kept whole).
The sustained rate is unchanged: only the burst shrinks, never below one.
"""

import math

ARRIVAL_JITTER_S = 0.1   # slot-to-arrival delay absorbed; measured up to ~60 ms on a loaded 2-core CI box


def tolerance_s(rate_per_s: float, burst: int) -> float:
    """A GCRA's tolerance for (rate, burst), less `ARRIVAL_JITTER_S` of margin (never below 0: a burst
    of one). A slot stream it grants, each request arriving up to that late, fits (rate, burst)."""
    return max(0.0, (burst - 1) / rate_per_s - ARRIVAL_JITTER_S)


def kept_back(rate_per_s: float, burst: int) -> int:
    """The whole units of `burst` a sliding log never uses: those `ARRIVAL_JITTER_S` of the rate touches,
    rounded up (at least one), and at most all but one (a burst of one keeps nothing back)."""
    if burst < 2:
        return 0
    return min(burst - 1, max(1, math.ceil(rate_per_s * ARRIVAL_JITTER_S - 1e-9)))


def burst_units(rate_per_s: float, burst: int) -> int:
    """The burst a sliding log allows itself: `burst` less what is kept back, never below one."""
    return max(1, burst - kept_back(rate_per_s, burst))


def jitter_absorbed_s(rate_per_s: float, burst: int) -> float:
    """The slot-to-arrival delay a server enforcing exactly (rate, burst) tolerates from a GCRA's slots."""
    return (burst - 1) / rate_per_s - tolerance_s(rate_per_s, burst)
