"""Per-domain circuit breaker: a pure state machine; its state lives in the `domains` table."""

from dataclasses import dataclass, replace

CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half_open"


@dataclass(frozen=True)
class Breaker:
    """One domain's breaker (and its 429 pause, kept beside it in the same row)."""

    state: str = CLOSED
    failures: int = 0
    open_until: float = 0.0
    probe_until: float = 0.0
    paused_until: float = 0.0
    pause_s: float = 0.0
    open_cycles: int = 0        # probes that failed in a row
    gave_up: bool = False       # this run stopped trying the domain (its jobs stay pending)
    opened_at: float = 0.0      # when the breaker opened, after it was last closed (the give-up rule)

OPEN_MAX_S = 600.0          # the open period doubles after each failed probe, up to 10 minutes


def open_period(open_s, cycles):
    """The open period after `cycles` failed probes in a row: doubled after each, capped."""
    return min(OPEN_MAX_S, open_s * 2 ** min(cycles, 30))


def gives_up(cycles, opened_at, now, max_open_cycles, give_up_after_s):
    """Give up a domain on an outage, not on a blip: `max_open_cycles` failed probes in a row and its
    breaker open for at least `give_up_after_s`."""
    return (max_open_cycles is not None and cycles >= max_open_cycles
            and now - opened_at >= (give_up_after_s or 0.0))


def admits(b, now):
    """'yes' (take jobs), 'probe' (one job may test the domain) or 'no'."""
    if b.gave_up or b.paused_until > now:
        return "no"
    if b.state == CLOSED:
        return "yes"
    if b.state == OPEN:
        return "probe" if b.open_until <= now else "no"
    # half-open: one probe at a time; a probe whose worker died expires with its lease
    return "probe" if b.probe_until <= now else "no"


def rest_s(b, now):
    """Seconds until a request with no job to hand back (a walk's) may test the domain: while it is open
    (given up or not) and its period is not over, or half-open with a probe in flight; 0.0 otherwise (a 429
    pause is waited out, not rested)."""
    if b.state == OPEN:
        return max(0.0, b.open_until - now)
    if b.state == HALF_OPEN:
        return max(0.0, b.probe_until - now)
    return 0.0


def on_probe(b, now, lease_s):
    """A worker took the probe job."""
    return replace(b, state=HALF_OPEN, probe_until=now + lease_s)


def on_success(b):
    """A request got an answer from the server (any status but 5xx/429)."""
    return replace(b, state=CLOSED, failures=0, open_until=0.0, probe_until=0.0, pause_s=0.0, open_cycles=0,
                   gave_up=False, opened_at=0.0)


def on_failure(b, now, threshold, open_s, max_open_cycles=None, give_up_after_s=0.0):
    """A request failed in a way that speaks of the server (network, timeout, 5xx).

    A failed probe reopens the breaker for twice as long as before (`open_period`); the domain is given
    up (no more probes this run) only by `gives_up`."""
    failures = b.failures + 1
    if b.state == HALF_OPEN:
        cycles = b.open_cycles + 1
        opened_at = b.opened_at or now
        return replace(b, state=OPEN, failures=failures, open_until=now + open_period(open_s, cycles),
                       probe_until=0.0, open_cycles=cycles, opened_at=opened_at,
                       gave_up=gives_up(cycles, opened_at, now, max_open_cycles, give_up_after_s))
    if failures >= threshold:
        return replace(b, state=OPEN, failures=failures, open_until=now + open_s, probe_until=0.0,
                       opened_at=b.opened_at or now)
    return replace(b, failures=failures)


def on_blocked(b, now, open_s, max_open_cycles=None, give_up_after_s=0.0):
    """The site refuses this address outright: open at once, whatever the count of failures. A probe that
    meets a block is a failed probe (it counts towards giving the domain up)."""
    cycles = b.open_cycles + 1 if b.state == HALF_OPEN else b.open_cycles
    opened_at = b.opened_at or now
    # a block met by a request that was in flight when the domain was given up does not undo that
    gave_up = b.gave_up or (b.state == HALF_OPEN and gives_up(cycles, opened_at, now, max_open_cycles,
                                                             give_up_after_s))
    return replace(b, state=OPEN, failures=b.failures + 1, open_until=now + open_period(open_s, cycles),
                   probe_until=0.0, open_cycles=cycles, gave_up=gave_up, opened_at=opened_at)


def on_give_up(b, now, until):
    """This run sends nothing more to the domain until `until` (its robots.txt, or every proxy, stayed
    unusable): open, no probe, given up; its jobs stay pending for the next run (`on_new_run`)."""
    return replace(b, state=OPEN, open_until=until, probe_until=0.0, gave_up=True, opened_at=b.opened_at or now)


def on_new_run(b):
    """A new run gives a given-up domain another chance: it may probe at once."""
    return replace(b, gave_up=False, open_cycles=0, open_until=0.0, opened_at=0.0) if b.gave_up else b


def on_429(b, now, retry_after_s, default_s, max_s):
    """The server said slow down: pause the domain for Retry-After, or a pause that doubles."""
    pause = min(max_s, retry_after_s if retry_after_s is not None else max(default_s, b.pause_s * 2))
    # a probe that met a 429 is over: after the pause another may test the domain
    return replace(b, paused_until=max(b.paused_until, now + pause), pause_s=pause, probe_until=0.0)


def on_probe_abandoned(b):
    """The probe job was handed back unfinished: let another worker probe at once."""
    return replace(b, probe_until=0.0) if b.state == HALF_OPEN else b
