"""Pure: how many jobs each worker process keeps in flight (its lanes), so that the rate, not the number
of workers, sets the pace.

Little's law: a pool carries `in flight / time a job holds a lane` jobs per second. A lane holds its job
for the answer plus the worker's own work (claim, lease, slot, request log, result: ~20 ms on a 2-core
machine), and the mean answer counts the slow ones: at 20 ms, with one answer in a hundred taking 3 s,
it is 50 ms. So 100/s asks for 7 jobs in flight on average; `HEADROOM` doubles that, as slow answers come
in clusters and a lane that waits for its rate slot holds its job meanwhile. Each lane is a thread of the
worker with its own connection, lease, session and limiter handle: a slow or hanging answer holds only
its own lane.
"""

import math

HOLD_S = 0.07       # the mean time a job holds its lane under ordinary faults (50 ms answer, 20 ms own)
HEADROOM = 2.0      # slow answers cluster; a lane waiting for its slot holds its job
MAX_LANES = 16      # threads beyond this buy nothing on a 2-core machine (the GIL, the database's writes)


def lanes(rate_per_s: float, workers: int, hold_s: float = HOLD_S) -> int:
    """Jobs in flight per worker for a pool of `workers` processes to carry `rate_per_s` (the run's total:
    the sum of its domains' rates), each job holding its lane `hold_s` on average; at least one."""
    need = rate_per_s * hold_s * HEADROOM / workers
    return max(1, min(MAX_LANES, math.ceil(need - 1e-9)))
