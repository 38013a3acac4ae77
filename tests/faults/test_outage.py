"""A process's wait for the database (`pool/outage`), driven by a FakeClock: reconnections with backoff until the
database answers, a stop, or `db_down_after` (DatabaseDown, the run's one sentence). Nothing sleeps."""

import random

import pytest

from scraper.base import settings as settings_mod
from scraper.base.clock import FakeClock
from scraper.base.errors import DatabaseDown, DatabaseUnavailable
from scraper.pool.outage import MAX_TRY_S, Outage


def refusing(times):
    """A reconnect that fails `times` times, then succeeds; its calls counted."""
    calls = []

    def reconnect():
        calls.append(1)
        if len(calls) <= times:
            raise DatabaseUnavailable("connection refused")
    return reconnect, calls


def test_a_restart_is_waited_out_with_backoff():
    clock = FakeClock()
    reconnect, calls = refusing(5)
    outage = Outage(settings_mod.build(db_path="postgresql://u@h/db"), "w0", reconnect, clock=clock,
                    rng=random.Random(1))
    assert outage.wait(DatabaseUnavailable("terminating connection due to administrator command"))
    print(f"back after {len(calls)} tries and {outage.last_s:.2f} s of naps")
    assert len(calls) == 6 and 0 < outage.last_s < 5 * MAX_TRY_S
    naps = [s for s in clock.slept if s > 0]
    assert max(naps) <= MAX_TRY_S


def test_a_database_gone_past_db_down_after_is_one_sentence():
    clock = FakeClock()
    reconnect, calls = refusing(10**9)
    s = settings_mod.build(db_path="postgresql://u:secret@h/db", db_down_after_s=30)
    with pytest.raises(DatabaseDown) as e:
        Outage(s, "the supervisor", reconnect, clock=clock).wait(DatabaseUnavailable("no route to host"))
    sentence = str(e.value)
    print(sentence)
    assert "stayed unreachable for 30 s" in sentence and "db_down_after is 30 s" in sentence
    assert "connection refused" in sentence and "secret" not in sentence and "\n" not in sentence


def test_a_stop_ends_the_wait():
    reconnect, _ = refusing(10**9)
    asked = iter([False, False, True])
    outage = Outage(settings_mod.build(db_path="postgresql://u@h/db"), "w1", reconnect, lambda: next(asked, True),
                    clock=FakeClock())
    assert outage.wait(DatabaseUnavailable("gone")) is False
