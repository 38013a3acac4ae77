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
            job = c.execute("SELECT url FROM jobs WHERE site = 'n8n' LIMIT 1").fetchone()   # not a catalogue's
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
        c.execute("UPDATE jobs SET url = ? || substr(url, ?), domain = ? WHERE site = 'n8n' AND substr(url, 1, ?) = ?",
                  (site_url.rstrip("/"), len(old_prefix) + 1, domain_of(site_url), len(old_prefix), old_prefix))
    log.warning("this database now belongs to --api-url %s and --site-url %s (was %s and %s)",
                api_url, site_url, old_api, old_site)


def own_n8n_jobs(conn, settings):
    """Give the n8n and youtube jobs to the n8n source of the sources file when it has another name than
    the built-in `n8n` (its jobs keep their data whatever the source is called). Returns how many moved."""
    name = settings.n8n_source
    with transaction(conn) as c:
        return c.execute("UPDATE jobs SET source = ? WHERE site IN ('n8n', 'youtube') AND source != ?",
                         (name, name)).rowcount


def check_site(conn, source, adopt=False, now=0.0):
    """The catalogue twin of `check`: record the home URL a catalogue source is walked from; ConfigError
    when the file now gives another, unless `adopt` (then its jobs' URLs and domain move with it)."""
    site = source.opt("site")
    with transaction(conn) as c:
        row = c.execute("SELECT site FROM source_sites WHERE source = ?", (source.name,)).fetchone()
        if row is not None and _same(row["site"], site):
            return
        if row is not None and not adopt:
            raise ConfigError(
                f"the source {source.name!r} of this database was walked from {row['site']}, not {site}; give "
                f"its site back in the sources file, use another --db, or add --adopt-urls to move it.")
        c.execute("INSERT INTO source_sites (source, site, recorded_at) VALUES (?, ?, ?) ON CONFLICT (source) "
                  "DO UPDATE SET site = excluded.site, recorded_at = excluded.recorded_at", (source.name, site, now))
        if row is None:
            return
        old_prefix, new_prefix = _origin(row["site"]), _origin(site)
        c.execute("UPDATE jobs SET url = ? || substr(url, ?), domain = ? WHERE source = ? AND substr(url, 1, ?) = ?",
                  (new_prefix, len(old_prefix) + 1, domain_of(site), source.name, len(old_prefix), old_prefix))
    log.warning("the source %s now walks %s (was %s)", source.name, site, row["site"])
