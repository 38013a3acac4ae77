"""Pure: how much of a site's burst our limiters may use, so that a server enforcing exactly
(rate, burst) as a token bucket never answers 429.

A request reaches the server some time after its slot was granted (process scheduling, a database
round trip, connection set-up, the server's own accept queue). Slots spaced by the rate, with `units`
of burst, arrive as a stream that conforms to (rate, units + rate * delay) for any delay up to `delay`;
so keeping back `rate * ARRIVAL_JITTER_S` units (at least one) absorbs that much jitter. At n8n.io's
2 requests/s that is the one unit kept back all along; at 30/s with a burst of 5 it is three. The
sustained rate is unchanged: only the burst shrinks, never below one.
"""

import math

ARRIVAL_JITTER_S = 0.1   # slot-to-arrival delay absorbed; measured up to ~60 ms on a loaded 2-core CI box


def kept_back(rate_per_s: float, burst: int) -> int:
    """The units of `burst` never used: enough for `ARRIVAL_JITTER_S` of delay, at least one, and at
    most all but one (a burst of 1 keeps nothing back: it cannot shrink)."""
    if burst < 2:
        return 0
    return min(burst - 1, max(1, math.ceil(rate_per_s * ARRIVAL_JITTER_S - 1e-9)))


def burst_units(rate_per_s: float, burst: int) -> int:
    """The burst our limiter allows itself: `burst` less what is kept back, never below one."""
    return max(1, burst - kept_back(rate_per_s, burst))


def jitter_absorbed_s(rate_per_s: float, burst: int) -> float:
    """The slot-to-arrival delay a server enforcing exactly (rate, burst) tolerates from our slots."""
    return (burst - burst_units(rate_per_s, burst)) / rate_per_s
