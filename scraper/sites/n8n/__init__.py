"""The n8n.io template library: URLs, seeding input and the row extracted from one template.

Pure functions, and at the end `site`, this module's side of the site seam (scraper/sites/__init__.py):
its fetcher asks the worker's polite GET for the answer and returns the rows and child jobs to store.
The answers it reads are those of GET {api}/templates/search (pages of listing entries) and
GET {api}/templates/workflows/{id} (one template); scripts/standin/data holds real ones.
"""

import hashlib
import itertools
import json
import logging
import math
import re
from collections.abc import Iterable
from html.parser import HTMLParser
from urllib.parse import urlsplit

from scraper.base.errors import FetchError, ParseError
from scraper.policy import retry
from scraper.sites import Result, check_storable, children_of, unstorable, youtube

log = logging.getLogger(__name__)

SITE = "n8n"
API, PAGE = "api", "page"    # the kinds of raw answer a template keeps
SEARCH_ROWS = 100  # rows per search page; the API answers 400 above 100
STICKY_NOTE = "n8n-nodes-base.stickyNote"

_ID = r"[A-Za-z0-9_-]{11}(?![A-Za-z0-9_-])"  # a YouTube id, and not the start of a longer token
_VIDEO_RE = re.compile(
    rf"@\[youtube\]\(\s*({_ID})\s*\)"
    rf"|(?<![\w.-])youtu\.be/({_ID})"
    rf"|(?<![\w.-])(?:(?:www|m|music)\.)?youtube\.com/watch\?(?:[^\s#\"'<>()]*?&(?:amp;)?)?v=({_ID})"
    rf"|(?<![\w.-])(?:(?:www|m)\.)?youtube(?:-nocookie)?\.com/(?:embed|shorts|live)/({_ID})"
)
# One pattern for both kinds so images come out in the order they appear in the text.
_IMAGE_RE = re.compile(
    r"!\[[^\]]*\]\(\s*<?([^\s)>]+)>?(?:\s+[^)]*)?\)"
    r"|<img\b[^>]*?\bsrc\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>]+))",
    re.IGNORECASE,
)
_FILE_ID_RE = re.compile(r"fileId:(\d+)$")  # n8n's markdown points at its own image[] entries this way
_ID_LINE_RE = re.compile(r"[+-]?\d+")
_WORKFLOW_PATH_RE = re.compile(r"/workflows/(\d+)(?:-[^/]*)?/?")


def search_url(api_url: str, page: int, rows: int = SEARCH_ROWS) -> str:
    """URL of one page (from 1) of the template listing."""
    return f"{api_url.rstrip('/')}/templates/search?page={page}&rows={rows}"


def detail_url(api_url: str, template_id: int) -> str:
    """URL of the API answer that holds everything about one template."""
    return f"{api_url.rstrip('/')}/templates/workflows/{template_id}"


def page_url(site_url: str, template_id: int) -> str:
    """URL of the public page of one template (the site redirects to the slugged form)."""
    return f"{site_url.rstrip('/')}/workflows/{template_id}"


def job_key(template_id: int) -> str:
    """Queue key of one template, unique across sites."""
    return f"{SITE}:{template_id}"


def _load_json(payload: bytes | str | dict, what: str):
    if isinstance(payload, dict):
        return payload
    try:
        return json.loads(payload)
    except (ValueError, TypeError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ParseError(f"{what} is not valid JSON: {e}") from e


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_search_page(payload: bytes | str | dict) -> tuple[list[int], int]:
    """(template ids on this page, totalWorkflows) of one search answer; ParseError if it is not one."""
    items, total = parse_search_entries(payload)
    return [item["id"] for item in items], total


def parse_search_entries(payload: bytes | str | dict) -> tuple[list[dict], int]:
    """(listing entries on this page, each with an integer `id`, totalWorkflows); ParseError if it is not one."""
    data = _load_json(payload, "search page")
    if not isinstance(data, dict) or not isinstance(data.get("workflows"), list):
        raise ParseError("search page has no 'workflows' list")
    total = data.get("totalWorkflows")
    if not _is_int(total):
        raise ParseError("search page has no integer 'totalWorkflows'")
    for item in data["workflows"]:
        if not isinstance(item, dict) or not _is_int(item.get("id")):
            raise ParseError(f"search page item without an integer id: {str(item)[:80]}")
    return data["workflows"], total


def search_done(page: int, rows: int, got: int, total: int) -> bool:
    """True when page `page` was the last one: it was short, or it reached totalWorkflows."""
    return got < rows or page * rows >= total


def discover(api_url: str, get, limit: int | None = None) -> tuple[dict, bool, int]:
    """The listing from the search API, page after page; `get(url, parse)` is the caller's polite GET,
    which returns `parse(body)` and retries a page whose body `parse` refuses.

    Returns (entries by id in listing order, complete, pages read). A walk stopped by `limit` before
    the last page is not complete."""
    entries, page = {}, 1
    while True:
        items, total = get(search_url(api_url, page), lambda body, page=page: checked_search_page(body, page))
        # the default order is a popularity ranking that moves between calls: keep ids, not positions
        for item in items:
            entries.setdefault(item["id"], item)
        log.info("search page %d: %d templates (%d of %d so far)", page, len(items), len(entries), total)
        done = search_done(page, SEARCH_ROWS, len(items), total)
        if limit is not None and len(entries) >= limit:
            kept = dict(itertools.islice(entries.items(), limit))
            return kept, done and len(kept) == len(entries), page
        if done:
            return entries, True, page
        page += 1


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
    """Template id named by one line of a seed file: an id or a workflow URL on the site's host.

    None for blank lines and '#' comments; ParseError(reason) for anything else.
    """
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    if _ID_LINE_RE.fullmatch(text):
        template_id = int(text)
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


def sticky_notes(workflow_obj: dict | None) -> list[str]:
    """Text of the sticky notes of a workflow, in node order."""
    nodes = workflow_obj.get("nodes") if isinstance(workflow_obj, dict) else None
    notes = []
    for node in nodes if isinstance(nodes, list) else []:
        if isinstance(node, dict) and node.get("type") == STICKY_NOTE:
            content = (node.get("parameters") or {}).get("content")
            if isinstance(content, str):
                notes.append(content)
    return notes


def explainer_text(description: str | None, notes: list[str]) -> str:
    """The description markdown followed by each sticky note, blank parts left out."""
    # Notes often start with blank lines that only push the text down on the canvas.
    parts = [part.strip() for part in [description or "", *notes]]
    return "\n\n".join(part for part in parts if part)


def find_videos(*texts: str) -> list[str]:
    """YouTube video ids linked or embedded in the texts, unique, in order of first appearance.

    Channel, user and playlist links name no video and are not matched.
    """
    found = {}
    for text in texts:
        for match in _VIDEO_RE.finditer(text or ""):
            found.setdefault(next(group for group in match.groups() if group), None)
    return list(found)


def find_images(image_list: list | None, *markdown_texts: str) -> list[str]:
    """Image URLs: the `image` array first, then markdown and <img> images in the texts; unique, in order."""
    found, by_file_id = {}, {}
    for item in image_list or []:
        if isinstance(item, dict) and isinstance(item.get("url"), str) and item["url"].strip():
            found.setdefault(item["url"].strip(), None)
            by_file_id[str(item.get("id"))] = item["url"].strip()
    for text in markdown_texts:
        for match in _IMAGE_RE.finditer(text or ""):
            url = next(group for group in match.groups() if group is not None).strip()
            file_ref = _FILE_ID_RE.match(url)
            if file_ref:
                url = by_file_id.get(file_ref.group(1), "")
            url = url.replace("&amp;", "&")
            # Expressions like {{ $json.url }}, data: URIs and relative paths are not fetchable images.
            if url.startswith(("http://", "https://")):
                found.setdefault(url, None)
    return list(found)


def _json_text(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _names(items) -> list[str]:
    return [item["name"] for item in items or [] if isinstance(item, dict) and isinstance(item.get("name"), str)]


def extract(body: bytes | str, fetched_at: str) -> dict:
    """One `workflows` row from the answer of GET {api}/templates/workflows/{id}; ParseError if unusable."""
    data = _load_json(body, "template answer")
    if not isinstance(data, dict):
        raise ParseError("template answer is not a JSON object")
    wf = data.get("workflow")
    if not isinstance(wf, dict):
        raise ParseError("template answer has no 'workflow' object")
    if not _is_int(wf.get("id")):
        raise ParseError("template answer has no integer 'workflow.id'")
    if not isinstance(wf.get("name"), str):
        raise ParseError("template answer has no 'workflow.name'")
    inner = wf.get("workflow")
    if inner is not None and not isinstance(inner, dict):
        raise ParseError("'workflow.workflow' is neither an object nor null")

    info = wf.get("workflowInfo") if isinstance(wf.get("workflowInfo"), dict) else {}
    nodes = (inner or {}).get("nodes")
    inner_nodes = [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []
    node_count = info.get("nodeCount") if _is_int(info.get("nodeCount")) else len(inner_nodes)
    node_types = info.get("nodeTypes") if isinstance(info.get("nodeTypes"), dict) else None
    if not node_types:
        node_types = {n["type"] for n in inner_nodes if isinstance(n.get("type"), str)}

    description = wf.get("description") if isinstance(wf.get("description"), str) else None
    notes = sticky_notes(inner)
    user = wf.get("user") if isinstance(wf.get("user"), dict) else {}
    content = {
        "name": wf["name"],
        "description": description,
        "workflow": inner,
        "categories": _names(wf.get("categories")),
        "images": find_images(wf.get("image"), description or "", *notes),
        "videos": find_videos(description or "", *notes),
    }
    canonical = json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    row = {
        "id": wf["id"],
        "name": wf["name"],
        "description": description,
        "author": user.get("username") if isinstance(user.get("username"), str) else None,
        "categories": _json_text(content["categories"]),
        "node_count": node_count,
        "node_types": _json_text(sorted(node_types)),
        "workflow": None if inner is None else _json_text(inner),
        "total_views": wf.get("totalViews") if _is_int(wf.get("totalViews")) else None,
        "created_at": wf.get("createdAt") if isinstance(wf.get("createdAt"), str) else None,
        "images": _json_text(content["images"]),
        "videos": _json_text(content["videos"]),
        "explainer": explainer_text(description, notes),
        "quality_score": 0,
        "fetched_at": fetched_at,
        "content_hash": hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
    }
    row["quality_score"] = quality_score(row)
    return row


class _PageParser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.title, self.description, self.meta = None, None, {}
        self._in_title, self._svg_depth, self._title_parts = False, 0, []

    def handle_starttag(self, tag, attrs):
        attrs = {name.lower(): value for name, value in attrs}
        if tag == "svg":
            self._svg_depth += 1
        elif tag == "title" and self.title is None and not self._svg_depth:
            self._in_title = True  # an <svg> icon's <title> is not the page title
        elif tag == "meta" and attrs.get("content") is not None:
            key = (attrs.get("property") or attrs.get("name") or "").strip().lower()
            if key == "description" and self.description is None:
                self.description = attrs["content"].strip()
            elif key.startswith(("og:", "twitter:")):
                self.meta.setdefault(key, attrs["content"].strip())

    def handle_endtag(self, tag):
        if tag == "svg" and self._svg_depth:
            self._svg_depth -= 1
        elif tag == "title" and self._in_title:
            self._in_title = False
            self.title = "".join(self._title_parts).strip()

    def handle_data(self, data):
        if self._in_title:
            self._title_parts.append(data)

    def close(self):
        super().close()
        if self._in_title:  # an unclosed <title>: keep what it held
            self.handle_endtag("title")


def extract_page(html: str) -> dict:
    """page_title, page_description and page_og (JSON text of og:* and twitter:* tags) of a template page."""
    parser = _PageParser()
    parser.feed(html or "")
    parser.close()
    return {
        "page_title": parser.title or None,
        "page_description": parser.description,
        "page_og": _json_text(parser.meta),
    }


def _as_list(value) -> list:
    """A row's list field, whether still a list or already JSON text."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return value if isinstance(value, list) else []


def _has_nodes(workflow) -> bool:
    if isinstance(workflow, str):
        try:
            workflow = json.loads(workflow)
        except ValueError:
            return False
    return isinstance(workflow, dict) and bool(workflow.get("nodes"))


def quality_score(row: dict) -> int:
    """How complete and useful a template looks, 0-100 (the table is in docs/quality_score.md).

    workflow JSON with nodes 20 | 1 per node, max 15 | 1 per 100 chars of sticky-note text, max 15
    | 1 per 100 chars of description, max 10 | 5 per image, max 10 | 10 if any video
    | 5 if any category | 5 if an author | 2 per power of ten of total views, max 10.
    Sticky-note text is the explainer minus the description. Every component only grows with its
    input, so adding notes, images or videos never lowers the score.
    """
    views = row.get("total_views") if _is_int(row.get("total_views")) else 0
    node_count = row.get("node_count") if _is_int(row.get("node_count")) else 0
    description = len((row.get("description") or "").strip())
    notes = max(len(row.get("explainer") or "") - description, 0)
    points = [
        20 if _has_nodes(row.get("workflow")) else 0,
        min(max(node_count, 0), 15),
        min(notes // 100, 15),
        min(description // 100, 10),
        min(5 * len(_as_list(row.get("images"))), 10),
        10 if _as_list(row.get("videos")) else 0,
        5 if _as_list(row.get("categories")) else 0,
        5 if row.get("author") else 0,
        min(int(2 * math.log10(views)), 10) if views >= 1 else 0,
    ]
    return max(0, min(100, sum(points)))


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

    def job_row(self, settings, template_id):
        return job_key(template_id), SITE, page_url(settings.site_url, template_id), settings.domain

    def open(self, settings):
        return _Fetcher(settings)

    def gone(self, job):
        """A stored template whose detail answer is gone is marked removed; its data and versions stay."""
        return Result(removed=(parse_key(job.key),))


site = _Site()
