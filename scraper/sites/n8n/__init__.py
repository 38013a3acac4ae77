"""The n8n.io template library: URLs, the search listing, seeding input, and `site`, this package's side
of the site seam (scraper/sites/__init__.py): its fetcher asks the worker's polite GET for the answer
and returns the rows and child jobs to store. The row itself is `extract`'s (scraper/sites/n8n/extract.py).
The answers it reads are those of GET {api}/templates/search (pages of listing entries) and
GET {api}/templates/workflows/{id} (one template); scripts/standin/data holds real ones.
"""

import itertools
import json
import logging
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from scraper.base.errors import FetchError, JobInvalid, ParseError
from scraper.policy import retry
from scraper.sites import Result, Site, check_storable, children_of, unstorable, youtube
from scraper.sites.n8n.extract import (  # noqa: F401 - the package's public names
    SHAPE,
    STICKY_NOTE,
    explainer_text,
    extract,
    extract_page,
    find_images,
    find_videos,
    is_hollow,
    is_int,
    load_json,
    quality_score,
    sticky_notes,
)

log = logging.getLogger(__name__)

SITE = "n8n"
API, PAGE = "api", "page"    # the kinds of raw answer a template keeps
SEARCH_ROWS = 100  # rows per search page; the API answers 400 above 100
_ID_LINE_RE = re.compile(r"[+-]?\d+")
_WORKFLOW_PATH_RE = re.compile(r"/workflows/(\d+)(?:-[^/]*)?/?")


SEARCH_SORT = "createdAt:asc"   # stable, and what n8n's editor sends; the default order is a drifting ranking


def search_url(api_url: str, page: int, rows: int = SEARCH_ROWS) -> str:
    """URL of one page (from 1) of the template listing, oldest first (new templates come last)."""
    return f"{api_url.rstrip('/')}/templates/search?page={page}&rows={rows}&sort={SEARCH_SORT}"


def in_order(items: list[dict], after: str | None = None) -> bool:
    """Whether the entries' `createdAt` go up (from `after`): the API honoured the sort (pure). Entries
    without a text `createdAt` say nothing either way."""
    last = after
    for item in items:
        at = item.get("createdAt")
        if not isinstance(at, str):
            continue
        if last is not None and at < last:
            return False
        last = at
    return True


def detail_url(api_url: str, template_id: int) -> str:
    """URL of the API answer that holds everything about one template."""
    return f"{api_url.rstrip('/')}/templates/workflows/{template_id}"


def page_url(site_url: str, template_id: int) -> str:
    """URL of the public page of one template (the site redirects to the slugged form)."""
    return f"{site_url.rstrip('/')}/workflows/{template_id}"


def job_key(template_id: int) -> str:
    """Queue key of one template, unique across sites."""
    return f"{SITE}:{template_id}"



def parse_search_page(payload: bytes | str | dict) -> tuple[list[int], int]:
    """(template ids on this page, totalWorkflows) of one search answer; ParseError if it is not one."""
    items, total = parse_search_entries(payload)
    return [item["id"] for item in items], total


def parse_search_entries(payload: bytes | str | dict) -> tuple[list[dict], int]:
    """(listing entries on this page, each with an integer `id`, totalWorkflows); ParseError if it is not one."""
    data = load_json(payload, "search page")
    if not isinstance(data, dict) or not isinstance(data.get("workflows"), list):
        raise ParseError("search page has no 'workflows' list")
    total = data.get("totalWorkflows")
    if not is_int(total):
        raise ParseError("search page has no integer 'totalWorkflows'")
    for item in data["workflows"]:
        if not isinstance(item, dict) or not is_int(item.get("id")):
            raise ParseError(f"search page item without an integer id: {str(item)[:80]}")
    return data["workflows"], int(total)


def search_done(page: int, rows: int, got: int, total: int) -> bool:
    """True when page `page` was the last one: it was short, or it reached totalWorkflows."""
    return got < rows or page * rows >= total


def discover(api_url: str, get, limit: int | None = None, ahead=None) -> tuple[dict, bool, int]:
    """The listing from the search API, page after page; `get(url, parse)` is the caller's polite GET,
    which returns `parse(body)` and retries a page whose body `parse` refuses. `ahead(urls)`, when given, is
    told of the pages after the one asked now, in the order the walk asks them, as far as totalWorkflows
    and `limit` say they are needed (the caller may fetch some meanwhile).

    The listing is read in createdAt order (stable: a walk sees each id once). Should the API not honour
    the sort, or the order move anyway, the walk counts distinct ids against totalWorkflows and, when it
    is short, reads the pages a second time, stopping as soon as every listed id was seen; still short,
    the walk is not complete (no removal is inferred from it). Cost: pages requests when the order holds,
    at most 2 x pages otherwise.

    Returns (entries by id in listing order, complete, pages read). A walk stopped by `limit` before
    the last page is not complete."""
    entries: dict[int, dict] = {}
    reads = 0
    ordered = True      # every page so far came in createdAt order: the API honoured the sort
    last_at = None
    total = 0           # totalWorkflows, from the first page on
    for sweep in (1, 2):
        page = 1
        while True:
            if ahead is not None and sweep == 1 and page > 1:
                last = -(-total // SEARCH_ROWS)
                if limit is not None:   # this page brings up to SEARCH_ROWS more; no page past the limit's
                    last = min(last, page - (-(limit - len(entries) - SEARCH_ROWS) // SEARCH_ROWS))
                ahead(search_url(api_url, p) for p in range(page + 1, last + 1))
            items, total = get(search_url(api_url, page), lambda body, page=page: checked_search_page(body, page))
            reads += 1
            if sweep == 1 and ordered and not in_order(items, last_at):
                ordered = False
                log.warning("search page %d is not in %s order: the API did not honour the sort; the walk "
                            "counts distinct ids against totalWorkflows and reads again what it missed",
                            page, SEARCH_SORT)
            last_at = next((i["createdAt"] for i in reversed(items) if isinstance(i.get("createdAt"), str)), last_at)
            # keep ids, not positions: an order that moves can show an id twice and hide another
            for item in items:
                entries.setdefault(item["id"], item)
            log.info("search page %d: %d templates (%d of %d so far)", page, len(items), len(entries), total)
            done = search_done(page, SEARCH_ROWS, len(items), total)
            if limit is not None and len(entries) >= limit:
                kept = dict(itertools.islice(entries.items(), limit))
                return kept, done and len(kept) == len(entries) and len(entries) >= total, reads
            if len(entries) >= total and (done or sweep == 2):
                return entries, True, reads
            if done:
                break
            page += 1
        # fewer distinct ids than totalWorkflows: the order moved under the walk; a second sweep reads the
        # pages again until every listed id was seen (at most 2 x pages requests in all)
        log.warning("the walk saw %d distinct templates of %d listed; reading the listing again", len(entries), total)
    # still short: not complete, so no stored id it missed is taken for a removal
    return entries, False, reads


def checked_search_page(body, page: int) -> tuple[list[dict], int]:
    """parse_search_entries, refusing a page shorter than totalWorkflows says it is: a short page before
    the end would end the walk early, and a partial walk must never pass for the whole library."""
    items, total = parse_search_entries(body)
    expected = min(SEARCH_ROWS, total - (page - 1) * SEARCH_ROWS)
    if len(items) < expected:
        raise ParseError(f"search page {page} lists {len(items)} templates, {expected} were due ({total} in all)")
    return items, total


def _bare_host(host: str | None) -> str:
    host = (host or "").lower()
    return host[4:] if host.startswith("www.") else host


def parse_id_line(line: str, site_url: str) -> int | None:
    """Template id named by one line of a seed file: an id, a job key (`n8n:ID`, as `failures` prints it)
    or a workflow URL on the site's host.

    None for blank lines and '#' comments; ParseError(reason) for anything else.
    """
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    if _ID_LINE_RE.fullmatch(text):
        template_id = int(text)
    elif text.startswith(f"{SITE}:") and _ID_LINE_RE.fullmatch(text[len(SITE) + 1:]):
        template_id = int(text[len(SITE) + 1:])
    else:
        try:
            parts = urlsplit(text)
        except ValueError:  # e.g. a broken [IPv6] host
            raise ParseError("is neither a template id nor a workflow URL") from None
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ParseError("is neither a template id nor a workflow URL")
        site = urlsplit(site_url)
        host, expected = _bare_host(parts.hostname), _bare_host(site.hostname)
        if host != expected:
            raise ParseError(f"names another host ({host}), expected {expected}")
        prefix = site.path.rstrip("/")  # a stand-in site may live under a path
        match = parts.path.startswith(prefix) and _WORKFLOW_PATH_RE.fullmatch(parts.path[len(prefix):])
        if not match:
            raise ParseError("is not a workflow URL (expected /workflows/<id>)")
        template_id = int(match.group(1))
    if template_id <= 0:
        raise ParseError("template id is not a positive integer")
    return template_id


def parse_id_lines(lines: Iterable[str], site_url: str) -> tuple[list[int], list[tuple[int, str, str]]]:
    """(ids in order without repeats, errors as (line number from 1, stripped line, reason))."""
    ids, seen, errors = [], set(), []
    for number, line in enumerate(lines, start=1):
        try:
            template_id = parse_id_line(line, site_url)
        except ParseError as e:
            errors.append((number, line.strip(), str(e)))
            continue
        if template_id is not None and template_id not in seen:
            seen.add(template_id)
            ids.append(template_id)
    return ids, errors



# --- the site seam (see scraper/sites/__init__.py) ------------------------------------------------

def parse_key(key: str) -> int:
    """Template id of a job key 'n8n:<id>'; ParseError for another key."""
    site, _, rest = key.partition(":")
    if site != SITE or not rest.isdigit():
        raise ParseError(f"{key!r} is not an n8n job key")
    return int(rest)


class _Fetcher:
    """n8n needs nothing per process: the worker's polite GET does the requests."""

    def __init__(self, settings):
        self.s = settings

    def fetch(self, job, ctx):
        template_id = parse_key(job.key)
        fetched_at = ctx.fetched_at()
        body = ctx.get(detail_url(self.s.api_url, template_id))
        try:
            row = extract(body, fetched_at)
        except UnicodeEncodeError as e:
            raise unstorable("answer", e) from None
        except JobInvalid as e:
            # a graph that is not a graph: never stored as a workflow, but the answer is kept as served
            raise JobInvalid(e.kind, str(e), Result(rejected=((SITE, str(template_id), body, fetched_at),))) from None
        if row["id"] != template_id:
            raise ParseError(f"answer is for template {row['id']}, not {template_id}")
        raw = {API: body}
        if self.s.with_page:
            page = self._page(ctx, template_id)
            if page is not None:
                row.update(extract_page(page.decode("utf-8", "replace")))
                raw[PAGE] = page
        check_storable(row)
        videos = json.loads(row["videos"])
        links = [{"template_id": template_id, "video_id": v} for v in videos]
        return Result(
            links=(("template_videos", "template_id", template_id, links),),
            children=children_of(self.s, youtube.SITE, videos),
            # the row, its version and its raw answers, in the transaction that marks the job done
            versioned=((row, raw, fetched_at),),
        )

    def _page(self, ctx, template_id):
        """The page's bytes, or None when it is gone (the API answer is the template)."""
        try:
            return ctx.get(page_url(self.s.site_url, template_id))
        except FetchError as e:
            if e.status not in retry.GONE:
                raise
            return None

    def close(self):
        pass


class _Site:
    name = SITE

    def domain(self, settings):
        return settings.domain

    def domains(self, settings):
        return [self.domain(settings)]

    def job_row(self, settings, template_id):
        return job_key(template_id), SITE, page_url(settings.site_url, template_id), settings.domain

    def requests_per_job(self, settings):
        return 2 if settings.with_page else 1   # the API answer, and the page with --with-page

    def open(self, settings):
        return _Fetcher(settings)

    def gone(self, job):
        """A stored template whose detail answer is gone is marked removed; its data and versions stay."""
        return Result(removed=(parse_key(job.key),))


site: Site = _Site()       # mypy checks that it follows the seam

