"""The `domains` table, its one owner: each domain's breaker, pause and give-up state, as
`policy.breaker.Breaker`, and its rate columns (robots.txt's cap, the adaptive rate, the effective rate and
why). Every change of the breaker is a transition of the pure breaker policy (`policy.breaker`); only the
PostgreSQL rate slot (`slot_at`, `db/slots`) is the limiter's own."""

from collections.abc import Callable
from typing import Any

from scraper.db.backend import Conn, Row
from scraper.db.dialect import same
from scraper.db.store import transaction
from scraper.policy import breaker
from scraper.policy.breaker import Breaker

# a domain's row made when missing (ON CONFLICT DO NOTHING: both engines' spelling of INSERT OR IGNORE)
ENSURE_DOMAIN = same("INSERT INTO domains (domain, updated_at) VALUES (?, ?) ON CONFLICT DO NOTHING")

RATE_COLUMNS = ("configured_rate_per_s", "robots_rate_per_s", "robots_crawl_delay", "adaptive_rate_per_s",
                "adaptive_mark", "rate_per_s", "rate_burst", "rate_reason", "gave_up_reason")


def breaker_of(row: Row) -> Breaker:
    """The Breaker a `domains` row holds."""
    return breaker.Breaker(
        row["state"], row["failures"], row["open_until"], row["probe_until"], row["paused_until"], row["pause_s"],
        row["open_cycles"], bool(row["gave_up"]), row["opened_at"],
    )


def read_breaker(c: Conn, domain: str) -> Breaker:
    """The domain's Breaker; a closed one when it has no row."""
    row = c.execute(same("SELECT * FROM domains WHERE domain = ?"), (domain,)).fetchone()
    return breaker.Breaker() if row is None else breaker_of(row)


def give_up(conn: Conn, domain: str, reason: str, now: float, until: float) -> tuple[Breaker, Breaker]:
    """The domain given up until `until` (`breaker.on_give_up`), with the operator's sentence why, in one
    transaction; (before, after)."""
    with transaction(conn) as c:
        before = read_breaker(c, domain)
        after = breaker.on_give_up(before, now, until)
        save_breaker(c, domain, after, now)
        c.execute(same("UPDATE domains SET gave_up_reason = ? WHERE domain = ?"), (reason, domain))
        return before, after


def every_breaker(conn: Conn) -> dict[str, Breaker]:
    """{domain: Breaker}, every domain with a row."""
    return {r["domain"]: breaker_of(r) for r in conn.execute(same("SELECT * FROM domains ORDER BY domain"))}


def save_breaker(c: Conn, domain: str, b: Breaker, now: float) -> None:
    """Write the domain's Breaker (inside the caller's transaction)."""
    c.execute(same(
        """INSERT INTO domains (domain, state, failures, open_until, probe_until, paused_until, pause_s, updated_at,
                               open_cycles, gave_up, opened_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (domain) DO UPDATE SET state = excluded.state, failures = excluded.failures,
               open_until = excluded.open_until, probe_until = excluded.probe_until,
               paused_until = excluded.paused_until, pause_s = excluded.pause_s, updated_at = excluded.updated_at,
               open_cycles = excluded.open_cycles, gave_up = excluded.gave_up, opened_at = excluded.opened_at"""),
        (domain, b.state, b.failures, b.open_until, b.probe_until, b.paused_until, b.pause_s, now,
         b.open_cycles, int(b.gave_up), b.opened_at),
    )


# --- the rate columns -------------------------------------------------------------------

def rate_row(conn: Conn, domain: str) -> dict[str, Any]:
    """The rate columns of the domain's row ({} when it has no row)."""
    row = conn.execute(same(f"SELECT {', '.join(RATE_COLUMNS)} FROM domains WHERE domain = ?"), (domain,)).fetchone()
    return dict(row) if row is not None else {}


def update_rate(conn: Conn, domain: str, now: float,
                change: Callable[[dict[str, Any]], dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Apply `change(row dict) -> {column: value}` to the domain's rate columns atomically (the row is
    made when missing); returns (before, after) dicts."""
    with transaction(conn) as c:
        c.execute(ENSURE_DOMAIN, (domain, now))
        before = dict(c.execute(same(f"SELECT {', '.join(RATE_COLUMNS)} FROM domains WHERE domain = ?"),
                                (domain,)).one())
        values = change(before)
        if values:
            sets = ", ".join(f"{k} = ?" for k in values)
            c.execute(same(f"UPDATE domains SET {sets}, updated_at = ? WHERE domain = ?"),
                      (*values.values(), now, domain))
        return before, {**before, **values}


def new_run(conn: Conn) -> None:
    """A run starts: robots.txt caps are applied again by the workers that read it, the adaptive rate
    starts from the configured one, and last run's reasons to give a domain up are gone."""
    with transaction(conn) as c:
        c.execute(same("""UPDATE domains SET robots_rate_per_s = NULL, robots_crawl_delay = 0,
                         adaptive_rate_per_s = NULL,
                         adaptive_mark = NULL, rate_per_s = NULL, rate_burst = NULL, rate_reason = NULL,
                         gave_up_reason = NULL"""))


def gave_up_reasons(conn: Conn) -> dict[str, str]:
    """{domain: sentence} of the domains this run gave up for a reason of their own (robots.txt)."""
    return {r[0]: r[1] for r in conn.execute(
        same("SELECT domain, gave_up_reason FROM domains WHERE gave_up != 0 AND gave_up_reason IS NOT NULL"))}
