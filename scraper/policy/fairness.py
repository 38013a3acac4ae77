"""Pure: which domains a worker may claim a job from, so that no worker sleeps on a slow domain's slot
while a faster domain could send.

A domain's jobs in flight are capped by what its rate can serve soon: a new job of the domain would
send its first request only after the requests its jobs in flight still owe (each counted whole, as a
worker cannot tell how far a library's call got: a YouTube transcript is three requests). A domain
whose new job would send within `SHORT_WAIT_S` can take it now; one whose job would wait longer takes a
worker only when it has no job in flight (that one job keeps every slot of a slow domain in use), and
domains whose jobs sleep between requests never hold more than `workers - 1` workers together.
"""

import dataclasses

SHORT_WAIT_S = 1.0      # a job that sends within this is "ready now" (an n8n slot comes every 0.5 s)


@dataclasses.dataclass(frozen=True)
class Demand:
    """What a worker knows of one domain before it claims: its rate slot and its jobs' shape."""

    wait_s: float               # until the domain's rate bucket has a slot (0.0: now)
    rate_per_s: float           # the domain's effective rate
    requests_per_job: int = 1   # a typical job's requests (a transcript: 3)

    @property
    def sleeps(self):
        """Its jobs wait for a slot between their own requests: a worker holding one mostly sleeps."""
        return (self.requests_per_job - 1) / self.rate_per_s > SHORT_WAIT_S


@dataclasses.dataclass(frozen=True)
class Plan:
    now: tuple          # domains to claim from at once, the job order (priority) decides between them
    later: tuple        # then one by one, soonest first, when `now` had no runnable job
    held: tuple = ()    # sleeping domains with no job, kept for when nothing else is runnable: the sleeping
                        # domains already hold all but one worker


def ready_in_s(demand, in_flight):
    """Seconds until a new job of the domain could send its first request."""
    return demand.wait_s + in_flight * demand.requests_per_job / demand.rate_per_s


def plan(demands, in_flight, workers):
    """The claim's plan from {domain: Demand}, {domain: jobs running} and the pool's size."""
    sleeping = sum(n for d, n in in_flight.items() if d in demands and demands[d].sleeps)
    now, later, held = [], [], []
    for domain, demand in demands.items():
        n = in_flight.get(domain, 0)
        ready = ready_in_s(demand, n)
        if demand.sleeps and n == 0 and sleeping >= workers - 1:
            held.append((ready, domain))
            continue
        if ready <= SHORT_WAIT_S:
            now.append(domain)
        elif n == 0:
            later.append((ready, domain))
    return Plan(tuple(sorted(now)), tuple(d for _, d in sorted(later)), tuple(d for _, d in sorted(held)))
