"""Property-based tests (hypothesis) of the pure policy modules: retry, breaker, progress, outcome, margin, robots.

Each test states what ALWAYS holds, for any input hypothesis can build; time is passed in (`now=`), never slept.
The redaction properties are in test_properties_redact.py."""

import math
import random
from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from scraper.base import exitcodes
from scraper.policy import breaker, margin, outcome, progress, retry

FAST = settings(max_examples=80, deadline=None)

rngs = st.integers(0, 2**32 - 1).map(random.Random)
bases = st.floats(0.001, 1000.0)
caps = st.floats(0.0, retry.BACKOFF_MAX_S)
attempts = st.integers(1, 200)
retry_afters = st.none() | st.floats(0.0, 10**7)
statuses = st.none() | st.integers(100, 599)
kinds = st.sampled_from(retry.KINDS)


# --- retry ------------------------------------------------------------------------------------------------

@FAST
@given(attempt=attempts, base=bases, rng=rngs)
def test_backoff_is_never_negative_and_never_above_the_default_cap(attempt, base, rng):
    assert 0.0 <= retry.backoff(attempt, base, rng=rng) <= retry.BACKOFF_MAX_S


@FAST
@given(attempt=attempts, base=bases, cap=caps, rng=rngs)
def test_backoff_lies_in_the_jitter_band_around_base_times_two_to_the_attempt_minus_one(attempt, base, cap, rng):
    delay = retry.backoff(attempt, base, cap, rng)
    nominal = base * 2.0 ** (attempt - 1)
    assert 0.0 <= delay <= cap
    assert min(cap, 0.8 * nominal) * (1 - 1e-9) <= delay <= min(cap, 1.2 * nominal) * (1 + 1e-9)


@FAST
@given(kind=kinds | st.text(max_size=8), status=statuses, n=st.integers(0, 50), max_attempts=st.integers(1, 20),
       retry_after=retry_afters, base=bases, cap=caps, rng=rngs, probe=st.booleans())
def test_decide_is_total_and_gives_one_of_the_documented_outcomes(kind, status, n, max_attempts, retry_after,
                                                                   base, cap, rng, probe):
    out = retry.decide(kind, status, n, max_attempts, retry_after, base, cap, rng, probe)
    assert out.action in (retry.RETRY, retry.FAILED, retry.INVALID)
    assert isinstance(out.counted, bool)
    assert math.isfinite(out.delay_s) and 0.0 <= out.delay_s <= cap
    if out.action != retry.RETRY:
        # an endpoint that kept refusing a browser ends the job with its attempt given back (the site is not to blame)
        assert out.delay_s == 0.0
        assert out.counted or (kind == retry.BROWSER_UNAVAILABLE and out.action == retry.FAILED)
    # a counted attempt is retried only while attempts remain: at max_attempts the job ends
    if out.action == retry.RETRY and out.counted:
        assert n < max_attempts
    # a retry that spends no attempt is for the domain's or the proxies' trouble only (failed probe, block,
    # 429, no proxy usable)
    if out.action == retry.RETRY and not out.counted:
        assert (probe and kind in retry.BREAKER_KINDS) or kind in (retry.BLOCKED, retry.HTTP_429, retry.PROXY)
    # Retry-After is a minimum (up to the cap) wherever decide waits on it (a block waits on the breaker instead)
    if (out.action == retry.RETRY and retry_after is not None and kind != retry.BLOCKED
            and not (probe and kind in retry.BREAKER_KINDS)):
        assert out.delay_s >= min(cap, retry_after)
    if kind == retry.HTTP_429 and status not in retry.GONE + retry.FORBIDDEN and not probe:
        assert out == retry.Outcome(retry.RETRY, min(cap, base if retry_after is None else retry_after), False)


@FAST
@given(kind=kinds, status=st.sampled_from(retry.GONE + retry.FORBIDDEN), n=st.integers(0, 50),
       max_attempts=st.integers(1, 20), retry_after=retry_afters, rng=rngs, probe=st.booleans())
def test_gone_is_invalid_and_forbidden_is_failed_whatever_the_attempt(kind, status, n, max_attempts, retry_after,
                                                                       rng, probe):
    assume(not (probe and kind in retry.BREAKER_KINDS))   # a failed probe speaks of the domain, not the job
    out = retry.decide(kind, status, n, max_attempts, retry_after, rng=rng, probe=probe)
    assert out == retry.Outcome(retry.INVALID if status in retry.GONE else retry.FAILED)


@FAST
@given(max_attempts=st.integers(1, 15), rng=rngs,
       failures=st.lists(st.tuples(kinds, statuses, retry_afters, st.booleans()), min_size=1, max_size=60))
def test_a_job_never_spends_more_than_max_attempts_without_ending(max_attempts, rng, failures):
    """Replay any sequence of failures of one job: the attempts spent never pass max_attempts, and the
    job has ended (failed or invalid) by the time they reach it on a counted failure."""
    spent = 0
    for kind, status, retry_after, probe in failures:
        out = retry.decide(kind, status, spent + 1, max_attempts, retry_after, rng=rng, probe=probe)
        if out.counted:
            spent += 1
        assert spent <= max_attempts
        if out.action != retry.RETRY:
            break
        assert not out.counted or spent < max_attempts


# --- breaker ----------------------------------------------------------------------------------------------

STATES = (breaker.CLOSED, breaker.OPEN, breaker.HALF_OPEN)


class BreakerMachine(RuleBasedStateMachine):
    """Any sequence of outcomes, probes and time passing, checked against a small model of what the
    breaker must remember: consecutive server failures since the last success, whether a block came,
    and failed probes in a row."""

    @initialize(threshold=st.integers(1, 6), open_s=st.floats(0.0, 600.0), lease_s=st.floats(0.0, 300.0),
                max_cycles=st.none() | st.integers(1, 4), start=st.floats(0.0, 2e9))
    def setup(self, threshold, open_s, lease_s, max_cycles, start):
        self.b = breaker.Breaker()
        self.now = start
        self.threshold, self.open_s, self.lease_s, self.max_cycles = threshold, open_s, lease_s, max_cycles
        self.consecutive = 0        # server failures (failure, block) since the last success
        self.blocked = False        # a block since the last success
        self.failed_probes = 0      # failed probes in a row (since the last success or the last new run)
        self.probing = False        # a probe was taken and has not ended
        self.gave_up_for_reason = False     # given up for a reason of its own (robots.txt, no proxy)

    @rule(dt=st.floats(0.0, 1000.0))
    def time_passes(self, dt):
        self.now += dt

    @rule()
    def success(self):
        self.b = breaker.on_success(self.b)
        self.consecutive, self.blocked, self.failed_probes, self.probing = 0, False, 0, False
        self.gave_up_for_reason = False
        assert self.b.state == breaker.CLOSED and self.b.failures == 0 and not self.b.gave_up
        assert breaker.admits(self.b, self.now) in ("yes", "no")

    @rule()
    def failure(self):
        was = self.b
        self.b = breaker.on_failure(self.b, self.now, self.threshold, self.open_s, self.max_cycles)
        self.consecutive += 1
        self._after_server_failure(was)
        if was.state == breaker.CLOSED:
            # opens exactly at the threshold-th consecutive failure, not one before
            should_open = self.consecutive >= self.threshold or self.blocked
            assert (self.b.state == breaker.OPEN) == should_open

    @rule()
    def blocked(self):
        was = self.b
        self.b = breaker.on_blocked(self.b, self.now, self.open_s, self.max_cycles)
        self.consecutive += 1
        self.blocked = True
        self._after_server_failure(was)
        assert self.b.state == breaker.OPEN

    def _after_server_failure(self, was):
        if was.state == breaker.HALF_OPEN:
            self.failed_probes += 1
            self.probing = False
            # the open period doubles after each failed probe in a row, up to OPEN_MAX_S
            period = breaker.open_period(self.open_s, self.failed_probes)
            assert self.b.state == breaker.OPEN and self.b.open_until == self.now + period
            assert period == min(breaker.OPEN_MAX_S, self.open_s * 2 ** self.failed_probes)
        if was.gave_up:
            assert self.b.gave_up, "a given-up domain stays given up until a success or a new run"

    @rule(retry_after=st.none() | st.floats(0.0, 3600.0), default_s=st.floats(0.0, 120.0),
          max_s=st.floats(0.0, 3600.0))
    def too_many_requests(self, retry_after, default_s, max_s):
        was = self.b
        self.b = breaker.on_429(self.b, self.now, retry_after, default_s, max_s)
        self.probing = False
        assert (self.b.state, self.b.failures, self.b.gave_up) == (was.state, was.failures, was.gave_up)
        assert 0.0 <= self.b.pause_s <= max_s
        assert self.b.paused_until >= max(was.paused_until, self.now + self.b.pause_s)

    @precondition(lambda self: breaker.admits(self.b, self.now) == "probe")
    @rule()
    def take_probe(self):
        self.b = breaker.on_probe(self.b, self.now, self.lease_s)
        self.probing = True
        assert self.b.state == breaker.HALF_OPEN
        if self.now + self.lease_s > self.now:
            assert breaker.admits(self.b, self.now) == "no", "one probe at a time"

    @rule()
    def probe_abandoned(self):
        was = self.b
        self.b = breaker.on_probe_abandoned(self.b)
        self.probing = False
        if was.state == breaker.HALF_OPEN and not was.gave_up and was.paused_until <= self.now:
            assert breaker.admits(self.b, self.now) == "probe"

    @rule(for_s=st.floats(0.0, 1e9))
    def give_up(self, for_s):
        was = self.b
        self.b = breaker.on_give_up(self.b, self.now, self.now + for_s)
        self.blocked = True         # open, as after a block (robots.txt or every proxy unusable)
        self.gave_up_for_reason = True
        assert self.b.gave_up and breaker.admits(self.b, self.now) == "no"
        assert self.b.open_cycles == was.open_cycles and self.b.failures == was.failures
        assert breaker.rest_s(self.b, self.now) == pytest.approx(for_s, abs=1e-3)

    @rule()
    def new_run(self):
        was = self.b
        self.b = breaker.on_new_run(self.b)
        if was.gave_up:
            self.failed_probes, self.gave_up_for_reason = 0, False
            assert not self.b.gave_up and self.b.open_cycles == 0

    @invariant()
    def state_is_valid(self):
        if not hasattr(self, "b"):
            return
        b = self.b
        assert b.state in STATES
        assert b.failures >= 0 and b.open_cycles >= 0
        assert (b.state == breaker.CLOSED) == (self.consecutive < self.threshold and not self.blocked)
        if b.state == breaker.CLOSED:
            assert b.failures == self.consecutive and b.open_cycles == 0 and not b.gave_up
        assert b.open_cycles == self.failed_probes

    @invariant()
    def admits_follows_the_state_and_the_clock(self):
        if not hasattr(self, "b"):
            return
        b, now = self.b, self.now
        a = breaker.admits(b, now)
        assert a in ("yes", "probe", "no")
        if b.gave_up or b.paused_until > now:
            expected = "no"
        elif b.state == breaker.CLOSED:
            expected = "yes"
        elif b.state == breaker.OPEN:
            expected = "probe" if b.open_until <= now else "no"
        else:
            expected = "probe" if b.probe_until <= now else "no"
        assert a == expected
        # admission never goes back to "no" just because time passed (nothing else happened)
        if a != "no":
            assert breaker.admits(b, now + 10**6) == a
        # a walk's request (no job to hand back) rests only while no worker's would be admitted either, and
        # only until the open period or the probe in flight ends
        rest = breaker.rest_s(b, now)
        assert rest >= 0.0 and (rest == 0.0 or a == "no")
        assert breaker.rest_s(b, max(now, b.open_until, b.probe_until)) == 0.0

    @invariant()
    def gives_up_only_after_max_open_cycles_failed_probes_in_a_row(self):
        if not hasattr(self, "b"):
            return
        b = self.b
        if b.gave_up:
            assert self.gave_up_for_reason or (self.max_cycles is not None and self.failed_probes >= self.max_cycles)
            assert b.state == breaker.OPEN
        elif self.max_cycles is not None and self.failed_probes >= self.max_cycles:
            # the failed probe that reached the limit gave up; only a new run (which also resets the count)
            # or a success (idem) undoes that
            raise AssertionError("max_open_cycles failed probes in a row, yet the domain was not given up")


BreakerMachine.TestCase.settings = settings(max_examples=80, stateful_step_count=40, deadline=None)
test_breaker_under_any_sequence_of_outcomes = BreakerMachine.TestCase


@FAST
@given(threshold=st.integers(1, 10), extra=st.integers(0, 5), now=st.floats(0.0, 2e9), open_s=st.floats(0.0, 600))
def test_opens_exactly_after_threshold_consecutive_failures_and_a_success_resets(threshold, extra, now, open_s):
    b = breaker.Breaker()
    for i in range(1, threshold + extra + 1):
        b = breaker.on_failure(b, now, threshold, open_s)
        assert (b.state == breaker.OPEN) == (i >= threshold)
    assert breaker.on_success(b) == breaker.Breaker()


# --- progress ---------------------------------------------------------------------------------------------

times = st.floats(0.0, 2e9)
counts = st.integers(0, 10**7)


@FAST
@given(now=times, started=st.none() | times)
def test_the_rate_window_is_never_longer_than_a_minute_nor_than_the_run(now, started):
    w = progress.rate_window_s(now, started)
    if started is None:
        assert w == 0.0
        return
    age = now - started
    assert progress.MIN_WINDOW_S <= w <= progress.RATE_WINDOW_S
    assert w <= max(progress.MIN_WINDOW_S, age)    # a run younger than MIN_WINDOW_S is measured over that
    if progress.MIN_WINDOW_S <= age <= progress.RATE_WINDOW_S:
        assert w == age


windows = st.sampled_from([0.0]) | st.floats(progress.MIN_WINDOW_S, progress.RATE_WINDOW_S)


@FAST
@given(total_done=counts, remaining=counts, recent=counts, window=windows)
def test_rate_is_non_negative_and_eta_is_none_or_non_negative(total_done, remaining, recent, window):
    p = progress.from_counts({"done": total_done, "pending": remaining}, recent, window)
    assert p.rate_per_min >= 0.0 and math.isfinite(p.rate_per_min)
    assert p.eta_s is None or (p.eta_s >= 0.0 and math.isfinite(p.eta_s))
    assert (p.eta_s == 0.0) == (remaining == 0)
    assert (p.eta_s is None) == (remaining > 0 and p.rate_per_min == 0)
    progress.line(p)        # never raises


def _eta_or_inf(p):
    return math.inf if p.eta_s is None else p.eta_s


@FAST
@given(r1=counts, r2=counts, recent=counts, window=windows)
def test_eta_is_monotone_in_the_remaining_work(r1, r2, recent, window):
    lo, hi = sorted((r1, r2))
    p_lo = progress.Progress(lo, 0, lo, recent, window)
    p_hi = progress.Progress(hi, 0, hi, recent, window)
    assert _eta_or_inf(p_lo) <= _eta_or_inf(p_hi)


@FAST
@given(remaining=counts, a=counts, b=counts, window=windows)
def test_eta_never_grows_when_more_jobs_finished_in_the_window(remaining, a, b, window):
    lo, hi = sorted((a, b))
    assert _eta_or_inf(progress.Progress(remaining, 0, remaining, hi, window)) <= _eta_or_inf(
        progress.Progress(remaining, 0, remaining, lo, window))


@FAST
@given(seconds=st.none() | st.floats(min_value=0.0) | st.integers(0, 10**12))
def test_format_duration_is_total_on_non_negative_numbers(seconds):
    s = progress.format_duration(seconds)
    assert isinstance(s, str) and s and "\n" not in s
    if seconds is not None and math.isfinite(seconds) and seconds < 10**15:
        n = int(round(seconds))
        h, m, sec = n // 3600, n % 3600 // 60, n % 60
        assert s == (f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s" if m else f"{sec}s")


# --- outcome ----------------------------------------------------------------------------------------------

EXIT_CODES = sorted({v for k, v in vars(exitcodes).items() if k.isupper() and isinstance(v, int)})
hostnames = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z]{2,6}){1,2}", fullmatch=True)


@settings(max_examples=80, deadline=None)
@given(failed=st.integers(0, 10**9), domains=st.lists(hostnames, max_size=4),
       retry_in=st.none() | st.floats(min_value=0.0))
def test_every_exit_code_ends_on_one_non_empty_line(failed, domains, retry_in):
    assert {0, 1, 2, 3, 70, 75, 130, 143} <= set(EXIT_CODES)
    for code in EXIT_CODES:
        last = outcome.next_step(code, failed, tuple(domains), retry_in)
        assert isinstance(last, str) and last.strip()
        assert len(last.splitlines()) == 1 and last == last.strip()


@FAST
@given(code=st.integers(-(2**31), 2**31))
def test_any_exit_code_at_all_gets_one_non_empty_line(code):
    last = outcome.next_step(code)
    assert last.strip() and len(last.splitlines()) == 1


# --- margin -----------------------------------------------------------------------------------------------

def _gcra_slots(rate_per_s, tolerance, n):
    """The densest slot times (exact fractions of a second) a GCRA of `tolerance` seconds grants from t = 0."""
    interval = Fraction(1) / Fraction(str(rate_per_s))
    tat, times = Fraction(0), []
    for _ in range(n):
        t = max(Fraction(0), tat - tolerance)       # the earliest moment this slot conforms
        times.append(t)
        tat = max(tat, t) + interval
    return times


def _bucket_refuses(times, rate_per_s, burst):
    """Whether a full-at-start token bucket (capacity burst, refill rate_per_s) refuses any arrival."""
    refill, tokens, last = Fraction(str(rate_per_s)), Fraction(burst), Fraction(0)
    for t in sorted(times):
        tokens = min(Fraction(burst), tokens + (t - last) * refill)
        last = t
        if tokens < 1:
            return True
        tokens -= 1
    return False


@FAST
@given(rate=st.sampled_from([0.5, 1, 2, 3, 7.5, 10, 30, 50, 100]), burst=st.integers(1, 20),
       delays=st.lists(st.integers(0, 1000), min_size=60, max_size=60))
def test_slots_arriving_within_the_absorbed_jitter_never_meet_a_429(rate, burst, delays):
    tolerance = Fraction(str(margin.tolerance_s(rate, burst)))
    assert 0 <= tolerance <= Fraction(burst - 1) / Fraction(str(rate))
    # jitter_absorbed_s is (burst - 1) / rate less the tolerance: taken exactly here, as the float's decimal
    # string may round it up by 1e-17 s, which the exact bucket below then counts as a 429 (rate 30, burst 3)
    absorbed = Fraction(burst - 1) / Fraction(str(rate)) - tolerance
    assert float(absorbed) == pytest.approx(margin.jitter_absorbed_s(rate, burst), abs=1e-12)
    slots = _gcra_slots(rate, tolerance, len(delays))
    arrivals = [t + absorbed * d / 1000 for t, d in zip(slots, delays, strict=True)]
    assert not _bucket_refuses(arrivals, rate, burst)


@FAST
@given(rate=st.floats(0.01, 1000), burst=st.integers(1, 50))
def test_the_margin_is_the_jitter_time_where_the_burst_allows_it_never_more(rate, burst):
    absorbed = margin.jitter_absorbed_s(rate, burst)
    assert absorbed == pytest.approx(min(margin.ARRIVAL_JITTER_S, (burst - 1) / rate), abs=1e-9)


def test_the_check_catches_jitter_beyond_the_margin():
    # one slot late by more than the margin lets its followers bunch up: the bucket refuses one
    rate, burst = 30, 5
    slots = _gcra_slots(rate, Fraction(str(margin.tolerance_s(rate, burst))), 40)
    late = Fraction(str(margin.jitter_absorbed_s(rate, burst))) + Fraction(1, 100)
    arrivals = [t + (late if i < 20 else 0) for i, t in enumerate(slots)]
    assert _bucket_refuses(arrivals, rate, burst)


@given(rate=st.floats(0.01, 1000.0), burst=st.integers(1, 100))
def test_a_slot_is_never_kept_longer_than_half_of_what_the_burst_absorbs(rate, burst):
    """The stale-slot check (issue 45) leaves half of the absorbed delay to the network and the server, and
    never asks for less than an ordinary process's time from a grant to its send."""
    kept = margin.stale_after_s(rate, burst)
    assert margin.STALE_FLOOR_S <= kept <= margin.STALE_S       # a burst of 1 absorbs nothing: still some
    assert kept <= max(margin.STALE_FLOOR_S, margin.jitter_absorbed_s(rate, burst) / 2) + 1e-12


def test_the_margin_is_time_a_fraction_of_a_unit_at_a_low_rate():
    assert margin.tolerance_s(2, 5) == pytest.approx(2.0 - 0.1)               # 4 units of 500 ms, less 100 ms
    assert margin.tolerance_s(2, 2) == pytest.approx(0.5 - 0.1)               # a fraction of a unit
    assert margin.tolerance_s(20, 5) == pytest.approx(0.2 - 0.1)              # two units of 50 ms
    assert margin.tolerance_s(100, 10) == 0.0                                 # 90 ms of burst: none usable


# --- robots (the rate rules) ---------------------------------------------------------------------------

rates_ = st.floats(0.01, 1000.0)


@FAST
@given(configured=rates_, burst=st.integers(1, 50), robots_rate=st.none() | rates_, delay=st.booleans(),
       adaptive=st.none() | rates_)
def test_robots_and_the_adaptive_rate_only_ever_lower_the_configured_rate(configured, burst, robots_rate, delay,
                                                                           adaptive):
    from scraper.policy import robots as rules
    r = rules.effective(configured, burst, robots_rate, delay, adaptive)
    assert r.rate_per_s == min(x for x in (configured, robots_rate, adaptive) if x is not None)
    assert r.burst == (1 if delay else burst)
    assert (r.reason is None) == (r.rate_per_s == configured)


@FAST
@given(configured=rates_, steps=st.lists(st.tuples(st.booleans(), st.floats(0.0, 30.0)), max_size=40))
def test_the_adaptive_rate_stays_between_a_tenth_and_the_configured_rate(configured, steps):
    from scraper.policy import robots as rules
    current, mark, count = None, None, 0
    for struggling, dt in steps:
        count += rules.WINDOW
        slow = (1000.0,) * rules.WINDOW if struggling else (10.0,) * rules.WINDOW
        answers = rules.Answers(count, 10.0, slow, 0)
        current, mark, _why = rules.adapt(configured, current, mark, answers, dt, 60.0)
        if current is not None:
            assert configured * rules.FLOOR_SHARE - 1e-9 <= current < configured


@given(left=st.dictionaries(st.sampled_from(["a.test", "b.test", "youtube.com"]), st.integers(0, 10_000)),
       rates=st.dictionaries(st.sampled_from(["a.test", "b.test", "youtube.com"]),
                             st.floats(0.01, 1000, allow_nan=False)),
       per_job=st.integers(1, 5), done=st.integers(0, 10_000), recent=st.integers(0, 5_000))
def test_the_eta_is_at_least_the_slowest_domains_need_and_grows_with_what_is_left(left, rates, per_job, done,
                                                                                  recent):
    # issue 32: the ETA of a run whose last jobs wait on a slow domain
    floor = progress.eta_floor_s(left, rates, dict.fromkeys(left, per_job))
    assert floor >= 0
    for domain, n in left.items():
        if domain in rates:
            assert floor >= n * per_job / rates[domain] - 1e-9
    more = {d: n + 1 for d, n in left.items()}
    assert progress.eta_floor_s(more, rates, dict.fromkeys(left, per_job)) >= floor
    p = progress.from_counts({"done": done, "pending": sum(left.values())}, recent, 60.0, floor)
    if p.eta_s is not None:
        assert p.eta_s >= floor - 1e-9
