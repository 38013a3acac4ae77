"""The `counters` table: all-time event counters (errors by kind, 429s), so a status read is one SELECT."""

from scraper.db.backend import Conn
from scraper.db.dialect import same

# the stored row named by its table: PostgreSQL finds a bare `value` ambiguous, SQLite takes either
BUMP = same("INSERT INTO counters (name, value) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value")


def bump(c: Conn, name: str, by: int = 1) -> None:
    """Add `by` to counter `name` (inside the caller's transaction)."""
    c.execute(BUMP, (name, by))


def every(conn: Conn) -> dict[str, int]:
    """{name: value} of every counter."""
    return {r[0]: r[1] for r in conn.execute(same("SELECT name, value FROM counters"))}
