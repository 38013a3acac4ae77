"""Where a database's jobs come from: the API and site URLs it was seeded from, checked by `seed` and
`run`, so a database filled from the local stand-in is never run against n8n.io (or the reverse)."""

import logging
from urllib.parse import urlsplit

from scraper.base.errors import ConfigError
from scraper.base.sources import DEFAULT_PATH
from scraper.base.urls import domain_of
from scraper.db import origin, sources_report
from scraper.db.store import transaction

log = logging.getLogger(__name__)


def _same(a, b):
    return a.rstrip("/") == b.rstrip("/")


def _origin(url):
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def recorded(conn):
    """(api_url, site_url) the database belongs to, or None before its first seed."""
    return origin.recorded(conn)


def check(conn, api_url, site_url, adopt=False, now=0.0):
    """Record the URLs on first use; ConfigError naming the database's own URLs when others are given.
    With `adopt`, the database moves to the given URLs (its jobs' URLs and domain with it)."""
    with transaction(conn) as c:
        row = origin.recorded(c)
        if row is not None:
            old_api, old_site = row
        else:
            # a database seeded before the URLs were recorded: its jobs' URLs tell the site
            job_url = origin.first_n8n_job_url(c)   # not a catalogue's
            old_api, old_site = api_url, _origin(job_url) if job_url else site_url
            if _origin(old_site) == _origin(site_url):
                old_site = site_url
        if _same(old_api, api_url) and _same(old_site, site_url):
            if row is None:
                origin.record(c, api_url, site_url, now)
            return
        if not adopt:
            raise ConfigError(
                f"this database belongs to --api-url {old_api} and --site-url {old_site} (it was seeded "
                f"from them), not {api_url} and {site_url}; give its URLs, use another --db, or add "
                f"--adopt-urls to move it to the new ones."
            )
        origin.record(c, api_url, site_url, now)
        origin.move_jobs(c, old_site.rstrip("/"), site_url.rstrip("/"), domain_of(site_url), site="n8n")
    log.warning("this database now belongs to --api-url %s and --site-url %s (was %s and %s)",
                api_url, site_url, old_api, old_site)


def own_n8n_jobs(conn, settings):
    """Give the n8n and youtube jobs to the n8n source of the sources file when it has another name than
    the built-in `n8n` (its jobs keep their data whatever the source is called). Returns how many moved."""
    name = settings.n8n_source
    with transaction(conn) as c:
        return origin.give_jobs(c, ("n8n", "youtube"), name)


def unnamed(conn, settings):
    """[(source, jobs)] of the sources that hold jobs in this database but are not in the configured set
    (a sources file in the folder replaces the built-in n8n source): seed, update and run leave their jobs
    alone. The jobs of `n8n` are the n8n source's under whatever name the file gives it."""
    named = {src.name for src in settings.sources}
    if any(src.kind == "n8n" for src in settings.sources):
        named.add("n8n")
    return sorted((name, sum(counts.values())) for name, counts in sources_report.jobs_by_source(conn).items()
                  if name not in named)


def unnamed_warnings(conn, settings):
    """One sentence per source `unnamed` finds: the set that leaves it out, its jobs, how to keep it."""
    path = settings.sources_path
    if path is None:
        where = "the built-in source set (no sources file)"
    elif path == f"./{DEFAULT_PATH}":
        where = f"./{DEFAULT_PATH} (read because it is in this folder)"
    else:
        where = path
    out = []
    for name, jobs in unnamed(conn, settings):
        table = ('a [[source]] table with name = "n8n" and kind = "n8n"' if name == "n8n"
                 else f'its [[source]] table (name = "{name}") back')
        out.append(f"{where} does not name the source {name!r}, which holds {jobs} job(s) in this database: seed, "
                   f"update and run leave them alone; add {table} to keep it (with enabled = false to leave "
                   f"it alone knowingly)")
    return out


def check_site(conn, source, adopt=False, now=0.0):
    """The catalogue twin of `check`: record the home URL a catalogue source is walked from; ConfigError
    when the file now gives another, unless `adopt` (then its jobs' URLs and domain move with it)."""
    site = source.opt("site")
    with transaction(conn) as c:
        old = origin.site_of(c, source.name)
        if old is not None and _same(old, site):
            return
        if old is not None and not adopt:
            raise ConfigError(
                f"the source {source.name!r} of this database was walked from {old}, not {site}; give "
                f"its site back in the sources file, use another --db, or add --adopt-urls to move it.")
        origin.record_site(c, source.name, site, now)
        if old is None:
            return
        origin.move_jobs(c, _origin(old), _origin(site), domain_of(site), source=source.name)
    log.warning("the source %s now walks %s (was %s)", source.name, site, old)
