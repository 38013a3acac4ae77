"""Full-text search over the stored templates: SQLite FTS5, ranked by bm25, with snippets.

The index (`workflows_fts`, created in store.MIGRATIONS) is kept in step by triggers on `workflows`, `transcripts`
and `template_videos`, in the writer's own transaction; `rebuild()` makes it again from scratch.
"""

import html
import sqlite3

from scraper.base.errors import ConfigError
from scraper.db import schema
from scraper.db.store import is_postgres, transaction

COLUMNS = ("name", "description", "explainer", "node_types", "categories", "author", "transcripts")
# bm25 weight of each column, in COLUMNS order: a word in the name says more than one in a sticky note
WEIGHTS = (10.0, 4.0, 1.0, 2.0, 3.0, 3.0, 1.0)
MARK_START, MARK_END, ELLIPSIS = "«", "»", "…"
SNIPPET_TOKENS = 16
LIMIT = 20

# what SQLite says when the query itself is wrong (as opposed to the database)
_QUERY_ERRORS = ("fts5", "syntax error", "unterminated", "no such column", "unknown special query")

_WORDS = """CASE WHEN json_valid({c}) THEN (SELECT group_concat(value, '{sep}') FROM json_each({c}))
                 ELSE {c} END"""


def query(conn, text, limit=LIMIT):
    """[{id, name, snippet, rank}] best first; `rank` is bm25 (lower is better, as FTS5's own).

    ConfigError (one sentence) when `text` is not a usable FTS5 query."""
    if not text.strip():
        raise ConfigError("the search query is empty; give one or more words.")
    if is_postgres(conn):
        from scraper.products import pgsearch
        return pgsearch.query(conn, text, limit, (MARK_START, MARK_END, ELLIPSIS))
    weights = ", ".join(str(w) for w in WEIGHTS)
    sql = f"""
        SELECT w.id, w.name,
               snippet(workflows_fts, -1, ?, ?, ?, {SNIPPET_TOKENS}) AS snippet,
               bm25(workflows_fts, {weights}) AS rank, w.paid, w.hollow
        FROM workflows_fts JOIN workflows w ON w.id = workflows_fts.rowid
        WHERE workflows_fts MATCH ?
        ORDER BY rank, w.id
        LIMIT ?"""
    try:
        found = conn.execute(sql, (MARK_START, MARK_END, ELLIPSIS, text, limit)).fetchall()
    except sqlite3.OperationalError as e:
        reason = str(e)
        if any(s in reason.lower() for s in _QUERY_ERRORS):
            raise ConfigError(
                f"the search query {text!r} is not valid FTS5 syntax ({reason}); put words with punctuation "
                f'in double quotes, e.g. \'"n8n-nodes-base.slack"\'.'
            ) from None
        raise
    # paid: null when no walk listed the template yet; hollow: its stored answer is the graph's shape only
    return [{"id": r[0], "name": r[1], "snippet": one_line(r[2]), "rank": round(r[3], 4),
             "paid": None if r[4] is None else bool(r[4]), "hollow": bool(r[5])} for r in found]


def count(conn, text):
    """How many stored templates match `text` (the total `--limit` cuts); call after `query()`."""
    if is_postgres(conn):
        from scraper.products import pgsearch
        return pgsearch.count(conn, text)
    return conn.execute("SELECT COUNT(*) FROM workflows_fts WHERE workflows_fts MATCH ?", (text,)).fetchone()[0]


def query_items(conn, source, text, limit=LIMIT):
    """[{key, source, url, name, snippet, rank}] of one catalogue source's items, best first."""
    if not text.strip():
        raise ConfigError("the search query is empty; give one or more words.")
    if is_postgres(conn):
        from scraper.products import pgsearch
        return pgsearch.query_items(conn, source, text, limit, (MARK_START, MARK_END, ELLIPSIS))
    sql = f"""
        SELECT i.source, i.key, i.url, json_extract(i.record, '$.name') AS name,
               snippet(items_fts, -1, ?, ?, ?, {SNIPPET_TOKENS}) AS snippet, bm25(items_fts, 10.0, 4.0, 1.0) AS rank
        FROM items_fts JOIN items i ON i.rowid = items_fts.rowid
        WHERE items_fts MATCH ? AND i.source = ?
        ORDER BY rank, i.key
        LIMIT ?"""
    try:
        found = conn.execute(sql, (MARK_START, MARK_END, ELLIPSIS, text, source, limit)).fetchall()
    except sqlite3.OperationalError as e:
        if any(s in str(e).lower() for s in _QUERY_ERRORS):
            raise ConfigError(f"the search query {text!r} is not valid FTS5 syntax ({e}); put words with "
                              "punctuation in double quotes.") from None
        raise
    return [{"key": f"{r[0]}:{r[1]}", "source": r[0], "url": r[2], "name": r[3], "snippet": one_line(r[4]),
             "rank": round(r[5], 4)} for r in found]


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
    step by themselves. On PostgreSQL: `workflows_tsv` (pgsearch.rebuild)."""
    if is_postgres(conn):
        from scraper.products import pgsearch
        return pgsearch.rebuild(conn)
    transcripts = "NULL"
    if {"transcripts", "template_videos"} <= schema.tables(conn):
        transcripts = """(SELECT group_concat(t.text, ' ') FROM template_videos tv
                          JOIN transcripts t ON t.video_id = tv.video_id WHERE tv.template_id = w.id)"""
    with transaction(conn) as c:
        c.execute("DELETE FROM workflows_fts")
        c.execute(f"""
            INSERT INTO workflows_fts (rowid, {', '.join(COLUMNS)})
            SELECT w.id, w.name, w.description, w.explainer, {_WORDS.format(c='w.node_types', sep=' ')},
                   {_WORDS.format(c='w.categories', sep=', ')}, w.author, {transcripts}
            FROM workflows w""")
        return c.execute("SELECT COUNT(*) FROM workflows_fts").fetchone()[0]


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
