"""Where a database's jobs come from: the API and site URLs it was seeded from, checked by `seed` and
`run`, so a database filled from the local stand-in is never run against n8n.io (or the reverse)."""

import logging
from urllib.parse import urlsplit

from scraper.base.errors import ConfigError
from scraper.base.urls import domain_of
from scraper.db.store import transaction

log = logging.getLogger(__name__)


def _same(a, b):
    return a.rstrip("/") == b.rstrip("/")


def _origin(url):
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def recorded(conn):
    """(api_url, site_url) the database belongs to, or None before its first seed."""
    row = conn.execute("SELECT api_url, site_url FROM source WHERE id = 1").fetchone()
    return None if row is None else (row["api_url"], row["site_url"])


def check(conn, api_url, site_url, adopt=False, now=0.0):
    """Record the URLs on first use; ConfigError naming the database's own URLs when others are given.
    With `adopt`, the database moves to the given URLs (its jobs' URLs and domain with it)."""
    with transaction(conn) as c:
        row = c.execute("SELECT api_url, site_url FROM source WHERE id = 1").fetchone()
        if row is not None:
            old_api, old_site = row["api_url"], row["site_url"]
        else:
            # a database seeded before the URLs were recorded: its jobs' URLs tell the site
            job = c.execute("SELECT url FROM jobs LIMIT 1").fetchone()
            old_api, old_site = api_url, _origin(job["url"]) if job else site_url
            if _origin(old_site) == _origin(site_url):
                old_site = site_url
        if _same(old_api, api_url) and _same(old_site, site_url):
            if row is None:
                c.execute("INSERT INTO source (id, api_url, site_url, recorded_at) VALUES (1, ?, ?, ?)",
                          (api_url, site_url, now))
            return
        if not adopt:
            raise ConfigError(
                f"this database belongs to --api-url {old_api} and --site-url {old_site} (it was seeded "
                f"from them), not {api_url} and {site_url}; give its URLs, use another --db, or add "
                f"--adopt-urls to move it to the new ones."
            )
        c.execute("INSERT INTO source (id, api_url, site_url, recorded_at) VALUES (1, ?, ?, ?) "
                  "ON CONFLICT (id) DO UPDATE SET api_url = excluded.api_url, site_url = excluded.site_url, "
                  "recorded_at = excluded.recorded_at", (api_url, site_url, now))
        old_prefix = old_site.rstrip("/")
        c.execute("UPDATE jobs SET url = ? || substr(url, ?), domain = ? WHERE substr(url, 1, ?) = ?",
                  (site_url.rstrip("/"), len(old_prefix) + 1, domain_of(site_url), len(old_prefix), old_prefix))
    log.warning("this database now belongs to --api-url %s and --site-url %s (was %s and %s)",
                api_url, site_url, old_api, old_site)
