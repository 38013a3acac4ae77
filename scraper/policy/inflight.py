"""Pure: how many jobs each worker process keeps in flight (its lanes), so that the rate, not the number
of workers, sets the pace, and a slow answer never holds the others back.

Little's law: a pool carries `in flight / time a job holds a lane` jobs per second. A lane holds its job
for the answer plus the worker's own work (claim, slot, request log, result: ~12 ms of CPU a job on a
2-core machine, more while it waits for a busy CPU), and the mean answer counts the slow ones: at 20 ms,
with one answer in a hundred taking 3 s, it is 50 ms; `HOLD_S` is 80 ms. The mean is not enough: slow
answers come in clusters (issue 45: at 20/s, four 3 s answers within 45 templates held all four
single-lane workers and the site got nothing for 1.4 s), so the pool keeps `HEADROOM` times what Little's
law asks, and never fewer than `MIN_LANES` a worker. Extra lanes cost ~2.5 MB each and send nothing the
rate does not allow: each takes its rate slot like any request, and a slot that went stale before its
request could leave is not used (`policy.margin.STALE_S`; a freshly started lane's first request was
the late one that once met a 429 with 24 lanes). `--inflight` sets the number. Each lane is a thread of
the worker with its own connection, lease, session and limiter handle.
"""

import math

HOLD_S = 0.08       # the mean time a job holds its lane under ordinary faults (50 ms answer, ~30 ms own)
HEADROOM = 2.0      # (above): the tail of slow answers, not only their mean
MIN_LANES = 2       # a slow answer in one lane leaves the worker another
MAX_LANES = 16      # threads beyond this buy nothing on a 2-core machine (the GIL, the database's writes)


def lanes(rate_per_s: float, workers: int, hold_s: float = HOLD_S) -> int:
    """Jobs in flight per worker for a pool of `workers` processes to carry `rate_per_s` (the run's total:
    the sum of its domains' rates), each job holding its lane `hold_s` on average; at least MIN_LANES."""
    need = rate_per_s * hold_s * HEADROOM / workers
    return max(MIN_LANES, min(MAX_LANES, math.ceil(need - 1e-9)))
