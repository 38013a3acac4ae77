"""The proxy pool's shared state (tables `proxies` and `proxy_bans`, migration 23): each proxy's health
as `policy.proxies.Health`, read by every worker of every machine. Keyed by the proxy as shown (no
credentials are stored)."""

from collections.abc import Callable, Iterable, Mapping

from scraper.db.backend import Conn, Row
from scraper.db.dialect import same
from scraper.db.store import transaction
from scraper.policy.proxies import Health


def _health(row: Row, bans: dict[str, float]) -> Health:
    return Health(row["state"], row["streak"], row["quarantined_until"], row["down_since"], row["requests"],
                  row["failures"], bans)


def read(c: Conn, urls: Iterable[str] | None = None) -> dict[str, Health]:
    """{proxy: Health} of `urls` (every proxy with a row or a ban when None); a proxy without a row is good."""
    wanted = None if urls is None else set(urls)
    bans: dict[str, dict[str, float]] = {}
    for url, domain, until in c.execute(same("SELECT url, domain, banned_until FROM proxy_bans")):
        bans.setdefault(url, {})[domain] = until
    out = {}
    for row in c.execute(same("SELECT * FROM proxies ORDER BY url")):
        if wanted is None or row["url"] in wanted:
            out[row["url"]] = _health(row, bans.get(row["url"], {}))
    for url in wanted if wanted is not None else bans:     # no row yet (nothing counted): good, its bans kept
        out.setdefault(url, Health(bans=bans.get(url, {})))
    return out


def update(conn: Conn, url: str, change: Callable[[Health], Health], now: float) -> tuple[Health, Health]:
    """Apply `change(Health) -> Health` to the proxy's row atomically; (before, after)."""
    with transaction(conn) as c:
        before = read(c, [url])[url]
        after = change(before)
        c.execute(
            same("""INSERT INTO proxies (url, state, streak, quarantined_until, down_since, failures, updated_at)
               VALUES (?, ?, ?, ?, ?, ?, ?)
               ON CONFLICT (url) DO UPDATE SET state = excluded.state, streak = excluded.streak,
                   quarantined_until = excluded.quarantined_until, down_since = excluded.down_since,
                   failures = excluded.failures, updated_at = excluded.updated_at"""),
            (url, after.state, after.streak, after.until, after.down_since, after.failures, now))
        return before, after


def count_requests(conn: Conn, counts: Mapping[str, int], now: float) -> None:
    """Add the requests each proxy carried (a worker's tally since its last flush)."""
    with transaction(conn) as c:
        for url, n in counts.items():
            c.execute(same("""INSERT INTO proxies (url, requests, updated_at) VALUES (?, ?, ?)
                         ON CONFLICT (url) DO UPDATE SET requests = proxies.requests + excluded.requests"""),
                      (url, n, now))


def ban(conn: Conn, url: str, domain: str, until: float) -> None:
    with transaction(conn) as c:
        c.execute(same("""INSERT INTO proxy_bans (url, domain, banned_until) VALUES (?, ?, ?)
                     ON CONFLICT (url, domain) DO UPDATE SET banned_until = excluded.banned_until"""),
                  (url, domain, until))


def unban(conn: Conn, url: str, domain: str) -> None:
    """Lift a ban this attempt made (every proxy got the same 403: it was the site's answer)."""
    with transaction(conn) as c:
        c.execute(same("DELETE FROM proxy_bans WHERE url = ? AND domain = ?"), (url, domain))
