"""Jobs that ended for a reason the operator has since removed go back to pending: those that ended
`invalid` (kind `robots`) on a domain whose robots.txt is now ignored knowingly."""

from collections.abc import Collection
from typing import Any

from scraper.db.backend import Conn
from scraper.db.dialect import same
from scraper.db.store import transaction


def robots_invalid(conn: Conn, domains: Collection[str], now: float, every_domain: bool = False) -> dict[str, int]:
    """Move the `invalid`/`robots` jobs of `domains` (or of every domain) back to pending, attempts reset;
    returns {domain: how many}."""
    where = "" if every_domain else f" AND domain IN ({','.join('?' * len(domains))})"
    if not every_domain and not domains:
        return {}
    params: list[Any] = [] if every_domain else list(domains)
    with transaction(conn) as c:
        counts = {r[0]: r[1] for r in c.execute(
            same(f"SELECT domain, COUNT(*) FROM jobs WHERE status = 'invalid' AND error_kind = 'robots'{where} "
                 "GROUP BY domain"), params)}
        if counts:
            c.execute(same("UPDATE jobs SET status = 'pending', attempts = 0, available_at = ?, finished_at = NULL, "
                           "worker = NULL, lease_until = NULL, error_kind = NULL, last_error = NULL, updated_at = ? "
                           f"WHERE status = 'invalid' AND error_kind = 'robots'{where}"), [now, now, *params])
    return counts
