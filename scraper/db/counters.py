"""The `counters` table: all-time event counters (errors by kind, 429s), so a status read is one SELECT."""


def bump(c, name, by=1):
    """Add `by` to counter `name` (inside the caller's transaction)."""
    c.execute(
        "INSERT INTO counters (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
        (name, by),
    )


def every(conn):
    """{name: value} of every counter."""
    return dict(conn.execute("SELECT name, value FROM counters"))
