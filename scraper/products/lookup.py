"""The mirror's answers to an agent's questions (`scraper mcp`'s tools): templates found by words, node types,
category and price, one template in three sizes, counts, recent changes, and the catalogue sources' items.

Read-only and credential-free: a template's description and workflow are redacted as exports redact them
(policy/redact), and the raw answers are never read. Answers are plain dicts, small enough for a model's
context: a summary is eight keys, `fields` picks fewer, `limit` is at most MAX_LIMIT. A question that
cannot be answered raises `NotFound` or `ConfigError` with one sentence that says what to try.
"""

import json

from scraper.base.errors import ConfigError
from scraper.db import items as item_table
from scraper.db import origin, sources_report, templates
from scraper.db import search as index
from scraper.mirror import answers, feed, sync
from scraper.mirror import items as item_rows
from scraper.policy import redact
from scraper.products import files, search, stats

LIMIT, MAX_LIMIT = 20, 100           # templates per answer: n8n-mcp's default and ceiling
CHANGES_LIMIT, MAX_CHANGES = 50, 500
TOP = 20                             # rows of each ranking in template_stats
SUMMARY = ("id", "name", "url", "author", "nodes", "views", "created_at", "paid")
MODES = ("summary", "nodes", "full")
KINDS = ("added", "changed", "removed", "restored")
# a sold template's price and where to buy it; `hollow`: its stored workflow is the graph's shape only
PAID_EXTRA = ("price", "purchase_url", "hollow")


class NotFound(ConfigError):
    """No such template or item in this mirror; the sentence says what to try."""


def site_url(conn, default):
    """The n8n site this database was seeded from (its `source` row), else `default`."""
    recorded = origin.recorded(conn)
    return (recorded[1] if recorded else default).rstrip("/")


def page_url(site, template_id):
    # the site redirects /workflows/<id> to its slugged page (sites/n8n.page_url, which products may not import)
    return f"{site}/workflows/{template_id}"


def _paid(value):
    """True, False, or None when the mirror does not know (not recorded for this template)."""
    return None if value is None else bool(value)


def _summary(row, site):
    return {"id": row["id"], "name": row["name"], "url": page_url(site, row["id"]), "author": row["author"],
            "nodes": files.json_list(row["node_types"]), "views": row["total_views"], "created_at": row["created_at"],
            "paid": _paid(row["paid"])}


def _picked(fields):
    unknown = [f for f in fields if f not in SUMMARY]
    if unknown:
        raise ConfigError(f"unknown field(s) {', '.join(map(repr, unknown))}; a template's fields are "
                          f"{', '.join(SUMMARY)}.")
    return list(dict.fromkeys(fields)) or list(SUMMARY)


def _bounded(limit, offset, most):
    if not isinstance(limit, int) or limit < 1:
        raise ConfigError(f"limit must be a whole number from 1 to {most} (got {limit!r}).")
    if not isinstance(offset, int) or offset < 0:
        raise ConfigError(f"offset must be a whole number, 0 or more (got {offset!r}).")
    return min(limit, most), offset


def search_templates(conn, site, query="", nodes=(), category="", include_paid=True, limit=LIMIT, offset=0,
                     fields=()):
    """{total, templates: [summary]}: live templates matching every word of `query` (best first; without
    one, most viewed first), using every node type in `nodes` (the full type, e.g. `n8n-nodes-base.slack`,
    or its last part, `slack`, any case), in `category`, and not paid unless `include_paid`."""
    limit, offset = _bounded(limit, offset, MAX_LIMIT)
    keys = _picked(fields)
    if query.strip():
        search.query(conn, query, 1)     # a query that is not valid says so in one sentence
    total, found = index.filtered(conn, query, nodes, category, include_paid, limit, offset)
    templates = [{k: s[k] for k in keys} for s in (_summary(r, site) for r in found)]
    return {"total": total, "templates": templates}


def get_template(conn, site, template_id, mode="summary"):
    """One template: `summary` (the summary, description redacted, categories, counts, versions),
    `nodes` (with the name and type of each node), `full` (with the importable workflow, credentials
    redacted as in exports, and `attribution`: author and n8n.io URL)."""
    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}.")
    try:
        tid = int(template_id)
    except (TypeError, ValueError):
        raise ConfigError(f"template id {template_id!r} is not a number; ids are numbers such as 6270.") from None
    row = templates.row(conn, tid)
    if row is None:
        raise NotFound(f"no template {tid} in this mirror; find ids with search_templates (by words, node types or "
                       f"category), or it may not be scraped yet.")
    out = _summary(row, site)
    out.update(description=redact.text(row["description"])[0], categories=files.json_list(row["categories"]),
               node_count=row["node_count"], quality_score=row["quality_score"], version=row["version"],
               removed_at=row["removed_at"])
    for extra in PAID_EXTRA:         # where the schema records them (migration 17)
        if extra in row.keys():
            out[extra] = bool(row[extra]) if extra == "hollow" else row[extra]
    workflow = json.loads(row["workflow"]) if row["workflow"] else {}
    workflow = workflow if isinstance(workflow, dict) else {}
    if mode == "nodes":
        out["workflow_nodes"] = [{"name": n.get("name"), "type": n.get("type")}
                                 for n in workflow.get("nodes") or [] if isinstance(n, dict)]
    elif mode == "full":
        out["workflow"] = redact.workflow(files.importable(tid, row["name"], workflow))[0]
        out["attribution"] = {"author": row["author"], "url": out["url"],
                              "text": f"Based on the template by {row['author'] or 'an unknown author'}. "
                                      f"View at: {out['url']}"}
    return out


def template_stats(conn):
    """{templates: {live, removed, paid}, node_types: [{type, templates}], categories: [...]}: the top TOP
    of each by the number of live templates using them."""
    return {"templates": templates.counts(conn),
            "node_types": stats.top(conn, "node_types", "type", TOP, live_only=True),
            "categories": stats.top(conn, "categories", "category", TOP, live_only=True)}


def recent_changes(conn, since="", kinds=(), limit=CHANGES_LIMIT, after=None, compact=False):
    """{changes: [{id, name, change, at} | {source, key, change, at}]}: the newest `limit` changes from
    `since` on (ISO 8601; no offset means UTC), newest last, of `kinds` only (default all).

    With `after` (a cursor; 0: from the start) the event feed instead, as `scraper changes --after`:
    {changes: [{seq, id, type, source, subject, occurred_at, data}], next}, at most `limit` events after
    it (`compact`: the newest of each template, item, job and run); pass `next` back as `after`."""
    limit, _ = _bounded(limit, 0, MAX_CHANGES)
    if after is not None or compact:
        if since or kinds:
            raise ConfigError("since and kinds read the changes by time; with after, give neither.")
        if not isinstance(after, (int, type(None))) or (after or 0) < 0:
            raise ConfigError(f"after must be a cursor: a whole number, 0 or more (got {after!r}).")
        return feed.page(conn, after or 0, limit, compact)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ConfigError(f"unknown kind(s) {', '.join(map(repr, unknown))}; use {', '.join(KINDS)}.")
    try:
        at = sync.parse_time(since) if since and since.strip() else None
    except ValueError:
        raise ConfigError(f"since {since!r} is not an ISO 8601 time (e.g. 2026-11-25 or 2026-11-25T02:00:00Z)."
                          ) from None
    found = answers.changes(conn, at, tuple(kinds), limit)
    ids = sorted({c["id"] for c in found if "id" in c})
    names = sources_report.names(conn, ids, ())[0]
    for c in found:
        if "id" in c:
            c["name"] = names.get(c["id"])
    return {"changes": found}


def sources(conn):
    return item_table.sources(conn)


def _source(conn, source):
    known = sources(conn)
    if source not in known:
        raise NotFound(f"no catalogue source {source!r} in this mirror; its sources with items are "
                       f"{', '.join(known) or 'none yet (templates: use search_templates)'}.")


def search_items(conn, source, query="", limit=LIMIT, offset=0):
    """{items: [{key, source, url, name, snippet}]}: one catalogue source's items matching `query`, best
    first (without one, in key order)."""
    limit, offset = _bounded(limit, offset, MAX_LIMIT)
    _source(conn, source)
    if query.strip():
        found = search.query_items(conn, source, query, limit + offset)[offset:]
        return {"items": [{k: v for k, v in r.items() if k != "rank"} for r in found]}
    rows = item_table.live_page(conn, source, limit, offset)
    return {"items": [{"key": f"{r['source']}:{r['key']}", "source": r["source"], "url": r["url"],
                       "name": _record(r["record"]).get("name")} for r in rows]}


def _record(text):
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def get_item(conn, source, key):
    """One item of a catalogue source, by its key (`SOURCE:PATH` or the path) or its URL."""
    _source(conn, source)
    path = key[len(source) + 1:] if key.startswith(source + ":") else key
    found = item_rows.find_key(conn, source, path)
    if found is None:
        raise NotFound(f"no item {key!r} in source {source!r}; find keys with search_items.")
    r = item_table.row(conn, source, found)
    return {"key": f"{source}:{r['key']}", "source": source, "url": r["url"], "record": _record(r["record"]),
            "version": r["version"], "first_seen_at": r["first_seen_at"], "last_seen_at": r["last_seen_at"],
            "removed_at": r["removed_at"]}
