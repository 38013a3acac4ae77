"""Where a database's jobs come from: the `source` row (the n8n API and site URLs it was seeded from) and
`source_sites` (the home URL each catalogue source is walked from), and the move of the jobs' URLs when a
database adopts new ones. The rules (what counts as the same URL, when a move is allowed) live in
`scraper/mirror/source`. One spelling serves both backends.
"""

from __future__ import annotations

from scraper.db.backend import Conn
from scraper.db.dialect import same


def recorded(conn: Conn) -> tuple[str, str] | None:
    """(api_url, site_url) the database belongs to, or None before its first seed."""
    row = conn.execute(same("SELECT api_url, site_url FROM source WHERE id = 1")).fetchone()
    return None if row is None else (row["api_url"], row["site_url"])


def first_n8n_job_url(conn: Conn) -> str | None:
    """The URL of one n8n job (a database seeded before the URLs were recorded: its jobs tell the site)."""
    job = conn.execute(same("SELECT url FROM jobs WHERE site = 'n8n' LIMIT 1")).fetchone()
    return None if job is None else job["url"]


def record(conn: Conn, api_url: str, site_url: str, now: float) -> None:
    """The database now belongs to these URLs."""
    conn.execute(same("INSERT INTO source (id, api_url, site_url, recorded_at) VALUES (1, ?, ?, ?) "
                      "ON CONFLICT (id) DO UPDATE SET api_url = excluded.api_url, site_url = excluded.site_url, "
                      "recorded_at = excluded.recorded_at"), (api_url, site_url, now))


def site_of(conn: Conn, source: str) -> str | None:
    """The home URL a catalogue source was walked from, or None before its first walk."""
    row = conn.execute(same("SELECT site FROM source_sites WHERE source = ?"), (source,)).fetchone()
    return None if row is None else row["site"]


def record_site(conn: Conn, source: str, site: str, now: float) -> None:
    conn.execute(same("INSERT INTO source_sites (source, site, recorded_at) VALUES (?, ?, ?) ON CONFLICT (source) "
                      "DO UPDATE SET site = excluded.site, recorded_at = excluded.recorded_at"), (source, site, now))


def move_jobs(conn: Conn, old_prefix: str, new_prefix: str, domain: str, site: str | None = None,
              source: str | None = None) -> None:
    """Jobs whose URL starts with `old_prefix` get `new_prefix` instead, and `domain`: the n8n ones
    (`site`), or those of one `source`."""
    owner, value = ("site", site) if source is None else ("source", source)
    conn.execute(same(f"UPDATE jobs SET url = ? || substr(url, ?), domain = ? "
                      f"WHERE {owner} = ? AND substr(url, 1, ?) = ?"),
                 (new_prefix, len(old_prefix) + 1, domain, value, len(old_prefix), old_prefix))


def give_jobs(conn: Conn, sites: tuple[str, ...], source: str) -> int:
    """The jobs of `sites` belong to `source` from now on; how many moved."""
    return int(conn.execute(same(f"UPDATE jobs SET source = ? WHERE site IN ({','.join('?' * len(sites))}) "
                                 "AND source != ?"), (source, *sites, source)).rowcount)
