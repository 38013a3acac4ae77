"""Pure: how many jobs each worker process keeps in flight (its lanes), so that the rate, not the number
of workers, sets the pace, and a slow answer never holds the others back.

Little's law: a pool carries `in flight / time a job holds a lane` jobs per second. A lane holds its job
for the answer plus the worker's own work (claim, slot, request log, result: ~12 ms of CPU a job on a
2-core machine, more while it waits for a busy CPU), and the mean answer counts the slow ones: at 20 ms,
with one answer in a hundred taking 3 s, it is 50 ms; `HOLD_S` is 80 ms. The mean is not enough at low
rates: slow answers come in clusters (issue 45: at 20/s, four 3 s answers within 45 templates held all four
single-lane workers and the site got nothing for 1.4 s), so a worker never keeps fewer than `MIN_LANES`.
`HEADROOM` is 1.5: exactly what Little's law asks leaves no room for the answers' spread (a queue at full
use), and at 100/s with ordinary faults 2 lanes a worker carried 94/s (a job held its lane ~85 ms), 3 lanes
97/s, 4 lanes 97.7/s (6,000 templates, 4 workers, efficiency 0.94, 0.97, 0.977).
Lanes are threads of one process: one that got its slot waits for the GIL while the others parse and store,
and under CPU load that wait spends what the burst absorbs (40 ms at 100/s with a burst of 5). The PostgreSQL
test of a run through database restarts (tests/faults, 2 workers at 100/s, burst 5) beside two CPU-bound
processes met 429s in 6 runs of 16 with 6 lanes a worker, 1 of 12 with 5, 0 of 16 with 4: `MAX_LANES` is 4,
and a run that needs more in flight takes more workers (at 100/s, 4 workers of 3 lanes: 0 429s in issue 44's
acceptance through 3 restarts, 3 runs of 3). Each lane takes
its rate slot like any request, and a slot that went stale before its request could leave is not used
(`policy.margin.stale_after_s`). `--inflight` sets the number.
Each lane is a thread of the worker with its own connection, lease, session and limiter handle (~2.5 MB).
"""

import math

HOLD_S = 0.08       # the mean time a job holds its lane under ordinary faults (50 ms answer, ~30 ms own)
HEADROOM = 1.5      # (above): room for the spread of answer times; MIN_LANES covers slow clusters at low rates
MIN_LANES = 2       # a slow answer in one lane leaves the worker another
MAX_LANES = 4       # (above): a worker with more waits for its GIL between a slot and its send; more workers
                    # carry more


def lanes(rate_per_s: float, workers: int, hold_s: float = HOLD_S) -> int:
    """Jobs in flight per worker for a pool of `workers` processes to carry `rate_per_s` (the run's total:
    the sum of its domains' rates), each job holding its lane `hold_s` on average; at least MIN_LANES."""
    need = rate_per_s * hold_s * HEADROOM / workers
    return max(MIN_LANES, min(MAX_LANES, math.ceil(need - 1e-9)))
