"""The row helpers of the jobs queue, used inside a caller's transaction: queue job rows, bump a counter,
read a domain's breaker row (kept apart from `db/queue` so that module stays one sitting long)."""

from scraper.policy import breaker

DEFAULT_SOURCE = "n8n"      # the built-in source; every job made before sources existed is its


def add_jobs(c, rows, now, priority=0, source=DEFAULT_SOURCE):
    """Queue (key, site, url, domain[, source]) rows inside the caller's transaction (a row without its
    source gets `source`); known keys are left as they are. Returns how many were new."""
    before = c.total_changes
    c.executemany(
        "INSERT OR IGNORE INTO jobs (key, site, url, domain, source, priority, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(*_with_source(row, source), priority, now, now) for row in rows],
    )
    return c.total_changes - before


def _with_source(row, source=DEFAULT_SOURCE):
    """(key, site, url, domain, source): a row of four gets `source`."""
    return tuple(row) if len(row) == 5 else (*row, source)


def pg_write_lock():
    from scraper.db import pg
    return pg.WRITE_LOCK


def _bump(c, name, by=1):
    c.execute(
        "INSERT INTO counters (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
        (name, by),
    )


def _breaker_of(row):
    return breaker.Breaker(
        row["state"], row["failures"], row["open_until"], row["probe_until"], row["paused_until"], row["pause_s"],
        row["open_cycles"], bool(row["gave_up"]), row["opened_at"],
    )
