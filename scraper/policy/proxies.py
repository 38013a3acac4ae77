"""Pure rules of the proxy pool: which proxy a domain's request takes, how long a failed proxy is
quarantined, when a 403 bans a proxy for a domain, when the run gives a domain up for want of proxies.

The pool sits below the per-domain rate: a request takes its domain's slot first, then a proxy. Nothing
here counts requests against a site; a proxy's health is about the proxy only. Time is passed in."""

import dataclasses
import random
from collections.abc import Mapping, Sequence

GOOD = "good"
QUARANTINED = "quarantined"
QUARANTINE_MAX_S = 3600.0       # the first quarantine (settings.PROXY_QUARANTINE_S) doubles up to this
JITTER = 0.25                   # up to a quarter longer, so proxies that failed together come back apart
BAN_S = 86400.0                 # a 403 through one proxy while another gets answers: that proxy, that domain


@dataclasses.dataclass(frozen=True)
class Health:
    """One proxy's shared state (a `proxies` row)."""

    state: str = GOOD
    streak: int = 0                 # failures in a row
    until: float = 0.0              # quarantined until (wall time)
    down_since: float | None = None  # when the current run of failures began
    requests: int = 0
    failures: int = 0
    bans: Mapping[str, float] = dataclasses.field(default_factory=dict)   # {domain: banned until}


def quarantine_s(streak: int, base_s: float, u: float = 0.0) -> float:
    """The quarantine after the `streak`-th failure in a row: base_s doubling, at most QUARANTINE_MAX_S,
    `u` in [0, 1) adding up to JITTER of it."""
    raw = base_s * 2 ** max(0, min(streak - 1, 30))
    return min(QUARANTINE_MAX_S, raw * (1 + JITTER * u))


def on_failure(h: Health, now: float, base_s: float, rng: random.Random | None = None) -> Health:
    """The proxy failed (refused, reset, no answer, 407, a failed CONNECT, a failed check): quarantined."""
    streak = h.streak + 1
    u = (rng or random).random()
    return dataclasses.replace(h, state=QUARANTINED, streak=streak, until=now + quarantine_s(streak, base_s, u),
                               down_since=h.down_since if h.down_since is not None else now,
                               failures=h.failures + 1)


def on_success(h: Health) -> Health:
    """The proxy carried an answer (any status from the site): good again."""
    if h.state == GOOD and not h.streak:
        return h
    return dataclasses.replace(h, state=GOOD, streak=0, until=0.0, down_since=None)


def banned(h: Health, domain: str, now: float) -> bool:
    return h.bans.get(domain, 0.0) > now


def usable(h: Health, domain: str, now: float) -> bool:
    """Not quarantined (or its quarantine is over) and not banned for `domain`."""
    return h.until <= now and not banned(h, domain, now)


def needs_check(h: Health, now: float) -> bool:
    """Its quarantine is over but nothing has gone through it since: a check URL probes it first."""
    return h.state == QUARANTINED and h.until <= now


def choose(pool: Sequence[str], health: Mapping[str, Health], domain: str, now: float,
           bound: str | None = None, start: int = 0, avoid: frozenset[str] = frozenset()) -> str | None:
    """The proxy (an element of `pool`, `direct` excluded) the next request to `domain` takes: the one the
    worker is bound to while it is usable, else the next usable one round the list from `start`; None
    when none is (then `direct` if the list has it, else the domain waits: `wait_until`)."""
    proxies = [p for p in pool if p != "direct" and p not in avoid]
    ok = [p for p in proxies if usable(health.get(p, Health()), domain, now)]
    if bound in ok:
        return bound
    if not ok:
        return None
    n = len(proxies)
    for i in range(n):
        p = proxies[(start + i) % n]
        if p in ok:
            return p
    return None     # pragma: no cover - ok is a subset of proxies


def wait_until(pool: Sequence[str], health: Mapping[str, Health], domain: str, now: float) -> float:
    """When a proxy of `pool` is next usable for `domain` (a quarantine or a ban ends)."""
    ends = [max(health.get(p, Health()).until, health.get(p, Health()).bans.get(domain, 0.0))
            for p in pool if p != "direct"]
    return max(now, min(ends, default=now))


def bans_on_403(pool: Sequence[str], health: Mapping[str, Health], domain: str, now: float, proxy: str) -> bool:
    """A 403 came through `proxy`: ban it for `domain` (and try another) when another proxy of the pool is
    usable for the domain; a 403 through every one is the site's answer, as without proxies."""
    return any(p != proxy and usable(health.get(p, Health()), domain, now) for p in pool if p != "direct")


def gives_up(pool: Sequence[str], health: Mapping[str, Health], domain: str, now: float,
             give_up_after_s: float) -> bool:
    """Every proxy of `pool` has been unusable for `domain` for `give_up_after_s` without a break, and
    the list has no `direct`: the run gives the domain up (exit 3), as for a site that is down."""
    if "direct" in pool:
        return False
    since = []
    for p in pool:
        h = health.get(p, Health())
        if usable(h, domain, now):
            return False
        if banned(h, domain, now):
            since.append(h.bans[domain] - BAN_S)
        elif h.down_since is not None:
            since.append(h.down_since)
        else:
            return False
    return bool(since) and now - max(since) >= give_up_after_s
