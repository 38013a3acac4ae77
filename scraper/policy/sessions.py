"""Pure: which remote browser session a job's page goes to, a new one, or none yet.

A session is a connection to a browser elsewhere (a CDP endpoint, a provider's session). `pick` answers
for one page: a session's id, NEW (open one more) or WAIT (a capacity wait: the provider, not the site, is
full). It never picks an unhealthy session or a full one (as many pages at once as its capacity, or its
`session_pages` already done or under way: it is being retired), never asks for a session past
`max_sessions`, and never spreads one domain over more sessions than its rate can feed (`domain_cap`).
Existing sessions are used before a new one is asked for: a provider bills each session (Browserbase, one
minute at least) and a new one costs a connection and a browser.

Strategies, among the sessions that may take the page:
- `round-robin`: the `turn`-th, in the order of their ids (the caller counts the turns);
- `least-loaded`: the one with the fewest pages under way for its capacity, then the fewest done;
- `domain-affinity`: rendezvous (highest-random-weight) hashing of (domain, session id): a domain keeps its
  session while it lives and may take pages; removing a session moves only the domains it held.

A caller that renders on its own session only (`own`: a worker holds one connection, one page at a time) gets
its own whenever it may take the page; any other session's id is, for it, a wait for that session's worker.
"""

import dataclasses
import hashlib
import math

STRATEGIES = ("round-robin", "least-loaded", "domain-affinity")
NEW = "new"
WAIT = "wait"


@dataclasses.dataclass(frozen=True)
class Session:
    """What the picker knows of one session: its id, whether it is healthy, the pages it renders now
    (`active`) out of `capacity` at once, the pages it has done, and the domains of its pages under way."""

    id: str
    healthy: bool = True
    active: int = 0
    capacity: int = 1
    pages: int = 0
    domains: frozenset = frozenset()


def domain_cap(rate_per_s: float, page_s: float, requests_per_page: float) -> int:
    """The sessions one domain can keep busy (Little's law): its rate carries rate / requests_per_page pages
    a second, each in a session for page_s seconds (rate waits excluded), rounded up; at least 1. More only
    queue in the route handlers, their pages' deadlines running."""
    need = rate_per_s * page_s / max(requests_per_page, 1.0)
    return max(1, math.ceil(need - 1e-9))


def takes_page(session: Session, session_pages: int) -> bool:
    """Whether `session` may take one more page: healthy, below its capacity, and not done with its pages."""
    return (session.healthy and session.active < session.capacity
            and session.pages + session.active < session_pages)


def pick(domain: str, sessions: tuple[Session, ...] | list[Session], *, max_sessions: int, session_pages: int,
         strategy: str, cap: int, turn: int = 0, own: str | None = None) -> str:
    """A session id, NEW or WAIT for one page of `domain` (see the module's docstring); `cap` is the
    domain's `domain_cap`, `turn` the caller's count of pages handed out (round-robin). `own`: the caller's
    session, when it renders on that one only (a worker's one connection): the answer whenever it may take the
    page, whatever the strategy (another's would send the page from worker to worker)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}")
    serving = [s for s in sessions if domain in s.domains]
    # at its cap a domain stays on the sessions it already has
    pool = serving if len(serving) >= cap else list(sessions)
    free = sorted((s for s in pool if takes_page(s, session_pages)), key=lambda s: s.id)
    if free:
        if own in {s.id for s in free}:
            return own
        if strategy == "round-robin":
            return free[turn % len(free)].id
        if strategy == "least-loaded":
            return min(free, key=lambda s: (s.active / s.capacity, s.active, s.pages, s.id)).id
        return max(free, key=lambda s: (weight(domain, s.id), s.id)).id
    if len(sessions) < max_sessions and len(serving) < cap:
        return NEW
    return WAIT


def weight(domain: str, session_id: str) -> int:
    """Rendezvous hashing's weight of (domain, session): the same in every process and run (not `hash()`)."""
    digest = hashlib.blake2b(f"{domain}\0{session_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")
