"""Pure: how much of a site's burst our limiters may use, so that a server enforcing exactly
(rate, burst) as a token bucket never answers 429.

A request reaches the server some time after its slot was granted (process scheduling, a database
round trip, connection set-up, the server's own accept queue). The margin is that time,
`ARRIVAL_JITTER_S`, kept back from the burst's tolerance, not a count of requests and nothing per request
(issues 31 and 45): both limiters are GCRAs (`db/slots` on PostgreSQL, `db/ratelog` beside a SQLite file),
so at n8n.io's 2/s with a burst of 5 the burst loses a fifth of a unit, not one (four requests at once,
the fifth 100 ms later), and where the burst is worth less than the margin (100/s with a burst of 10)
there is none left to use: every slot comes on the rate's schedule. The sustained rate is never cut: a
slot taken late does not move the next one later.

Why 100 ms is enough: this process's part of the delay is bounded by the stale-slot check
(`stale_after_s`): a slot older than that when its request would leave is not used, another is taken
(`Client._through`). That part once needed 200 ms: a run's first requests, each the first of a freshly
forked process, arrived up to ~120 ms after their slots on a loaded 2-core machine (with a 100 ms margin
and no check, one 429 at 2/s in three short runs). The rest is for the network and the server's own
accept queue (arrivals at the stand-in needed 8-24 ms past the schedule at 20/s). A request that arrives
later than the margin after one that used the whole burst meets an empty bucket, a 429 that pauses the
domain and costs far more than the margin (`test_properties`: a slot stream arriving up to the margin late
always fits).
"""

ARRIVAL_JITTER_S = 0.1   # slot-to-arrival delay absorbed: STALE_S in this process, the rest the network's
STALE_S = 0.05           # a slot older than this when its request would leave is not used: another is taken
STALE_FLOOR_S = 0.01     # ... or than half what the burst absorbs, but never less than this (a PostgreSQL round trip)
STALE_TAKES = 3          # stale slots in a row after which the request goes on the next one whatever its age
# how far past a whole interval and the tolerance a rate slot may lie before it counts as left there by a clock
# stepped back (then the schedule starts again from now): more than any wait a slower rate leaves before a
# change of rate (a 5-minute Crawl-delay), far less than an hour's step
CLOCK_STEP_S = 300.0


def tolerance_s(rate_per_s: float, burst: int) -> float:
    """A GCRA's tolerance for (rate, burst), less `ARRIVAL_JITTER_S` of margin (never below 0: a burst
    of one). A slot stream it grants, each request arriving up to that late, fits (rate, burst)."""
    return max(0.0, (burst - 1) / rate_per_s - ARRIVAL_JITTER_S)


def jitter_absorbed_s(rate_per_s: float, burst: int) -> float:
    """The slot-to-arrival delay a server enforcing exactly (rate, burst) tolerates from a GCRA's slots."""
    return (burst - 1) / rate_per_s - tolerance_s(rate_per_s, burst)


def stale_after_s(rate_per_s: float, burst: int) -> float:
    """How old a granted slot may be when its request leaves: `STALE_S`, or half the delay the site's burst
    absorbs where that is less (100/s with a burst of 5 absorbs 40 ms: 20 ms), so that what remains of the
    delay after the send (the network, the server's accept queue) has the other half; never under
    `STALE_FLOOR_S`, the time from a grant to its send in an ordinary process (a burst of 1 absorbs nothing:
    every slot would be stale, and nothing would ever be sent)."""
    return max(STALE_FLOOR_S, min(STALE_S, jitter_absorbed_s(rate_per_s, burst) / 2))
