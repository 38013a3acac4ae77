"""Pure politeness rules beyond a fixed rate: what a robots.txt answer means (RFC 9309), the rate a
domain may use (configured, robots.txt, adaptive), and the adaptive slow-down. No I/O; time passed in."""

import dataclasses
import statistics

# RFC 9309 outcomes of fetching a robots.txt
RULES = "rules"             # 2xx: its rules apply
ALLOW_ALL = "allow_all"     # 4xx but 429: no rules, everything allowed
UNAVAILABLE = "unavailable"  # 5xx, 429 or no answer: the host is fully disallowed (after retries)

REUSE_S = 24 * 3600.0       # a 2xx/4xx robots.txt is reused this long by every process and command

# why a domain's rate is below its configured rate (`status --json` rate_reason)
ROBOTS = "robots"
ADAPTIVE = "adaptive"

# the adaptive slow-down (issue 31: a healthy site with ordinary faults, read by a busy client, is never slowed)
WINDOW = 40                 # answers in "the last" sample and in the baseline (the run's first answers)
SLOW_FACTOR = 3.0           # the median answer time above this many baselines: the site struggles...
SLOW_FLOOR_MS = 200.0       # ...and above this: a site answering faster is not struggling, whatever the ratio
                            # (scheduling noise on a loaded 2-core client alone moves a 5-40 ms median)
SHARE_503 = 0.20            # more than this share of the last WINDOW answers 503: the site struggles (3 % is
                            # ordinary; 9 of 40 at 3 % happens about once in 10^5 windows)
FLOOR_SHARE = 0.1           # never below a tenth of the configured rate

def outcome_of(status):
    """The RFC 9309 outcome of a robots.txt answer's HTTP status (None: no answer at all)."""
    if status is None or status == 429 or status >= 500:
        return UNAVAILABLE
    if 200 <= status < 300:
        return RULES
    return ALLOW_ALL


def product_token(user_agent):
    """The token matched against robots.txt groups: the User-Agent's text before its first `/`."""
    return user_agent.split("/", 1)[0].strip() or user_agent


def robots_rate(crawl_delay_s, request_rate):
    """The highest rate (requests/s) a robots.txt allows: 1/crawl-delay and requests/seconds, or None."""
    caps = []
    if crawl_delay_s is not None and crawl_delay_s > 0:
        caps.append(1.0 / crawl_delay_s)
    if request_rate is not None:
        requests, seconds = request_rate
        if requests and requests > 0 and seconds and seconds > 0:
            caps.append(requests / seconds)
    return min(caps) if caps else None


@dataclasses.dataclass(frozen=True)
class Rate:
    """A domain's effective rate, its burst, and why it is below the configured one (None: it is not)."""

    rate_per_s: float
    burst: int
    reason: str = None


def effective(configured_per_s, burst, robots_per_s=None, crawl_delay=False, adaptive_per_s=None):
    """The minimum of the configured rate, robots.txt's and the adaptive one: they only ever lower it.
    A crawl delay asks for one request at a time: the burst is 1."""
    rate, reason = configured_per_s, None
    if robots_per_s is not None and robots_per_s < rate:
        rate, reason = robots_per_s, ROBOTS
    if adaptive_per_s is not None and adaptive_per_s < rate:
        rate, reason = adaptive_per_s, ADAPTIVE
    return Rate(rate, 1 if crawl_delay else burst, reason)


@dataclasses.dataclass(frozen=True)
class Answers:
    """What the adaptive rule reads of a domain's answers in this run."""

    count: int                  # answers so far in this run
    baseline_ms: float | None   # median time of its first WINDOW answers (None until there are WINDOW)
    last_ms: tuple              # times of its last WINDOW answers
    last_503: int               # how many of those were 503


def struggling(a):
    """The reason the site struggles ('slow', '503'), or None.

    Robust on purpose: the median of WINDOW answers ignores a few slow ones (a 3 s answer in a hundred),
    the absolute floor ignores a fast site whose times merely doubled, and the 503 share needs a full
    window, so one 503 in thirty never reads as a struggle."""
    if len(a.last_ms) < WINDOW:
        return None
    if a.last_503 > SHARE_503 * len(a.last_ms):
        return "503"
    median = statistics.median(a.last_ms)
    if a.baseline_ms is not None and median > max(SLOW_FLOOR_MS, SLOW_FACTOR * a.baseline_ms):
        return "slow"
    return None


def adapt(configured_per_s, current_per_s, mark, a, dt_s, recover_s):
    """(new adaptive rate or None when at the configured rate, new mark, why) after `dt_s` seconds.

    Halved (floor a tenth of the configured rate) at most once per WINDOW new answers while the site
    struggles (`mark`: the answer count at the last halving); climbs back linearly within `recover_s`
    once it no longer does."""
    current = configured_per_s if current_per_s is None else current_per_s
    why = struggling(a)
    floor = configured_per_s * FLOOR_SHARE
    if why:
        if (mark is None or a.count - mark >= WINDOW) and current > floor:
            return max(floor, current / 2), a.count, why
        return current_per_s, mark, None
    if current_per_s is None:
        return None, mark, None
    up = current + configured_per_s * (1 - FLOOR_SHARE) * dt_s / recover_s
    if up >= configured_per_s:
        return None, mark, "recovered"
    return up, mark, None
