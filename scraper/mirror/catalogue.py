"""The walk of a catalogue source: read its sitemaps, keep the pages it wants, queue what needs a fetch.

`walk(conn, settings, source, get, now)` (the walk seam of scraper/mirror/walks.py) reads the source's
sitemaps through `get` (the polite, bounded GET of seeding; FetchError on failure), index after index
up to MAX_INDEX_DEPTH, and keeps the URLs of the site's host whose path passes `include` and `exclude`.
`plan()` (pure) sorts them: new (never queued), changed (a `lastmod` newer than the item's last fetch),
restored (removed, listed again) and missing (stored and live, absent from a complete walk). Missing
ones are only queued again: the worker confirms the removal on a 404/410, the data and versions kept.
Only a complete walk (every sitemap read, no bound reached) can miss anything.
"""

import dataclasses
import logging
import re
from urllib.parse import urljoin, urlsplit

from scraper.base.errors import ConfigError, FetchError, ParseError
from scraper.db import items as item_rows
from scraper.db.queue import Queue
from scraper.db.store import transaction
from scraper.mirror import sync
from scraper.mirror.lastmod import Dates
from scraper.sites import catalogue, sitemaps

log = logging.getLogger(__name__)

MAX_INDEX_DEPTH = 3           # index > index > index > urlset: deeper is a loop or a hostile site
MAX_SITEMAPS = 1_000          # sitemap files one walk may read
MAX_URLS = 1_000_000          # page URLs one walk may keep


@dataclasses.dataclass(frozen=True)
class WalkResult:
    new: int = 0
    changed: int = 0
    removed: int = 0          # queued to confirm
    restored: int = 0
    complete: bool = False
    requests: int = 0
    listed: int = 0
    errors: tuple = ()        # why the walk is not complete, one sentence each
    left_out: int = 0         # page URLs of the site's host that `include`/`exclude` left out
    checked: int = 0          # stored pages queued although their date did not move (mirror/lastmod)


def sitemap_urls(source, robots_sitemaps=None) -> list:
    """Which sitemaps to read: the source's `sitemaps`, else those its robots.txt names, else
    <site>/sitemap.xml."""
    given = list(source.opt("sitemaps") or ())
    if given:
        return given
    if robots_sitemaps:
        return list(robots_sitemaps)
    return [urljoin(source.opt("site"), "/sitemap.xml")]


def _bare(host):
    host = (host or "").lower()
    return host[4:] if host.startswith("www.") else host


def _patterns(source, key):
    try:
        return [re.compile(p) for p in source.opt(key) or ()]
    except re.error as e:
        raise ConfigError(f"source {source.name!r}: `{key}` holds a regular expression that does not compile "
                          f"({e}).") from None


def wanted(source):
    """A predicate on page URLs: the site's host, http(s), `include` (any, when given) and not `exclude`."""
    host = _bare(urlsplit(source.opt("site")).hostname)
    include, exclude = _patterns(source, "include"), _patterns(source, "exclude")

    def keep(url):
        try:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or _bare(parts.hostname) != host:
                return False
        except ValueError:
            return False
        path = catalogue.path_of(url)
        return (not include or any(p.search(path) for p in include)) and not any(p.search(path) for p in exclude)
    return keep


class Kept:
    """`wanted(source)` that also counts the distinct page URLs of the site's host it leaves out."""

    def __init__(self, source):
        self.keep = wanted(source)
        self.host_only = wanted(_without_filters(source))
        self.left_out = set()

    def __call__(self, url):
        if self.keep(url):
            return True
        if self.host_only(url):
            self.left_out.add(catalogue.path_of(url))
        return False


def _without_filters(source):
    import dataclasses as dc
    return dc.replace(source, options=tuple((k, v) for k, v in source.options if k not in ("include", "exclude")))


def read(get, urls, keep, max_sitemaps=MAX_SITEMAPS, max_urls=MAX_URLS, kept=None):
    """({path: (url, lastmod)}, complete, requests, errors) from the sitemaps `urls`, their indexes followed.
    `kept` (a walk's polite GET, when the source's dates are trusted): a child sitemap whose index `lastmod`
    has not moved since it was fetched is read from what was kept of it, with no request."""
    found, errors, requests, seen = {}, [], 0, set()
    todo = [(u, 0, None) for u in urls]
    while todo:
        url, depth, dated = todo.pop(0)
        if url in seen:
            continue
        if len(seen) >= max_sitemaps:
            errors.append(f"more than {max_sitemaps} sitemaps; the rest were not read")
            break
        seen.add(url)
        try:
            body = kept.kept_sitemap(url, dated) if kept is not None else None
            if body is None:
                requests += 1
                body = get(url)
                if hasattr(get, "dated"):
                    get.dated(url, dated)
            sitemap = sitemaps.parse(body)
        except (FetchError, ParseError) as e:
            errors.append(f"{url}: {e}")
            continue
        if sitemap.kind == sitemaps.INDEX:
            if depth >= MAX_INDEX_DEPTH:
                errors.append(f"{url}: sitemap indexes nested more than {MAX_INDEX_DEPTH} deep")
                continue
            parent = _bare(urlsplit(url).hostname)
            for loc, lastmod in sitemap.entries:
                if _bare(urlsplit(loc).hostname) == parent:
                    todo.append((loc, depth + 1, lastmod))
            continue
        for loc, lastmod in sitemap.entries:
            if keep(loc):
                path = catalogue.path_of(loc)
                old = found.get(path)
                if old is None or (lastmod or "") > (old[1] or ""):
                    found[path] = (loc, lastmod)
                if len(found) > max_urls:
                    errors.append(f"more than {max_urls:,} pages listed; the rest were not read")
                    return found, False, requests, errors
    return found, not errors, requests, errors


def plan(listed, complete, jobs, items):
    """What a walk means (pure). `listed`: {path: (url, lastmod)}; `jobs`: {path: finished_at ISO or
    None} of the source's jobs; `items`: {path: (fetched_at, removed_at, lastmod seen by the last walk)}.
    A lastmod already seen is no news: a site that dates its pages in the future is not fetched each walk."""
    new, changed, restored = [], [], []
    for path, (_, lastmod) in listed.items():
        item = items.get(path)
        if item is None:
            if path not in jobs:
                new.append(path)
            elif lastmod and jobs[path] and lastmod >= jobs[path]:
                changed.append(path)          # it failed before; the page changed since
        elif item[1] is not None:
            restored.append(path)
        elif lastmod and lastmod >= item[0] and lastmod != item[2]:   # >=: both are to the second
            changed.append(path)
    missing = sorted(p for p, (_, removed_at, _) in items.items() if removed_at is None and p not in listed) \
        if complete else []
    return sync.Plan(new, changed, missing, restored)


def read_robots(source, get, polite=None) -> list:
    """The sitemaps the site's robots.txt names on the site's own host (one GET through `get`, or the
    robots.txt `polite` keeps for the run: a walk's GET of the polite client); none when the source gives
    its `sitemaps`, or robots.txt cannot be read or names none."""
    if source.opt("sitemaps"):
        return []
    try:
        if polite is not None and hasattr(polite, "sitemaps_of"):
            before = polite.requests
            kept = polite.sitemaps_of(source.opt("site"))
            get.n += polite.requests - before       # robots.txt counts among the walk's requests
            named = sitemaps.from_robots("".join(f"Sitemap: {u}\n" for u in kept).encode())     # its bounds
        else:
            named = sitemaps.from_robots(get(urljoin(source.opt("site"), "/robots.txt")))
    except FetchError as e:
        log.info("source %s: no robots.txt to read its sitemaps from (%s); /sitemap.xml then", source.name, e)
        return []
    host = _bare(urlsplit(source.opt("site")).hostname)
    return [u for u in named if _bare(urlsplit(u).hostname) == host]   # another host is not this source's


def walk(conn, settings, source, get, now, robots_sitemaps=None) -> WalkResult:
    """Walk one catalogue source: read its sitemaps (those of robots.txt when the source names none and
    the caller gives none), queue new, changed, restored and missing pages."""
    counted = _Counted(get)
    if robots_sitemaps is None:
        robots_sitemaps = read_robots(source, counted, polite=get)
    keep = Kept(source)
    dates = Dates(conn, settings, source, now)
    listed, complete, requests, errors = read(counted, sitemap_urls(source, robots_sitemaps), keep,
                                              kept=get if dates.trusted else None)
    left_out = len(keep.left_out)
    for e in errors:
        log.warning("source %s: %s", source.name, e)
    finished, items = item_rows.walk_state(conn, source.name, catalogue.SITE)
    jobs = {path: (None if f is None else sync.iso(f)) for path, f in finished.items()}
    p = plan(listed, complete, jobs, items)
    checks = dates.checks(listed, items, set(p.changed) | set(p.restored))
    queue = Queue(conn)
    rows = [catalogue.site.job_row(settings, (source.name, listed[path][0])) for path in p.new]
    new, _ = queue.seed(rows, now)
    queue.refetch([catalogue.job_key(source.name, path) for path in p.changed + p.missing + p.restored + checks],
                  now)
    at = sync.iso(now)
    with transaction(conn) as c:
        item_rows.seen(c, source.name, at, [(path, listed[path][1]) for path in listed])
    log.info("source %s: %d listed, %d left out by include/exclude, %d new, %d changed, %d missing (queued to "
             "confirm), %d restored, %d checked although their date did not move (dates %s)%s", source.name,
             len(listed), left_out, new, len(p.changed), len(p.missing), len(p.restored), len(checks),
             "trusted" if dates.trusted else "not trusted", "" if complete else
             " (incomplete walk: nothing counted as missing)")
    return WalkResult(new=new, changed=len(p.changed), removed=len(p.missing), restored=len(p.restored),
                      complete=complete, requests=counted.n, listed=len(listed), errors=tuple(errors),
                      left_out=left_out, checked=len(checks))


class _Counted:
    def __init__(self, get):
        self.get, self.n = get, 0
        if hasattr(get, "dated"):
            self.dated = get.dated

    def __call__(self, url):
        self.n += 1
        return self.get(url)
