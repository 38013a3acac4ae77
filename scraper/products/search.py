"""Full-text search over the stored templates and catalogue items, with snippets: the query's checks,
the answer's shape and its text. The queries, each database in its own spelling (FTS5 with bm25 on
SQLite, weighted tsvectors with ts_rank on PostgreSQL), are the data layer's (`scraper/db/search`).
"""

import html

from scraper.base.errors import ConfigError
from scraper.db import search as index

MARK_START, MARK_END, ELLIPSIS = "«", "»", "…"
MARKS = (MARK_START, MARK_END, ELLIPSIS)
LIMIT = 20


def query(conn, text, limit=LIMIT):
    """[{id, name, snippet, rank}] best first; `rank` is bm25 (lower is better, as FTS5's own).

    ConfigError (one sentence) when `text` is not a usable FTS5 query."""
    if not text.strip():
        raise ConfigError("the search query is empty; give one or more words.")
    found = index.templates(conn, text, limit, MARKS)
    # paid: null when no walk listed the template yet; hollow: its stored answer is the graph's shape only
    return [{"id": r[0], "name": r[1], "snippet": one_line(r[2]), "rank": round(r[3], 4),
             "paid": None if r[4] is None else bool(r[4]), "hollow": bool(r[5])} for r in found]


def count(conn, text):
    """How many stored templates match `text` (the total `--limit` cuts); call after `query()`."""
    return index.count(conn, text)


def query_items(conn, source, text, limit=LIMIT):
    """[{key, source, url, name, snippet, rank}] of one catalogue source's items, best first."""
    if not text.strip():
        raise ConfigError("the search query is empty; give one or more words.")
    found = index.items(conn, source, text, limit, MARKS)
    return [{"key": f"{r[0]}:{r[1]}", "source": r[0], "url": r[2], "name": r[3], "snippet": one_line(r[4]),
             "rank": round(r[5], 4)} for r in found]


def check_source(conn, name, configured):
    """ConfigError (one sentence) unless `name` is a catalogue source: one whose items the database holds,
    or one of kind catalogue in the configured sources (`configured`, which may not have walked yet)."""
    from scraper.db import sources_report
    held = set(sources_report.items_by_source(conn))
    catalogues = {src.name for src in configured if src.kind == "catalogue"}
    if name in held | catalogues:
        return
    if name == "n8n" or any(src.name == name and src.kind == "n8n" for src in configured):
        raise ConfigError(f"{name} is the n8n source: its templates are searched without --source.")
    known = sorted(held | catalogues)
    have = f"the catalogue sources here: {', '.join(known)}" if known else "this database holds no catalogue item"
    raise ConfigError(f"there is no catalogue source {name!r} to search ({have}).")


def render_items(source, text, results):
    if not results:
        return f"no item of {source} matches {text!r}."
    lines = [f"{len(results)} item(s) of {source} match {text!r}, best first:"]
    for r in results:
        lines.append(f"{r['key']}  {r['name'] or ''}".rstrip())
        lines.append(f"  {r['snippet']}")
    return "\n".join(lines)


def everything(conn, text, limit=LIMIT, with_total=True):
    """What `search` without --source finds: the templates (when the database holds any) and the items of
    every catalogue source, each row naming its `source`. {"templates": [...] or None, "total": n or None,
    "items": [...] best first across sources, "sources": [names searched]}."""
    from scraper.db import sources_report
    templates = total = None
    has_items = sources_report.items_by_source(conn)
    if sources_report.template_count(conn) > 0 or not has_items:
        templates = [{**r, "source": "n8n"} for r in query(conn, text, limit)]
        total = count(conn, text) if with_total else None
    items = []
    for source in has_items:
        items.extend(query_items(conn, source, text, limit))
    items.sort(key=lambda r: (r["rank"], r["key"]))      # one FTS table: the ranks compare across sources
    return {"templates": templates, "total": total, "items": items[:limit], "sources": list(has_items)}


def render_everything(text, found):
    """The lines of `search` without --source: the templates as before, then the items of each source."""
    templates, items = found["templates"], found["items"]
    if templates is not None and not found["sources"]:
        return render(text, templates, found["total"])
    lines = []
    if templates:
        lines.append(render(text, templates, found["total"]))
    if items:
        lines.append(f"{len(items)} item(s) of {', '.join(found['sources'])} match {text!r}, best first:")
        for r in items:
            lines.append(f"{r['key']}  {r['name'] or ''}".rstrip())
            lines.append(f"  {r['snippet']}")
    if not lines:
        searched = (["the templates"] if templates is not None else []) \
            + [f"the items of {n}" for n in found["sources"]]
        return f"nothing matches {text!r} in {' or '.join(searched)}."
    return "\n".join(lines)


def rebuild(conn):
    """Make the index again from `workflows` and the transcripts of each template's videos, in one
    transaction; returns the number of rows indexed. For a re-extraction and repairs: writes keep it in
    step by themselves. On PostgreSQL: `workflows_tsv`."""
    return index.rebuild(conn)


def render(text, results, total):
    """The lines `scraper search` prints (`total`: every match, of which `results` are the best)."""
    if not results:
        return f"no template matches {text!r}."
    lines = [f"showing {len(results)} of {total} matches for {text!r}, best first:"]
    width = max(len(str(r["id"])) for r in results)
    for r in results:
        mark = " [paid]" if r.get("paid") else " [hollow]" if r.get("hollow") else ""
        lines.append(f"{r['id']:>{width}}  {r['name']}{mark}")
        lines.append(f"{'':>{width}}  {r['snippet']}")
    return "\n".join(lines)


def one_line(snippet):
    """The snippet on one line, its HTML entities as the characters they stand for (n8n's descriptions are
    stored as served, `&gt;` for a Markdown quote; a snippet is read by people)."""
    return " ".join(html.unescape(snippet or "").split())
