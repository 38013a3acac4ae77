"""The stand-in's template corpus, built deterministically from the real n8n data in ``data/``.

Every template id is one of the real ids (``data/workflow_urls_6022.jsonl``, in id order); its answers are
made from one of the 100 real search items and one of the 20 real workflow definitions. Which ids are
missing and which carry which fault follows from one shuffle by the seed.
"""

import collections
import gzip
import hashlib
import html
import json
import random
import re
from pathlib import Path

from .faults import share

DATA_DIR = Path(__file__).resolve().parent / "data"
MAX_TEMPLATES = 6022
YOUTUBE_CHANNEL = "https://www.youtube.com/@n8n-io"
BLOB_ASSETS = "https://n8niostorageaccount.blob.core.windows.net/n8nio-strapi-blobs-prod/assets/"
DEFAULT_OG_IMAGE = BLOB_ASSETS + "n8n_workflow_template_og.png"

# Used when a template's nodes carry no category at all.
_FALLBACK_CATEGORIES = (
    {"id": 9, "name": "Core Nodes"},
    {"id": 5, "name": "Development"},
    {"id": 4, "name": "Productivity"},
    {"id": 3, "name": "Data & Storage"},
)

# Per-id values are spliced into JSON serialised once per (search item, definition) pair.
_PH_RE = re.compile(rb'"@@STANDIN_([A-Z]+)@@"')
_PH_ID = "@@STANDIN_ID@@"
_PH_NAME = "@@STANDIN_NAME@@"
_PH_IMAGE = "@@STANDIN_IMAGE@@"
_PH_VIEWS = "@@STANDIN_VIEWS@@"
_PH_RECENT = "@@STANDIN_RECENT@@"

_NO_YOUTUBE = re.compile(rb"youtu", re.I)   # every YouTube link form starts so; spoilt, no id is found


def own_video_id(tid):
    """The 11-character YouTube id of template tid's own video (`video_every`)."""
    return f"sv{tid:09d}"[-11:]


def dumps(obj):
    """Compact UTF-8 JSON bytes, like the real API."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _compile(obj):
    """Serialise obj once; return [bytes, key, bytes, key, ..., bytes] split at the placeholders."""
    return _PH_RE.split(dumps(obj))


def _render(parts, values):
    """Fill a compiled template; values maps placeholder key (bytes) -> JSON bytes."""
    out = list(parts)
    out[1::2] = [values[key] for key in parts[1::2]]
    return b"".join(out)


def plain_text(markdown):
    """Markdown description -> one line of plain text (for meta descriptions)."""
    text = re.sub(r"@\[youtube\]\([^)]*\)", " ", markdown)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[#*_`>]+", "", text)
    return " ".join(text.split())


def _meta_description(markdown, limit=150):
    text = plain_text(markdown)
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return cut[:space] if space > limit // 2 else cut


def _slug_of(url, template_id):
    tail = url.rstrip("/").rsplit("/", 1)[-1]
    prefix = f"{template_id}-"
    return tail[len(prefix):] if tail.startswith(prefix) else ""


def read_data(data_dir, name):
    """The text of data file `name`, stored gzipped (`name.gz`, the bytes as they were published)."""
    with gzip.open(Path(data_dir) / f"{name}.gz", "rt", encoding="utf-8") as fh:
        return fh.read()


def load_json(data_dir, name):
    return json.loads(read_data(data_dir, name))


def hollow(body):
    """A detail answer as n8n.io serves a paid template: the graph's shape only."""
    obj = json.loads(body)
    for node in (obj["workflow"].get("workflow") or {}).get("nodes") or []:
        node["parameters"] = {"content": ""} if node.get("type") == "n8n-nodes-base.stickyNote" else {}
    return dumps(obj)


class Corpus:
    """The deterministic template corpus, with JSON answers precompiled per data combination."""

    def __init__(self, data_dir, templates, seed, faults, missing_fraction, video_every=0, paid_every=0):
        """`video_every` N > 0: every Nth template (by position) links one video of its own, the others
        none (the data's videos are left out): a bench's count of transcript jobs, set by one number.
        `paid_every` N > 0: every Nth template (by position) is paid, as recorded on n8n.io: its listing
        entry carries `price` and `purchaseUrl`, its detail answer is hollow (every node's `parameters`
        and every sticky note's text empty)."""
        data_dir = Path(data_dir)
        if paid_every < 0:
            raise ValueError("paid_every must be >= 0")
        self.paid_every = paid_every
        if video_every < 0:
            raise ValueError("video_every must be >= 0")
        self.video_every = video_every
        if not 1 <= templates <= MAX_TEMPLATES:
            raise ValueError(f"templates must be within 1..{MAX_TEMPLATES}, got {templates}")
        if not 0.0 <= missing_fraction <= 1.0:
            raise ValueError("missing_fraction must be within 0..1")
        search_items = load_json(data_dir, "search_page1_rows100.json")
        definitions = load_json(data_dir, "workflow_definitions_20.json")
        t6270 = load_json(data_dir, "workflows_templates_6270.json")
        rows = [json.loads(line) for line in read_data(data_dir, "workflow_urls_6022.jsonl").splitlines()
                if line.strip()]
        rows.sort(key=lambda row: row["id"])
        self._spare = rows[templates:]      # what /_standin/library adds, in id order
        rows = rows[:templates]

        # The 6270 file is a genuine importable answer: prefer it over the cached copy of 6270.
        workflows = [t6270["workflow"] if d["id"] == t6270["id"] else d["workflow"] for d in definitions]

        self.ids = [row["id"] for row in rows]
        self.slugs = {row["id"]: _slug_of(row["url"], row["id"]) for row in rows}
        self.position = {tid: k for k, tid in enumerate(self.ids)}
        self.names = {}
        self._base_names = [item["name"] for item in search_items]
        for k, tid in enumerate(self.ids):
            self.names[tid] = self._name(k, tid)
        # the library as changed by /_standin/library: removed ids, edit counts, a views round
        self.removed, self.edits, self.views_round = set(), {}, 0

        # Since 20 divides 100, k % 100 fixes k % 20: at most 100 distinct combinations.
        n_combo = min(len(search_items), templates)
        self._base_views = [int(search_items[c].get("totalViews") or 0) for c in range(n_combo)]
        self._search_parts, self._detail_parts, self._import_parts, self._page_info = [], [], [], []
        for c in range(n_combo):
            item = search_items[c]
            wf = workflows[c % len(workflows)]
            self._search_parts.append(_compile(self._search_item(item)))
            self._detail_parts.append(_compile(self._detail(item, wf, c)))
            self._import_parts.append(_compile({"id": _PH_ID, "name": _PH_NAME, "workflow": self._inner(wf)}))
            self._page_info.append(
                {
                    "description": item.get("description") or "",
                    "meta": _meta_description(item.get("description") or ""),
                    "user": item.get("user") or {},
                    "categories": self._categories(item, c),
                    "created": item.get("createdAt") or "",
                }
            )
        self._values = {}
        self._images = {}
        for tid in self.ids:
            self._images[tid] = self._image_list(tid)
            self._values[tid] = self._values_of(tid)

        # One shuffle decides everything: missing ids first, then one slice per fault kind.
        order = list(self.ids)
        random.Random(seed).shuffle(order)
        n_missing = share(missing_fraction, templates)
        self.missing = set(order[:n_missing])
        pos = n_missing
        self.faults = {}
        for kind, times, fraction in faults:
            n = share(fraction, templates)
            if pos + n > templates:
                raise ValueError("faults and missing ids add up to more than the whole corpus")
            for tid in order[pos:pos + n]:
                self.faults[tid] = (kind, times)
            pos += n

    def _name(self, k, tid):
        base = self._base_names[k % len(self._base_names)]
        return base if k < len(self._base_names) else f"{base} #{tid}"

    def _values_of(self, tid):
        views = self._base_views[self.combo(tid)] + self.views_round * (tid % 50 + 1)
        return {b"ID": str(tid).encode(), b"NAME": dumps(self.names[tid]), b"IMAGE": dumps(self._images[tid]),
                b"VIEWS": str(views).encode(), b"RECENT": str(views // 10).encode()}

    def listed(self):
        """The ids the listing shows, in its order."""
        return [tid for tid in self.ids if tid not in self.removed] if self.removed else self.ids

    def change(self, add=0, edit=(), edit_workflow=(), remove=(), restore=(), views=0):
        """Change the library between runs: add the next `add` templates, edit some visibly (name,
        description, workflow), some only in the workflow JSON, remove or restore some, and move every
        view count on by `views` rounds. Returns the ids added."""
        unknown = [t for t in [*edit, *edit_workflow, *remove, *restore] if t not in self.position]
        if unknown or add < 0 or add > len(self._spare):
            raise ValueError(f"unknown ids {unknown[:5]} or bad add {add} (at most {len(self._spare)})")
        added = []
        for row in self._spare[:add]:
            tid = row["id"]
            self.position[tid] = len(self.ids)
            self.ids.append(tid)
            self.slugs[tid] = _slug_of(row["url"], tid)
            self.names[tid] = self._name(self.position[tid], tid)
            self._images[tid] = self._image_list(tid)
            added.append(tid)
        del self._spare[:add]
        for tid in edit:
            visible, workflow_only = self.edits.get(tid, (0, 0))
            self.edits[tid] = (visible + 1, workflow_only)
            self.names[tid] = f"{self._name(self.position[tid], tid)} (edit {visible + 1})"
        for tid in edit_workflow:
            visible, workflow_only = self.edits.get(tid, (0, 0))
            self.edits[tid] = (visible, workflow_only + 1)
        self.removed = (self.removed | set(remove)) - set(restore)
        self.views_round += views
        for tid in self.ids:
            self._values[tid] = self._values_of(tid)
        return added

    def _edited(self, tid, body, detail):
        """body with tid's edits applied (only edited ids pay for the JSON round trip)."""
        visible, workflow_only = self.edits.get(tid, (0, 0))
        if not visible and not workflow_only:
            return body
        obj = json.loads(body)
        item = obj["workflow"] if detail else obj
        if visible:
            item["description"] = f"{item.get('description') or ''}\n\nEdited {visible} times on the stand-in."
        if detail:
            meta = item["workflow"].setdefault("meta", {})
            meta.update({"standinEdit": visible, "standinRevision": workflow_only})
        return dumps(obj)

    @staticmethod
    def _search_item(item):
        out = dict(item)
        out["id"] = _PH_ID
        out["name"] = _PH_NAME
        if "totalViews" in out:
            out["totalViews"] = _PH_VIEWS
        return out

    @staticmethod
    def _inner(wf):
        out = dict(wf)
        if "id" in out:
            out["id"] = _PH_ID
        if "name" in out:
            out["name"] = _PH_NAME
        return out

    @staticmethod
    def _categories(item, c):
        seen = {}
        for node in item.get("nodes") or []:
            for cat in node.get("nodeCategories") or []:
                if cat.get("id") is not None and cat["id"] not in seen:
                    seen[cat["id"]] = {"id": cat["id"], "name": cat["name"]}
        cats = list(seen.values())[:3]
        return cats or [dict(_FALLBACK_CATEGORIES[c % len(_FALLBACK_CATEGORIES)])]

    @staticmethod
    def _image_list(tid):
        images = []
        for j in range(tid % 3):
            digest = hashlib.sha1(f"{tid}-{j}".encode()).hexdigest()[:10]
            images.append({"id": tid * 10 + j, "url": f"{BLOB_ASSETS}workflow_{tid}_{j}_{digest}.png"})
        return images

    def _detail(self, item, wf, c):
        nodes = wf.get("nodes") or []
        counts = collections.Counter(node.get("type", "") for node in nodes)
        inner = self._inner(wf)
        for key, empty in (("settings", {}), ("meta", {}), ("tags", []), ("pinData", {})):
            inner.setdefault(key, empty)
        user = item.get("user") or {}
        detail = {
            "id": _PH_ID,
            "name": _PH_NAME,
            "views": _PH_VIEWS,
            "recentViews": _PH_RECENT,
            "totalViews": _PH_VIEWS,
            "createdAt": item.get("createdAt"),
            "description": item.get("description"),
            "lastUpdatedBy": user.get("id"),
            "status": "published",
            "reviewStatus": "approved",
            "readyToDemo": c % 7 == 0,
            "workflowInfo": {
                "nodeCount": len(nodes),
                "nodeTypes": {t: {"count": n} for t, n in sorted(counts.items())},
            },
            "user": user,
            "nodes": item.get("nodes") or [],
            "categories": self._categories(item, c),
            "image": _PH_IMAGE,
            "purchaseUrl": item.get("purchaseUrl"),
        }
        if "price" in item:
            detail["price"] = item["price"]
        detail["workflow"] = inner
        return {"workflow": detail}

    def combo(self, tid):
        """Index of the (search item, definition) pair that template tid is built from."""
        return self.position[tid] % len(self._search_parts)

    def search_item(self, tid, dated=False):
        """JSON bytes of tid's search item; `dated`: its `createdAt` follows its position (the stand-in's
        creation order, which `sort=createdAt:...` pages by)."""
        body = self._edited(tid, _render(self._search_parts[self.combo(tid)], self._values[tid]), False)
        if not dated and not self.is_paid(tid):
            return body
        item = json.loads(body)
        if dated:
            item["createdAt"] = self.created_at(tid)
        if self.is_paid(tid):
            item["price"] = self.price(tid)
            item["purchaseUrl"] = f"https://creator.example.org/buy/{tid}"
        else:
            item.pop("price", None)
            item["purchaseUrl"] = None
        return dumps(item)

    def created_at(self, tid):
        """A creation time that goes up with the template's position (added templates come last)."""
        day = self.position[tid]
        return f"{2021 + day // 360:04d}-{day % 360 // 30 + 1:02d}-{day % 30 + 1:02d}T12:00:00.000Z"

    def is_paid(self, tid):
        return self.paid_every > 0 and self.position[tid] % self.paid_every == self.paid_every - 1

    def price(self, tid):
        return 9 + 10 * (tid % 5)

    def detail(self, tid):
        """JSON bytes of tid's detail answer (no faults); a paid template's is hollow."""
        body = self._edited(tid, _render(self._detail_parts[self.combo(tid)], self._values[tid]), True)
        if self.is_paid(tid):
            body = hollow(body)
        return self._own_video(tid, body) if self.video_every else body

    def _own_video(self, tid, body):
        """body without the data's YouTube links; every `video_every`th template links its own video."""
        obj = json.loads(_NO_YOUTUBE.sub(b"y0utu", body))
        if self.position[tid] % self.video_every == self.video_every - 1:
            item = obj["workflow"]
            item["description"] = f"{item.get('description') or ''}\n\n@[youtube]({own_video_id(tid)})"
        return dumps(obj)

    def importable(self, tid):
        """JSON bytes of tid's importable answer {id, name, workflow}."""
        return _render(self._import_parts[self.combo(tid)], self._values[tid])

    def page(self, tid):
        """The HTML page of one template (built per request: it is small and cheap)."""
        info = self._page_info[self.combo(tid)]
        esc = html.escape
        title = f"{self.names[tid]} | n8n workflow template"
        images = self._images[tid]
        image = images[0]["url"] if images else DEFAULT_OG_IMAGE
        user = info["user"]
        paragraphs = "\n".join(
            f"<p>{esc(p.strip())}</p>" for p in re.split(r"\n\s*\n", info["description"]) if p.strip()
        )
        cats = "".join(f"<li>{esc(c['name'])}</li>" for c in info["categories"])
        return (
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{esc(title)}</title>\n"
            f"<meta name=\"description\" content=\"{esc(info['meta'])}\">\n"
            f"<meta property=\"og:title\" content=\"{esc(title)}\">\n"
            f"<meta property=\"og:description\" content=\"{esc(info['meta'])}\">\n"
            f"<meta property=\"og:image\" content=\"{esc(image)}\">\n"
            "<meta property=\"og:type\" content=\"website\">\n"
            "<meta name=\"twitter:card\" content=\"summary_large_image\">\n"
            f"<meta name=\"twitter:title\" content=\"{esc(title)}\">\n"
            f"<meta name=\"twitter:description\" content=\"{esc(info['meta'])}\">\n"
            f"<meta name=\"twitter:image\" content=\"{esc(image)}\">\n"
            "</head>\n<body>\n<header><a href=\"/\">n8n</a> <a href=\"/workflows/\">Templates</a></header>\n"
            f"<main>\n<h1>{esc(self.names[tid])}</h1>\n"
            f"<p class=\"author\">Created by {esc(str(user.get('name') or ''))} "
            f"(@{esc(str(user.get('username') or ''))}) on {esc(info['created'][:10])}</p>\n"
            f"<section class=\"description\">\n{paragraphs}\n</section>\n"
            f"<n8n-demo frame=\"true\" workflow-id=\"{tid}\"></n8n-demo>\n"
            f"<ul class=\"categories\">{cats}</ul>\n</main>\n"
            "<footer><a href=\"https://github.com/n8n-io/n8n\">GitHub</a> "
            f"<a href=\"{YOUTUBE_CHANNEL}\">YouTube</a> "
            "<a href=\"https://community.n8n.io\">Forum</a></footer>\n</body>\n</html>\n"
        ).encode()
