"""`export --format files --output DIR`: one importable n8n workflow file per live template, for a git
repository of templates that users import and diff (the git-scraping pattern: a scheduled job runs the
mirror, exports, commits DIR).

- `DIR/<id>-<slug>.json`: n8n's import shape (`name`, `nodes`, `connections`, `settings`, `pinData` where
  present, `meta.templateId` as a string, as n8n writes it), credentials redacted unless asked otherwise;
  the slug is that of the template's n8n.io URL.
- `DIR/index.json` (the templates, and those removed) and `DIR/README.md` (a table).
- Stable bytes: keys sorted (n8n reads objects by key, arrays keep their order), an indent of 2, a final
  newline, nothing that changes by itself (no export time): an unchanged template gives the same bytes,
  and a file whose bytes would not change is not written at all.
- Only files the previous `index.json` lists are ever deleted (DIR may hold files of its own), each
  file is replaced atomically, and `stop()` is asked between files (a signal ends the export there).
"""

import json
import os
import re
import unicodedata
from dataclasses import dataclass, field

from scraper.base.errors import ConfigError
from scraper.db import templates as db_templates
from scraper.policy import redact as redaction
from scraper.products import output

INDEX, README = "index.json", "README.md"
SLUG_MAX = 80
IMPORT_KEYS = ("name", "nodes", "connections", "settings", "pinData")   # what n8n's import reads
_PAGE_SLUG_RE = re.compile(r"/workflows/(\d+)-([^/?#]+)")


@dataclass
class Summary:
    written: list = field(default_factory=list)     # files created or changed
    deleted: list = field(default_factory=list)
    unchanged: int = 0
    redacted: int = 0
    stopped: str | None = None      # the signal that ended the export early

    @property
    def changed(self):
        return len(self.written) + len(self.deleted)

    def describe(self):
        line = (f"{len(self.written)} file(s) written, {len(self.deleted)} deleted, {self.unchanged} unchanged; "
                f"{self.redacted} value(s) redacted")
        return line + "."


def slug(name):
    """n8n.io's slug of a template name: ASCII lower case, words joined by '-'."""
    text = unicodedata.normalize("NFKD", name or "").encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:SLUG_MAX].strip("-")


def file_name(template_id, name, page_url=None):
    """`<id>-<slug>.json`: the slug of the stored page URL when the site answered with one, else the name's."""
    m = _PAGE_SLUG_RE.search(page_url or "")
    s = slug(m.group(2)) if m and int(m.group(1)) == template_id else slug(name)
    return f"{template_id}-{s}.json" if s else f"{template_id}.json"


def importable(template_id, name, workflow):
    """The workflow in n8n's import shape (pure): the keys n8n reads, and meta.templateId."""
    out = {k: workflow[k] for k in IMPORT_KEYS if k in workflow}
    out["name"] = name if name is not None else workflow.get("name", "")
    out.setdefault("nodes", [])
    out.setdefault("connections", {})
    out.setdefault("settings", {})
    meta = workflow.get("meta") if isinstance(workflow.get("meta"), dict) else {}
    out["meta"] = {**meta, "templateId": str(template_id)}
    return out


def dumps(obj):
    """Stable text: sorted keys, indent 2, a final newline."""
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, indent=2) + "\n"


def templates(conn):
    """Live templates with a workflow, in id order, one at a time: (id, name, version, categories, node
    types, workflow JSON text, URL of the latest stored page or None, the row's redaction verdict, paid,
    price, purchase URL, hollow)."""
    return db_templates.with_workflow(conn)


def _clean(doc, verdict):
    """Whether redacting `doc` would change nothing, known without the walk: its workflow was found clean
    under the current rules when stored, and the rest of `doc` is its name (a text) and `meta.templateId`
    (digits) beside parts of that workflow (no key `value` at the top: no `{name, value}` pair is made)."""
    return (verdict == redaction.RULES_VERSION and "value" not in doc
            and redaction.text(doc["name"])[1] == 0 and doc["meta"]["templateId"].isdigit())


def previous_files(folder):
    """The file names the previous export's index.json lists (plain names only: never a path elsewhere)."""
    try:
        with open(os.path.join(folder, INDEX), encoding="utf-8") as fh:
            old = json.load(fh)
        listed = [t.get("file") for t in old.get("templates", [])]
    except (OSError, ValueError, AttributeError, TypeError):
        return set()
    return {f for f in listed if isinstance(f, str) and f == os.path.basename(f) and f.endswith(".json")
            and f not in (INDEX,) and not f.startswith(".")}


def write(conn, folder, redact=True, stop=lambda: None):
    """Export into `folder` (created with its parents when missing); returns a Summary. `stop()` returns
    a signal's name to end the export between two files."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise ConfigError(f"the output {folder} is a file, not a folder.")
    output.make_folder(folder, "files export")       # a new user's first export names a folder not made yet
    output.check_folder(os.path.join(folder, INDEX), "files export")
    summary = Summary()
    before = previous_files(folder)
    index = []
    for tid, name, version, categories, node_types, workflow, page_url, verdict, paid, price, buy, hollow \
            in templates(conn):
        summary.stopped = stop()
        if summary.stopped:
            return summary
        if paid or hollow:
            # the API serves a paid template's shape only: a file of it would import a workflow that does nothing
            index.append({"id": tid, "name": name, "file": None, "version": version, "paid": True, "price": price,
                          "purchase_url": buy, "categories": json_list(categories),
                          "node_types": json_list(node_types)})
            continue
        wf = json.loads(workflow)
        if not isinstance(wf, dict):
            continue
        doc = importable(tid, name, wf)
        if redact and not _clean(doc, verdict):
            doc, n = redaction.workflow(doc)
            summary.redacted += n
        fname = file_name(tid, name, page_url)
        _put(folder, fname, dumps(doc), summary)
        index.append({"id": tid, "name": name, "file": fname, "version": version,
                      "categories": json_list(categories), "node_types": json_list(node_types)})
    current = {t["file"] for t in index if t["file"]}
    for fname in sorted(before - current):
        summary.stopped = stop()
        if summary.stopped:
            return summary
        try:
            os.unlink(os.path.join(folder, fname))
            summary.deleted.append(fname)
        except FileNotFoundError:
            pass
    removed = [{"id": r[0], "name": r[1], "removed_at": r[2]} for r in db_templates.removed(conn)]
    _put(folder, INDEX, dumps({"templates": index, "removed": removed}), summary)
    _put(folder, README, readme(index, removed), summary)
    return summary


def readme(index, removed):
    """DIR/README.md: a table of the templates (stable: no date in it)."""
    files = [t for t in index if t["file"]]
    lines = ["# n8n workflow templates", "",
             f"{len(files)} importable workflow(s), written by `scraper export --format files`. In n8n: "
             "Workflows, Import from File. Credentials are redacted (`[REDACTED]`).", "",
             "| id | name | version | file |", "|---:|---|---:|---|"]
    for t in index:
        cell = (t["name"] or "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {t['id']} | {cell} | {t['version']} | {_where(t)} |")
    if removed:
        lines += ["", f"{len(removed)} template(s) were removed from n8n.io; their files are gone "
                      "(see `removed` in index.json)."]
    return "\n".join(lines) + "\n"


def _where(t):
    """The README cell of a template: its file, or where to buy it (paid: n8n.io serves its shape only)."""
    if t["file"]:
        return f"[{t['file']}]({t['file']})"
    price = f" ({t['price']:g})" if t.get("price") else ""
    buy = t.get("purchase_url")
    return f"paid{price}: [buy it]({buy})" if buy else f"paid{price}: not served by n8n.io, no file"


def json_list(text):
    """The list a JSON column holds; [] for anything else (NULL, not JSON, not a list)."""
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def _put(folder, fname, text, summary):
    """Write `text` to folder/fname atomically, and only when its bytes change."""
    path, data = os.path.join(folder, fname), text.encode("utf-8")
    try:
        with open(path, "rb") as fh:
            if fh.read() == data:
                summary.unchanged += 1
                return
    except FileNotFoundError:
        pass
    output.put(path, data, "files export")
    summary.written.append(fname)
