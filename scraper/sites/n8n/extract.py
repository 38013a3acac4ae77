"""The row extracted from one n8n template answer (and its page), and its quality score: pure functions.

The answer is that of GET {api}/templates/workflows/{id}; scripts/standin/data holds real ones.
"""

import hashlib
import json
import math
import re
from html.parser import HTMLParser
from typing import Any, TypeGuard

from scraper.base.errors import JobInvalid, ParseError

STICKY_NOTE = "n8n-nodes-base.stickyNote"
SHAPE = "shape"     # the job's invalid kind when the answer's graph is not a graph

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


def load_json(payload: bytes | str | dict, what: str) -> Any:
    if isinstance(payload, dict):
        return payload
    try:
        return json.loads(payload)
    except (ValueError, TypeError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ParseError(f"{what} is not valid JSON: {e}") from e


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)



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


def check_graph(inner: dict | None) -> None:
    """JobInvalid (kind `shape`) when `workflow.workflow` is an object but not a graph: no `nodes` list, or
    a node without a string `type`. One public mirror read the wrong level of `nodes` and committed empty
    workflows; such an answer ends its job rather than being stored as an empty workflow. A null
    `workflow.workflow` is what the API serves for some templates and stays allowed."""
    if inner is None:
        return
    nodes = inner.get("nodes")
    if not isinstance(nodes, list):
        raise JobInvalid(SHAPE, "the answer's 'workflow.workflow' has no 'nodes' list: not a graph")
    for node in nodes:
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            raise JobInvalid(SHAPE, "a node of 'workflow.workflow.nodes' has no string 'type': not a graph")


def is_hollow(inner: dict | None) -> bool:
    """True when the graph is its shape only, as the API answers a paid template: every node that is not
    a sticky note has empty `parameters`, and every sticky note an empty text. A graph with no nodes is
    not hollow (nothing was taken out of it)."""
    nodes = (inner or {}).get("nodes")
    if not isinstance(nodes, list) or not nodes:
        return False
    for node in nodes:
        if not isinstance(node, dict):
            return False        # not a graph's node: nothing says anything was taken out
        params = node.get("parameters")
        if node.get("type") == STICKY_NOTE:
            if isinstance(params, dict) and str(params.get("content") or "").strip():
                return False
        elif params:
            return False
    return True


def explainer_text(description: str | None, notes: list[str]) -> str:
    """The description markdown followed by each sticky note, blank parts left out."""
    # Notes often start with blank lines that only push the text down on the canvas.
    parts = [part.strip() for part in [description or "", *notes]]
    return "\n\n".join(part for part in parts if part)


def find_videos(*texts: str) -> list[str]:
    """YouTube video ids linked or embedded in the texts, unique, in order of first appearance.

    Channel, user and playlist links name no video and are not matched.
    """
    found: dict[str, None] = {}
    for text in texts:
        for match in _VIDEO_RE.finditer(text or ""):
            found.setdefault(next(group for group in match.groups() if group), None)
    return list(found)


def find_images(image_list: list | None, *markdown_texts: str) -> list[str]:
    """Image URLs: the `image` array first, then markdown and <img> images in the texts; unique, in order."""
    found: dict[str, None] = {}
    by_file_id: dict[str, str] = {}
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
    data = load_json(body, "template answer")
    if not isinstance(data, dict):
        raise ParseError("template answer is not a JSON object")
    wf: Any = data.get("workflow")
    if not isinstance(wf, dict):
        raise ParseError("template answer has no 'workflow' object")
    if not is_int(wf.get("id")):
        raise ParseError("template answer has no integer 'workflow.id'")
    if not isinstance(wf.get("name"), str):
        raise ParseError("template answer has no 'workflow.name'")
    inner = wf.get("workflow")
    if inner is not None and not isinstance(inner, dict):
        raise ParseError("'workflow.workflow' is neither an object nor null")

    check_graph(inner)

    info = wf.get("workflowInfo")
    info = info if isinstance(info, dict) else {}
    nodes = (inner or {}).get("nodes")
    inner_nodes = [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []
    node_count = info.get("nodeCount") if is_int(info.get("nodeCount")) else len(inner_nodes)
    node_types = info.get("nodeTypes") if isinstance(info.get("nodeTypes"), dict) else None
    if not node_types:
        node_types = {n["type"] for n in inner_nodes if isinstance(n.get("type"), str)}

    description = wf.get("description") if isinstance(wf.get("description"), str) else None
    notes = sticky_notes(inner)
    user = wf.get("user")
    user = user if isinstance(user, dict) else {}
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
        "total_views": wf.get("totalViews") if is_int(wf.get("totalViews")) else None,
        "created_at": wf.get("createdAt") if isinstance(wf.get("createdAt"), str) else None,
        "images": _json_text(content["images"]),
        "videos": _json_text(content["videos"]),
        "explainer": explainer_text(description, notes),
        "quality_score": 0,
        "fetched_at": fetched_at,
        "content_hash": hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
        "hollow": int(is_hollow(inner)),
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


def quality_score(row: dict[str, Any]) -> int:
    """How complete and useful a template looks, 0-100 (the table is in docs/quality_score.md).

    workflow JSON with nodes 20 | 1 per node, max 15 | 1 per 100 chars of sticky-note text, max 15
    | 1 per 100 chars of description, max 10 | 5 per image, max 10 | 10 if any video
    | 5 if any category | 5 if an author | 2 per power of ten of total views, max 10.
    Sticky-note text is the explainer minus the description. Every component only grows with its
    input, so adding notes, images or videos never lowers the score.
    """
    views, node_count = row.get("total_views"), row.get("node_count")
    views = views if is_int(views) else 0
    node_count = node_count if is_int(node_count) else 0
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


