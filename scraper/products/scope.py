"""Which sources a reader speaks of (`status`, `stats`, `search`, the report): the n8n library only when
the database holds n8n data or the sources file names an n8n source (or, with neither a file nor any data,
the built-in n8n source as before), and the catalogue sources whose items or jobs it holds."""

import dataclasses

from scraper.base.urls import domain_of
from scraper.db import sources_report


@dataclasses.dataclass(frozen=True)
class Scope:
    n8n: bool                   # speak of templates, the listing, n8n.io and YouTube
    items: dict                 # {source: {"live": n, "removed": n}} of the catalogue items stored
    domains: frozenset | None   # the domains the listings show (None: every one the database knows)


def of(conn, s=None):
    """The Scope of the database `conn` under the settings `s` (None: judged by the data alone)."""
    items = sources_report.items_by_source(conn)
    job_domains = sources_report.job_domains(conn)
    n8n_data = sources_report.template_count(conn) > 0 or sources_report.n8n_job_count(conn) > 0
    configured = getattr(s, "sources", ()) if s is not None else ()
    from_file = s is not None and getattr(s, "sources_path", None) is not None
    named_n8n = from_file and any(src.kind == "n8n" for src in configured)
    catalogue_data = bool(items) or any(src.kind == "catalogue" for src in configured) or bool(job_domains)
    n8n = n8n_data or named_n8n or (not from_file and not catalogue_data)
    domains = None
    if not n8n:     # the domains of its jobs and of the configured catalogues: never n8n's or YouTube's rows
        domains = frozenset(job_domains | {domain_of(src.opt("site")) for src in configured
                                           if src.kind == "catalogue" and src.opt("site")})
    return Scope(n8n=n8n, items=items, domains=domains)
