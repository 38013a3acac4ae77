"""The database's outage, as a run's process lives through it (issue 44): a PostgreSQL restart, a crash, a
failover or a silent network. The process waits, reconnecting with backoff, for at most `db_down_after`
seconds from the first failure; nothing is charged to a job or a site meanwhile (the caller hands back
what it held once the database answers). Past the bound, `DatabaseDown` carries the run's one sentence.

Every process of a run keeps one `Outage` (a worker lane, the supervisor, the relay): `wait()` returns when
the database answers again, or False when the process is asked to stop first."""

import logging

from scraper.base.clock import SYSTEM
from scraper.base.errors import DatabaseDown, DatabaseUnavailable
from scraper.policy import retry

log = logging.getLogger(__name__)

FIRST_TRY_S = 0.25          # the first reconnection's wait; it doubles, with jitter, up to MAX_TRY_S
MAX_TRY_S = 5.0             # a restart is over within seconds: the run is back within this of the database


def down_sentence(settings, why, seconds):
    """The run's one sentence when the database stayed unreachable past `db_down_after`."""
    return (f"the database {settings.db_shown} stayed unreachable for {seconds:.0f} s (db_down_after is "
            f"{settings.db_down_after_s:g} s; last error: {why}); every job is as it was, the unfinished ones come "
            f"back when their leases expire.")


class Outage:
    """One process's wait for the database. `reconnect()` makes its connections again (raising
    DatabaseUnavailable while it cannot); `stopping()` ends the wait early."""

    def __init__(self, settings, name, reconnect, stopping=lambda: False, clock=SYSTEM, rng=None):
        self.s = settings
        self.name = name
        self.reconnect = reconnect
        self.stopping = stopping
        self.clock = clock
        self.rng = rng
        self.last_s = 0.0           # how long the last outage lasted, once it is over

    def wait(self, error):
        """Wait until `reconnect()` succeeds (True), `stopping()` turns true (False) or `db_down_after` has
        passed since `error` (DatabaseDown)."""
        began = self.clock.monotonic()
        why = str(error) or type(error).__name__
        log.warning("%s: the database is unreachable (%s); reconnecting for up to %g s", self.name, why,
                    self.s.db_down_after_s)
        tries = 0
        while not self.stopping():
            try:
                self.reconnect()
            except DatabaseUnavailable as e:
                why = str(e) or why
            else:
                self.last_s = self.clock.monotonic() - began
                log.warning("%s: the database answers again after %.1f s", self.name, self.last_s)
                return True
            waited = self.clock.monotonic() - began
            if waited >= self.s.db_down_after_s:
                raise DatabaseDown(down_sentence(self.s, why, waited))
            tries += 1
            kwargs = {} if self.rng is None else {"rng": self.rng}
            nap = retry.backoff(tries, FIRST_TRY_S, MAX_TRY_S, **kwargs)
            self._nap(min(nap, self.s.db_down_after_s - waited))
        return False

    def _nap(self, seconds):
        """Sleep in short slices, so a stop is noticed."""
        end = self.clock.monotonic() + seconds
        while not self.stopping() and self.clock.monotonic() < end:
            self.clock.sleep(min(0.25, end - self.clock.monotonic()))
