"""The n8n listing as the last walks saw it: `listing` (each listed id's entry hash and price) and `walks`
(one row per walk of the listing, what it found). One spelling serves both backends.
"""

from __future__ import annotations

from collections.abc import Sequence

from scraper.db.backend import Conn, Row
from scraper.db.dialect import same


def price(conn: Conn, tid: int) -> Row | None:
    """(price, purchase_url) of a template as the last walk that listed it saw it, or None."""
    return conn.execute(same("SELECT price, purchase_url FROM listing WHERE id = ?"), (tid,)).fetchone()


def entry_hashes(conn: Conn) -> dict[int, str]:
    """{id: entry hash} of every id a walk listed."""
    return {r[0]: r[1] for r in conn.execute(same("SELECT id, entry_hash FROM listing"))}


def remember(conn: Conn, at: str, entries: Sequence[tuple[int, str, float | None, str | None]]) -> None:
    """Keep each listed (id, entry hash, price, purchase URL), seen at `at`."""
    conn.executemany(same(
        "INSERT INTO listing (id, entry_hash, seen_at, price, purchase_url) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET entry_hash = excluded.entry_hash, seen_at = excluded.seen_at, "
        "price = excluded.price, purchase_url = excluded.purchase_url"),
                     [(tid, h, at, p, url) for tid, h, p, url in entries])


def record_walk(conn: Conn, started_at: str, finished_at: str, complete: bool, pages: int, listed: int, new: int,
                changed: int, removed: int, restored: int) -> None:
    conn.execute(same("INSERT INTO walks (started_at, finished_at, complete, pages, listed, new, changed, removed, "
                      "restored) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"),
                 (started_at, finished_at, int(complete), pages, listed, new, changed, removed, restored))


def last_complete_walk(conn: Conn) -> Row | None:
    """(finished_at, listed) of the newest complete walk, or None."""
    return conn.execute(
        same("SELECT finished_at, listed FROM walks WHERE complete = 1 ORDER BY id DESC LIMIT 1")).fetchone()
