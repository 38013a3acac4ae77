"""What a webhook endpoint's answer means, and when to try again (pure: Standard Webhooks' and Svix's rules).

Only a 2xx delivers; a 3xx is a failure and is not followed (the URL needs updating); 410 disables the
endpoint; every other answer, or none, waits for the next step of the endpoint's retry schedule (with
jitter), or longer when the answer says `Retry-After`; past the schedule's end the endpoint is disabled.
"""

import datetime
import email.utils

OK, RETRY, DISABLE = "ok", "retry", "disable"
JITTER = 0.1                # each wait is the schedule's step, give or take 10 %


def verdict(status):
    """OK, RETRY or DISABLE for an HTTP status (None: no answer)."""
    if status is not None and 200 <= status < 300:
        return OK
    return DISABLE if status == 410 else RETRY


def retry_after_s(value, now):
    """The seconds a `Retry-After` value asks for (delay-seconds or an HTTP-date), or None when it is neither."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, when.timestamp() - now)


def next_wait_s(failures, schedule, unit_random, asked=None):
    """Seconds until the next attempt after `failures` failed attempts in a row, or None when the schedule is
    spent (disable the endpoint). `unit_random` in [0, 1) draws the jitter; `asked`: Retry-After's seconds,
    a floor."""
    if failures > len(schedule):
        return None
    step = schedule[failures - 1]
    wait = step * (1 - JITTER + 2 * JITTER * unit_random)
    return max(wait, asked or 0.0)
