"""The wall clock stepping back an hour on one machine (issue 44): a run's clock does not follow it, and a rate
slot it left an hour ahead costs one interval, not an hour. Time is driven (`FakeClock`), nothing waits."""

from scraper.base.clock import FakeClock, SteadyClock
from scraper.politeness.limiter import DomainLimiter

HOUR_S = 3600.0


def test_the_runs_clock_does_not_step_back_with_the_wall_clock():
    wall, boot = [1_800_000_000.0], [5_000.0]
    clock = SteadyClock(wall=lambda: wall[0], since_boot=lambda: boot[0])
    before = clock.now()
    wall[0] -= HOUR_S           # the operator (or NTP) steps the wall clock back ...
    boot[0] += 2.0              # ... while two seconds pass
    after = clock.now()
    print(f"wall clock stepped back {HOUR_S:.0f} s while 2 s passed: the run's clock moved {after - before:+.1f} s")
    assert after - before == 2.0


def test_a_rate_slot_left_ahead_by_a_clock_stepped_back_costs_one_interval(tmp_path):
    clock = FakeClock()
    limiter = DomainLimiter(str(tmp_path / "jobs.db-limiter"), 2.0, 1, clock=clock)
    try:
        for _ in range(3):
            assert limiter.acquire("example.org")
        clock.t -= HOUR_S       # the slot is now an hour ahead of the clock
        slept = len(clock.slept)
        assert limiter.acquire("example.org")
        waited = sum(clock.slept[slept:])
        assert limiter.acquire("example.org")
        then = sum(clock.slept[slept:]) - waited
    finally:
        limiter.close()
    print(f"after the step back: the next slot after {waited:.2f} s, the one after {then:.2f} s (interval 0.5 s)")
    assert waited <= 0.5 + 1e-6 and then <= 0.5 + 1e-6
