"""Pure policy: what kind of failure an answer is, what happens to the job, how long to wait."""

import random
from dataclasses import dataclass

BACKOFF_MAX_S = 600.0       # no retry waits longer than 10 minutes, whatever the attempt or Retry-After

# failure kinds (stored in jobs.error_kind and counted in status)
NETWORK = "network"
TIMEOUT = "timeout"
HTTP_429 = "http_429"
HTTP_5XX = "http_5xx"
HTTP_4XX = "http_4xx"
PARSE = "parse"
BLOCKED = "blocked"          # the site refuses this address (YouTube's bot check): the domain's, not the job's
TOO_LARGE = "too_large"     # over --max-answer-mb once decoded: final, the same answer would come again
INTERNAL = "internal"       # anything else that went wrong while one job was processed (a bug, a hostile answer)
ABANDONED = "abandoned"     # the worker died holding the job (killed, crashed, over memory)
INCOMPLETE = "incomplete"   # a catalogue page lacks a required field: final, the same page would come again
ROBOTS = "robots"           # the host's robots.txt disallows the URL: final, `invalid`, nothing was sent
PROXY = "proxy"             # no proxy of the pool could carry the request (the proxies', not the job's)
# a remote browser endpoint refused every session for browser_wait: down, not full (the endpoint's, not the job's
# nor the site's); `retry --failed` (cron's update) tries the job again
BROWSER_UNAVAILABLE = "browser_unavailable"
KINDS = (NETWORK, TIMEOUT, HTTP_429, HTTP_5XX, HTTP_4XX, PARSE, BLOCKED, TOO_LARGE, INTERNAL, ABANDONED, INCOMPLETE,
         ROBOTS, PROXY, BROWSER_UNAVAILABLE)

GONE = (404, 410)            # the template is not there: final, `invalid`
FORBIDDEN = (401, 403)       # retrying will not help: final, `failed` with the reason kept
BREAKER_KINDS = (NETWORK, TIMEOUT, HTTP_5XX)  # a sick server, not a bad job

RETRY = "retry"
FAILED = "failed"
INVALID = "invalid"


@dataclass(frozen=True)
class Outcome:
    """What to do with a job after a failure: `action` is retry, failed or invalid."""

    action: str
    delay_s: float = 0.0
    counted: bool = True    # whether the attempt counts against --max-attempts


def decide(kind, status, attempts, max_attempts, retry_after_s=None, base_s=1.0, max_s=BACKOFF_MAX_S, rng=random,
           probe=False):
    """The outcome of the `attempts`-th failed attempt (1-based); `probe`: it tested a half-open domain."""
    if probe and kind in BREAKER_KINDS:
        # a failed probe speaks of the domain, not the job: the breaker reopens, the job waits uncharged
        return Outcome(RETRY, 0.0, counted=False)
    if status in GONE:
        return Outcome(INVALID)
    if status in FORBIDDEN or kind in (TOO_LARGE, INCOMPLETE):
        return Outcome(FAILED)
    if kind == BROWSER_UNAVAILABLE:
        # the run cannot render it: it ends failed for a later run, its attempt given back
        return Outcome(FAILED, counted=False)
    if kind == BLOCKED:
        # the domain's breaker is open (breaker.on_blocked) and holds the job back; no attempt is spent
        return Outcome(RETRY, 0.0, counted=False)
    if kind == PROXY:
        # the pool's fault: the job waits for a proxy (`retry_after_s`: the next one usable), uncharged
        return Outcome(RETRY, min(max_s, retry_after_s or 0.0), counted=False)
    if kind == HTTP_429:
        # "slow down" says nothing against the job: the domain pauses (breaker.on_429) and the job
        # waits without spending an attempt
        return Outcome(RETRY, min(max_s, base_s if retry_after_s is None else retry_after_s), counted=False)
    # every other failure (400 and the other 4xx included: not final, unlike 401/403) is retried until
    # attempts run out
    if attempts >= max_attempts:
        return Outcome(FAILED)
    delay = backoff(attempts, base_s, max_s, rng)
    if retry_after_s is not None:
        delay = min(max_s, max(delay, retry_after_s))
    return Outcome(RETRY, delay)


def backoff(attempt, base_s=1.0, max_s=BACKOFF_MAX_S, rng=random):
    """base, 2*base, 4*base ... for attempt 1, 2, 3 ..., capped, with +-20% jitter so workers spread out."""
    exponent = min(max(0, attempt - 1), 60)       # 2**60 s is past any cap; no float overflow
    return min(max_s, base_s * (2 ** exponent) * rng.uniform(0.8, 1.2))


def parse_retry_after(value, now):
    """Seconds to wait from a Retry-After header (delta seconds or an HTTP date), or None."""
    import email.utils  # only for an answer that carries Retry-After

    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)
