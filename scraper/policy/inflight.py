"""Pure: how many jobs each worker process keeps in flight (its lanes), so that the rate, not the number
of workers, sets the pace.

Little's law: a pool carries `in flight / time a job holds a lane` jobs per second. A lane holds its job
for the answer plus the worker's own work (claim, slot, request log, result: ~12 ms of CPU a job on a
2-core machine, more while it waits for a busy CPU), and the mean answer counts the slow ones: at 20 ms,
with one answer in a hundred taking 3 s, it is 50 ms; `HOLD_S` is 80 ms. `HEADROOM` is measured: at 100/s
with ordinary faults on a loaded 2-core machine, 8 lanes a worker reached 0.80-0.84 of the rate where 4
reached 0.74-0.75 (slow answers cluster, a busy CPU stretches every hold, and a lane waiting for its rate
slot holds its job meanwhile); each lane costs ~2.5 MB. Each lane is a thread of the worker with its own
connection, lease, session and limiter handle: a slow or hanging answer holds only its own lane.
"""

import math

HOLD_S = 0.08       # the mean time a job holds its lane under ordinary faults (50 ms answer, ~30 ms own)
HEADROOM = 4.0      # measured (above): 8 lanes a worker at 100/s, 2 at 20/s, 1 at 2/s, with 4 workers
MAX_LANES = 16      # threads beyond this buy nothing on a 2-core machine (the GIL, the database's writes)


def lanes(rate_per_s: float, workers: int, hold_s: float = HOLD_S) -> int:
    """Jobs in flight per worker for a pool of `workers` processes to carry `rate_per_s` (the run's total:
    the sum of its domains' rates), each job holding its lane `hold_s` on average; at least one."""
    need = rate_per_s * hold_s * HEADROOM / workers
    return max(1, min(MAX_LANES, math.ceil(need - 1e-9)))
