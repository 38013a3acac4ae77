"""The pure policy functions: failure kinds, retry decisions, backoff, Retry-After, breaker, progress, rates."""

import email.utils
import random
from fractions import Fraction

import pytest
import requests

from scraper.base.clock import FakeClock
from scraper.net import http
from scraper.policy import breaker, inflight, progress, retry
from scraper.policy.breaker import Breaker
from scraper.politeness import limiter

NOW = 1_700_000_000.0


# --- failure kinds -------------------------------------------------------------------------------

@pytest.mark.parametrize("status, kind", [
    (200, None), (204, None), (299, None),
    (429, retry.HTTP_429),
    (500, retry.HTTP_5XX), (502, retry.HTTP_5XX), (503, retry.HTTP_5XX), (599, retry.HTTP_5XX),
    (400, retry.HTTP_4XX), (401, retry.HTTP_4XX), (403, retry.HTTP_4XX), (404, retry.HTTP_4XX),
    (410, retry.HTTP_4XX), (418, retry.HTTP_4XX),
])
def test_kind_of_status(status, kind):
    assert http.kind_of_status(status) == kind


@pytest.mark.parametrize("exc, kind", [
    (requests.Timeout("slow"), retry.TIMEOUT),
    (requests.ReadTimeout("slow read"), retry.TIMEOUT),
    (requests.ConnectTimeout("slow connect"), retry.TIMEOUT),
    (requests.ConnectionError("refused"), retry.NETWORK),
    (requests.exceptions.ChunkedEncodingError("cut"), retry.NETWORK),
    (requests.exceptions.ContentDecodingError("bad gzip"), retry.PARSE),
    (requests.exceptions.JSONDecodeError("bad", "{", 0), retry.PARSE),
    (ValueError("bad"), retry.PARSE),
    (requests.RequestException("other"), retry.NETWORK),
])
def test_kind_of_exception(exc, kind):
    assert http.kind_of_exception(exc) == kind


# --- decide --------------------------------------------------------------------------------------

@pytest.mark.parametrize("status", [404, 410])
def test_gone_is_invalid_on_the_first_attempt(status):
    assert retry.decide(retry.HTTP_4XX, status, 1, 3).action == retry.INVALID


@pytest.mark.parametrize("status", [401, 403])
def test_forbidden_is_failed_on_the_first_attempt(status):
    assert retry.decide(retry.HTTP_4XX, status, 1, 3).action == retry.FAILED


@pytest.mark.parametrize("kind, status", [
    (retry.HTTP_5XX, 500), (retry.HTTP_5XX, 503), (retry.NETWORK, None),
    (retry.TIMEOUT, None), (retry.PARSE, 200), (retry.HTTP_4XX, 400), (retry.HTTP_4XX, 418),
])
def test_retryable_failures_retry_until_max_attempts_then_fail(kind, status):
    for attempt in (1, 2):
        outcome = retry.decide(kind, status, attempt, 3, rng=random.Random(1))
        assert outcome.action == retry.RETRY
        assert outcome.delay_s > 0
    assert retry.decide(kind, status, 3, 3).action == retry.FAILED
    assert retry.decide(kind, status, 4, 3).action == retry.FAILED


def test_a_429_is_rescheduled_without_spending_an_attempt():
    for attempt in (1, 3, 10):
        outcome = retry.decide(retry.HTTP_429, 429, attempt, 3, retry_after_s=4)
        assert (outcome.action, outcome.delay_s, outcome.counted) == (retry.RETRY, 4, False)
    assert retry.decide(retry.HTTP_429, 429, 1, 3, base_s=1.0).delay_s == 1.0
    assert retry.decide(retry.HTTP_5XX, 503, 1, 3).counted


def test_decide_delay_is_the_backoff_of_the_attempt():
    outcome = retry.decide(retry.HTTP_5XX, 500, 2, 5, base_s=1.0, rng=random.Random(3))
    assert outcome.delay_s == retry.backoff(2, 1.0, 600.0, random.Random(3))


def test_retry_after_raises_the_delay():
    outcome = retry.decide(retry.HTTP_5XX, 503, 1, 3, retry_after_s=30.0, rng=random.Random(1))
    assert outcome == retry.Outcome(retry.RETRY, 30.0)


def test_retry_after_shorter_than_backoff_does_not_lower_it():
    outcome = retry.decide(retry.HTTP_5XX, 503, 3, 5, retry_after_s=0.5, base_s=1.0, rng=random.Random(1))
    assert outcome.delay_s == retry.backoff(3, 1.0, 600.0, random.Random(1))
    assert outcome.delay_s >= 4 * 0.8


def test_one_attempt_allowed_means_no_retry():
    assert retry.decide(retry.NETWORK, None, 1, 1).action == retry.FAILED


# --- backoff -------------------------------------------------------------------------------------

@pytest.mark.parametrize("attempt, nominal", [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0)])
def test_backoff_doubles_with_20_percent_jitter(attempt, nominal):
    rng = random.Random(42)
    delays = [retry.backoff(attempt, 1.0, 600.0, rng) for _ in range(500)]
    assert all(0.8 * nominal <= d <= 1.2 * nominal for d in delays)
    assert min(delays) < 0.85 * nominal and max(delays) > 1.15 * nominal   # jitter really spreads


def test_backoff_is_reproducible_with_a_seeded_random():
    assert retry.backoff(2, rng=random.Random(9)) == retry.backoff(2, rng=random.Random(9))


def test_backoff_base_scales_the_delays():
    assert 0.8 * 20 <= retry.backoff(2, base_s=10.0, rng=random.Random(1)) <= 1.2 * 20


def test_backoff_base_zero_means_no_wait():
    assert retry.backoff(5, base_s=0.0, rng=random.Random(1)) == 0.0


def test_backoff_never_exceeds_its_cap():
    rng = random.Random(5)
    delays = [retry.backoff(attempt, 1.0, 600.0, rng) for attempt in range(10, 40) for _ in range(20)]
    assert max(delays) <= 600.0


def test_backoff_of_a_very_high_attempt_is_the_cap_not_an_overflow():
    assert 0 < retry.backoff(2000, 1.0, 600.0, random.Random(1)) <= 600.0


# --- Retry-After ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value, seconds", [("7", 7.0), (" 120 ", 120.0), ("0", 0.0)])
def test_retry_after_in_seconds(value, seconds):
    assert retry.parse_retry_after(value, NOW) == seconds


def test_retry_after_as_http_date_is_relative_to_now():
    value = email.utils.formatdate(NOW + 90, usegmt=True)
    assert retry.parse_retry_after(value, NOW) == pytest.approx(90.0)


def test_retry_after_date_in_the_past_is_zero():
    value = email.utils.formatdate(NOW - 300, usegmt=True)
    assert retry.parse_retry_after(value, NOW) == 0.0


@pytest.mark.parametrize("value", [None, "", "soon", "-5", "1.5e3x", "Fri, 99 Foo 2024 99:99:99 GMT"])
def test_retry_after_garbage_is_none(value):
    assert retry.parse_retry_after(value, NOW) is None


def test_retry_after_superscript_digit_is_none():
    # headers arrive as latin-1: a stray byte 0xB2 is "²", which str.isdigit() accepts and float() refuses
    assert retry.parse_retry_after("\xb2", NOW) is None


# --- breaker -------------------------------------------------------------------------------------

def fail_n(b, n, now=NOW, threshold=3, open_s=60.0):
    for _ in range(n):
        b = breaker.on_failure(b, now, threshold, open_s)
    return b


def test_breaker_stays_closed_below_the_threshold():
    b = fail_n(Breaker(), 2)
    assert b.state == breaker.CLOSED and b.failures == 2
    assert breaker.admits(b, NOW) == "yes"


def test_breaker_opens_after_n_consecutive_failures():
    b = fail_n(Breaker(), 3)
    assert b.state == breaker.OPEN and b.open_until == NOW + 60
    assert breaker.admits(b, NOW) == "no"
    assert breaker.admits(b, NOW + 59.9) == "no"


def test_success_resets_the_consecutive_count():
    b = breaker.on_success(fail_n(Breaker(), 2))
    assert fail_n(b, 2).state == breaker.CLOSED


def test_open_breaker_gives_one_probe_after_open_until():
    b = fail_n(Breaker(), 3)
    assert breaker.admits(b, NOW + 60) == "probe"
    probing = breaker.on_probe(b, NOW + 60, lease_s=90)
    assert probing.state == breaker.HALF_OPEN
    assert breaker.admits(probing, NOW + 61) == "no"          # only one probe at a time
    assert breaker.admits(probing, NOW + 150) == "probe"      # the probe's lease ran out


def test_half_open_and_success_closes():
    b = breaker.on_success(breaker.on_probe(fail_n(Breaker(), 3), NOW + 60, 90))
    assert b == Breaker()
    assert breaker.admits(b, NOW + 61) == "yes"


def test_half_open_and_failure_opens_again():
    probing = breaker.on_probe(fail_n(Breaker(), 3), NOW + 60, 90)
    b = breaker.on_failure(probing, NOW + 61, threshold=3, open_s=60)
    assert b.state == breaker.OPEN and b.open_until == NOW + 61 + 120     # doubled after a failed probe
    assert breaker.admits(b, NOW + 100) == "no"
    assert breaker.admits(b, NOW + 181) == "probe"


def test_429_with_retry_after_pauses_for_that_long():
    b = breaker.on_429(Breaker(), NOW, 7.0, default_s=1.0, max_s=300.0)
    assert b.paused_until == NOW + 7 and b.state == breaker.CLOSED
    assert breaker.admits(b, NOW + 6.9) == "no"
    assert breaker.admits(b, NOW + 7) == "yes"


def test_429_without_retry_after_doubles_the_pause_up_to_the_max():
    b, pauses = Breaker(), []
    for _ in range(12):
        b = breaker.on_429(b, NOW, None, default_s=1.0, max_s=300.0)
        pauses.append(b.pause_s)
    assert pauses[:5] == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert pauses[-1] == 300.0 and max(pauses) == 300.0


def test_429_never_shortens_a_longer_pause():
    b = breaker.on_429(Breaker(), NOW, 60.0, 1.0, 300.0)
    b = breaker.on_429(b, NOW + 1, 2.0, 1.0, 300.0)
    assert b.paused_until == NOW + 60


def test_pause_blocks_even_a_closed_breaker_and_success_resets_the_doubling():
    b = breaker.on_429(breaker.on_429(Breaker(), NOW, None, 1.0, 300.0), NOW, None, 1.0, 300.0)
    assert breaker.admits(b, NOW + 1) == "no"
    b = breaker.on_success(b)
    assert breaker.on_429(b, NOW + 10, None, 1.0, 300.0).pause_s == 1.0


# --- progress ------------------------------------------------------------------------------------

COUNTS = {"pending": 50, "running": 10, "done": 30, "failed": 5, "invalid": 5}


def test_progress_from_counts():
    p = progress.from_counts(COUNTS, recent=12, window_s=60)
    assert (p.total, p.finished, p.remaining, p.recent, p.window_s) == (100, 40, 60, 12, 60)


def test_a_runs_progress_counts_its_own_work_not_the_databases():
    """The terminal bar of a run counted every job of the database (issue 46): 12,000 done by earlier runs
    made a run of 50 new templates start at 99 %."""
    p = progress.of_run({"done": 3, "failed": 1, "invalid": 0}, {"pending": 40, "running": 6, "done": 12_000},
                        recent=4, window_s=60)
    assert (p.total, p.finished, p.remaining) == (50, 4, 46)
    assert progress.line(p, width=0).startswith("4/50 (8%)")


def test_progress_from_partial_counts():
    p = progress.from_counts({"done": 3}, 0, 0)
    assert (p.total, p.finished, p.remaining) == (3, 3, 0)


def test_rate_is_over_the_window():
    assert progress.from_counts(COUNTS, 12, 60).rate_per_min == 12.0
    assert progress.from_counts(COUNTS, 60, 12).rate_per_min == 300.0     # 60 jobs in a run 12 s old
    assert progress.from_counts(COUNTS, 40, 0).rate_per_min == 0.0        # no live run: no rate


@pytest.mark.parametrize("now, started, window", [
    (1000.0, None, 0.0),          # no run alive
    (1012.0, 1000.0, 12.0),       # 12 s into a run: 12 s, not 60
    (1200.0, 1000.0, 60.0),       # an older run: the last minute
    (1000.2, 1000.0, 1.0),        # a run a moment old: at least 1 s
])
def test_rate_window_is_the_shorter_of_a_minute_and_the_run_s_age(now, started, window):
    assert progress.rate_window_s(now, started) == window


def test_eta():
    assert progress.from_counts(COUNTS, 12, 60).eta_s == 60 * 60 / 12       # 60 remaining at 12/min
    assert progress.from_counts(COUNTS, 0, 60).eta_s is None                 # no rate yet
    assert progress.from_counts({"done": 9}, 0, 0).eta_s == 0.0              # nothing left


def test_failures_summary_counts_what_grew_by_kind():
    before = {"error:http_5xx": 10, "error:network": 1}
    after = {"error:http_5xx": 18, "error:network": 5, "error:parse": 0, "error:http_429": 1}
    assert progress.failures_summary(before, after) == "13 failed attempts: http_5xx ×8, network ×4, http_429 ×1"
    assert progress.failures_summary(after, after) is None


@pytest.mark.parametrize("seconds, text", [
    (None, "unknown"), (0, "0s"), (59.4, "59s"), (59.6, "1m00s"), (61, "1m01s"),
    (3599, "59m59s"), (3600, "1h00m"), (7384, "2h03m"),
])
def test_format_duration(seconds, text):
    assert progress.format_duration(seconds) == text


def test_progress_line_with_bar():
    p = progress.from_counts({"done": 120, "pending": 480}, recent=118, window_s=60)
    assert progress.line(p, width=10) == "[##........] 120/600 (20%) 118.0/min ETA 4m04s"


def test_progress_line_without_bar_and_unknown_eta():
    p = progress.from_counts({"pending": 5}, 0, 0)
    assert progress.line(p, width=0) == "0/5 (0%) 0.0/min ETA unknown"


def test_progress_line_of_an_empty_queue():
    assert progress.line(progress.from_counts({}, 0, 0), width=4) == "[####] 0/0 (100%) 0.0/min ETA 0s"


# --- the SQLite limiter's GCRA against a strict token bucket -----------------------------------------

def limiter_slots(tmp_path, rate_per_s, burst, n, late_s=0.0):
    """The times (ms since the start) a real DomainLimiter on a fake clock grants `n` slots to one taker
    that asks again exactly when told, each take `late_s` late."""
    clock = FakeClock(0.0)
    lim = limiter.DomainLimiter(str(tmp_path / "jobs.db-limiter"), rate_per_s, burst, clock=clock)
    times = []
    try:
        while len(times) < n:
            wait = lim.try_acquire("x.test")
            if wait == 0.0:
                times.append(round(clock.t * 1000, 6))
            else:
                clock.advance(wait + late_s)
    finally:
        lim.close()
    return times


def token_bucket_rejects(times_ms, rate_per_s, burst):
    """Indexes of the admissions a full-at-start bucket (capacity burst, refill rate_per_s) would refuse."""
    refill_per_ms = Fraction(str(rate_per_s)) / 1000
    tokens, last, rejected = Fraction(burst), 0, []
    for i, t in enumerate(times_ms):
        tokens = min(Fraction(burst), tokens + (Fraction(str(t)) - last) * refill_per_ms)
        last = Fraction(str(t))
        if tokens >= 1:
            tokens -= 1
        else:
            rejected.append(i)
    return rejected


@pytest.mark.parametrize("rate_per_s, burst", [(0.5, 1), (2, 5), (2, 1), (3, 2), (10, 10), (20, 5), (100, 10)])
def test_the_limiters_slots_fit_a_token_bucket_and_keep_the_rate(tmp_path, rate_per_s, burst):
    times = limiter_slots(tmp_path, rate_per_s, burst, 60)
    assert token_bucket_rejects(times, rate_per_s, burst) == []
    # the sustained rate is the rate exactly: after the burst, one slot an interval
    assert times[-1] - times[-2] == pytest.approx(1000 / rate_per_s)


def test_the_limiter_uses_the_burst_less_its_margin(tmp_path):
    """n8n.io's 2/s with a burst of 5: four slots at once, the fifth 100 ms later (a sliding log kept a whole
    unit back: 500 ms)."""
    assert limiter_slots(tmp_path, 2, 5, 6) == [0, 0, 0, 0, pytest.approx(100), pytest.approx(600)]


def test_a_late_taker_does_not_move_the_later_slots(tmp_path):
    # each take 5 ms after its slot: the schedule stays the rate's (a sliding log lost 5 ms a window)
    times = limiter_slots(tmp_path, 2, 5, 60, late_s=0.005)
    ideal = 100 + (60 - 5) * 500      # four at once, the fifth 100 ms later, then one each 500 ms
    assert times[-1] <= ideal + 5 + 1e-6


def test_the_jobs_in_flight_follow_the_rate_not_the_worker_count():
    assert inflight.lanes(2, 4) == inflight.MIN_LANES                 # n8n.io's pace: a slow answer leaves a lane
    assert inflight.lanes(100, 4) * 4 >= 100 * inflight.HOLD_S       # Little's law
    assert inflight.lanes(200, 8) < inflight.lanes(200, 4)            # more workers, fewer lanes each
    assert inflight.lanes(100, 2) == inflight.MAX_LANES == 4          # a worker's threads wait for its GIL
    assert inflight.lanes(10_000, 1) == inflight.MAX_LANES


def test_the_check_itself_catches_a_rate_above_the_bucket():
    # the bucket check is not vacuous: five at once and five more 2 s later overshoot 2/s with a burst of 4
    assert token_bucket_rejects([0] * 5, 2, 4) != []


@pytest.mark.parametrize("url, domain", [
    ("https://api.n8n.io/api", "n8n.io"),
    ("https://n8n.io", "n8n.io"),
    ("https://www.n8n.io/workflows/1", "n8n.io"),
    ("http://127.0.0.1:8765/api", "127.0.0.1"),
    ("http://localhost:8000", "localhost"),
])
def test_both_n8n_hosts_are_one_politeness_domain(url, domain):
    from scraper.base.urls import domain_of
    assert domain_of(url) == domain


def test_a_long_retry_after_schedules_the_job_no_later_than_the_cap():
    assert retry.decide(retry.HTTP_429, 429, 1, 3, retry_after_s=86_400, max_s=600).delay_s == 600


def test_the_eta_is_never_below_what_the_jobs_left_need_at_their_domains_rates():
    # issue 32: two videos left at youtube.com's 0.2/s (3 requests each) after 600 fast jobs a minute
    from scraper.policy import progress
    floor = progress.eta_floor_s({"n8n.io": 0, "youtube.com": 2}, {"n8n.io": 2.0, "youtube.com": 0.2},
                                 {"youtube.com": 3})
    assert floor == pytest.approx(30.0)
    p = progress.from_counts({"done": 600, "pending": 2}, recent=600, window_s=60, floor_s=floor)
    assert p.eta_s == pytest.approx(30.0)                        # not the 0.2 s the recent pace says
    assert progress.from_counts({"pending": 2}, 0, 60, floor).eta_s == pytest.approx(30.0)   # no pace yet
    assert progress.from_counts({"pending": 2}, 0, 60).eta_s is None
