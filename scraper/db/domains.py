"""The `domains` table: each domain's breaker, pause and give-up state, as `policy.breaker.Breaker`.

Every change of that state is a transition of the pure breaker policy (`policy.breaker`), written here."""

from scraper.db.backend import Conn, Row
from scraper.db.store import transaction
from scraper.policy import breaker
from scraper.policy.breaker import Breaker


def breaker_of(row: Row) -> Breaker:
    """The Breaker a `domains` row holds."""
    return breaker.Breaker(
        row["state"], row["failures"], row["open_until"], row["probe_until"], row["paused_until"], row["pause_s"],
        row["open_cycles"], bool(row["gave_up"]), row["opened_at"],
    )


def read_breaker(c: Conn, domain: str) -> Breaker:
    """The domain's Breaker; a closed one when it has no row."""
    row = c.execute("SELECT * FROM domains WHERE domain = ?", (domain,)).fetchone()
    return breaker.Breaker() if row is None else breaker_of(row)


def give_up(conn: Conn, domain: str, reason: str, now: float, until: float) -> tuple[Breaker, Breaker]:
    """The domain given up until `until` (`breaker.on_give_up`), with the operator's sentence why, in one
    transaction; (before, after)."""
    with transaction(conn) as c:
        before = read_breaker(c, domain)
        after = breaker.on_give_up(before, now, until)
        save_breaker(c, domain, after, now)
        c.execute("UPDATE domains SET gave_up_reason = ? WHERE domain = ?", (reason, domain))
        return before, after


def every_breaker(conn: Conn) -> dict[str, Breaker]:
    """{domain: Breaker}, every domain with a row."""
    return {r["domain"]: breaker_of(r) for r in conn.execute("SELECT * FROM domains ORDER BY domain")}


def save_breaker(c: Conn, domain: str, b: Breaker, now: float) -> None:
    """Write the domain's Breaker (inside the caller's transaction)."""
    c.execute(
        """INSERT INTO domains (domain, state, failures, open_until, probe_until, paused_until, pause_s, updated_at,
                               open_cycles, gave_up, opened_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (domain) DO UPDATE SET state = excluded.state, failures = excluded.failures,
               open_until = excluded.open_until, probe_until = excluded.probe_until,
               paused_until = excluded.paused_until, pause_s = excluded.pause_s, updated_at = excluded.updated_at,
               open_cycles = excluded.open_cycles, gave_up = excluded.gave_up, opened_at = excluded.opened_at""",
        (domain, b.state, b.failures, b.open_until, b.probe_until, b.paused_until, b.pause_s, now,
         b.open_cycles, int(b.gave_up), b.opened_at),
    )
