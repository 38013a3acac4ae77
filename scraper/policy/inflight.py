"""Pure: how many jobs each worker process keeps in flight (its lanes), so that the rate, not the number
of workers, sets the pace.

Little's law: a pool carries `in flight / time a job holds a lane` jobs per second. A lane holds its job
for the answer plus the worker's own work (claim, slot, request log, result: ~12 ms of CPU a job on a
2-core machine, more while it waits for a busy CPU), and the mean answer counts the slow ones: at 20 ms,
with one answer in a hundred taking 3 s, it is 50 ms; `HOLD_S` is 80 ms. `HEADROOM` is 1 for now: with 4 (measured
at 100/s with ordinary faults on a loaded 2-core machine: 8 lanes a worker reached 0.80-0.84 of the rate
where 4 reached 0.74-0.75) the PostgreSQL test of two run groups at 30/s, one killed and restarted, met one
429 in one CI run of two: 24 lanes, each the first request of a fresh thread, on 2 cores. Until that is
understood, lanes come only where Little's law itself asks for them (2 a worker at 100/s with 4 workers,
1 below 50/s); `--inflight` sets more. Each lane costs ~2.5 MB. Each lane is a thread of the worker with its own
connection, lease, session and limiter handle: a slow or hanging answer holds only its own lane.
"""

import math

HOLD_S = 0.08       # the mean time a job holds its lane under ordinary faults (50 ms answer, ~30 ms own)
HEADROOM = 1.0      # (above): 2 lanes a worker at 100/s with 4 workers, 1 below 50/s; 4.0 gave 8 and a 429
MAX_LANES = 16      # threads beyond this buy nothing on a 2-core machine (the GIL, the database's writes)


def lanes(rate_per_s: float, workers: int, hold_s: float = HOLD_S) -> int:
    """Jobs in flight per worker for a pool of `workers` processes to carry `rate_per_s` (the run's total:
    the sum of its domains' rates), each job holding its lane `hold_s` on average; at least one."""
    need = rate_per_s * hold_s * HEADROOM / workers
    return max(1, min(MAX_LANES, math.ceil(need - 1e-9)))
