"""`scraper search` on PostgreSQL: the same query syntax and answer as the FTS5 search, on weighted
`tsvector`s with GIN indexes (db/pgschema: `workflows_tsv` for templates, transcripts included, kept by
triggers; `items.search_tsv`, kept by a trigger, for catalogue items), ranked by `ts_rank` (negated: `rank`
stays lower-is-better), with `ts_headline` snippets made only for the rows shown.

The syntax: words (all must match), "a phrase", prefix*, NOT word, a OR b, column:word (the column's
weight class: templates: name A; description, author B; node_types, categories C; explainer, transcripts
D, so `explainer:` and `transcripts:` each match a word of either; items: name A, description B, text D,
where text holds every string of the record). Parentheses are FTS5-only and refused with a sentence."""

import json
import re
import sqlite3

from scraper.base.errors import ConfigError
from scraper.db import pgschema
from scraper.products import search

WEIGHT = {"name": "A", "description": "B", "author": "B", "node_types": "C", "categories": "C", "explainer": "D",
          "transcripts": "D"}
ITEM_WEIGHT = {"name": "A", "description": "B", "text": "D"}      # items_fts' columns
_TOKEN = re.compile(r'"[^"]*"|\S+')
_WORD = re.compile(r"[\w][\w.\-]*", re.U)


def _fail(text, why):
    return ConfigError(f"the search query {text!r} cannot run here ({why}); use words, \"phrases\", prefix*, "
                       f"NOT word, a OR b, or column:word.")


def tsquery(text, weights=WEIGHT):
    """(SQL expression, params) of the tsquery for `text` (`weights`: the column names it knows and
    their weight class); ConfigError when it cannot be one."""
    if text.count('"') % 2:
        raise _fail(text, "an unterminated double quote")
    if "(" in text or ")" in text:
        raise _fail(text, "parentheses are not supported on PostgreSQL")
    parts, params, op, negate = [], [], "&&", False
    for token in _TOKEN.findall(text):
        upper = token.upper()
        if upper in ("AND", "OR", "NOT") and not token.startswith('"'):
            if upper == "NOT":
                negate = True
            else:
                op = "||" if upper == "OR" else "&&"
            continue
        weight = ""
        column, colon, rest = token.partition(":")
        if colon and not token.startswith('"') and column in weights:
            weight, token = weights[column], rest
        elif colon and not token.startswith('"') and _WORD.fullmatch(column):
            raise _fail(text, f"there is no column {column!r} to search here")
        if token.startswith('"'):
            expr, value = "phraseto_tsquery('english', %s)", token.strip('"')
        elif token.endswith("*"):
            word = token[:-1]
            if not _WORD.fullmatch(word):
                raise _fail(text, f"{token!r} is not a word followed by *")
            expr, value = "to_tsquery('english', %s)", f"'{word}':*{weight}"
            weight = ""
        else:
            expr, value = "plainto_tsquery('english', %s)", token
        if weight:     # a weight on each lexeme of the term: setweight of a query is not a thing; filter
            expr, value = "to_tsquery('english', %s)", " <-> ".join(
                f"'{w}':{weight}" for w in _WORD.findall(value)) or "''"
        expr = ("!!" + expr) if negate else expr
        if parts:
            parts.append(op)
        parts.append(expr)
        params.append(value)
        op, negate = "&&", False
    if not parts:
        raise _fail(text, "it has no word to look for")
    return "(" + " ".join(parts) + ")", params


def _headline_options(marks):
    start, end, ellipsis = marks
    return f"StartSel={start}, StopSel={end}, MaxWords=16, MinWords=4, FragmentDelimiter={ellipsis}"


def query(conn, text, limit, marks):
    """[{id, name, snippet, rank}] best first (lowest rank). The snippet is made for the rows kept only."""
    expr, params = tsquery(text)
    sql = f"""
        WITH q AS (SELECT {expr} AS q),
        best AS (SELECT s.id, -ts_rank(s.tsv, q.q) AS rank FROM workflows_tsv s, q WHERE s.tsv @@ q.q
                 ORDER BY rank, s.id LIMIT %s)
        SELECT w.id, w.name,
               ts_headline('english', concat_ws(' ', w.name, w.description,
                   translate(w.node_types, '."[],-', '      '), w.explainer, {pgschema.TRANSCRIPTS_TEXT}), q.q, %s),
               best.rank, w.paid, w.hollow
        FROM best JOIN workflows w ON w.id = best.id, q
        ORDER BY best.rank, w.id"""
    try:
        found = conn.raw(sql, [*params, limit, _headline_options(marks)]).fetchall()
    except sqlite3.OperationalError as e:
        raise _fail(text, str(e)) from None
    return [{"id": r[0], "name": r[1], "snippet": search.one_line(r[2]), "rank": round(r[3], 4),
             "paid": None if r[4] is None else bool(r[4]), "hollow": bool(r[5])} for r in found]


def count(conn, text):
    """How many stored templates match `text` (the total `--limit` cuts)."""
    expr, params = tsquery(text)
    try:
        return conn.raw(f"SELECT COUNT(*) FROM workflows_tsv s WHERE s.tsv @@ ({expr})", params).fetchone()[0]
    except sqlite3.OperationalError as e:
        raise _fail(text, str(e)) from None


def query_items(conn, source, text, limit, marks):
    """[{key, source, url, name, snippet, rank}] of one catalogue source's items, best first."""
    expr, params = tsquery(text, ITEM_WEIGHT)
    sql = f"""
        WITH q AS (SELECT {expr} AS q),
        best AS (SELECT i.source, i.key, -ts_rank(i.search_tsv, q.q) AS rank FROM items i, q
                 WHERE i.source = %s AND i.search_tsv @@ q.q ORDER BY rank, i.key LIMIT %s)
        SELECT i.source, i.key, i.url, i.record, best.rank
        FROM best JOIN items i ON i.source = best.source AND i.key = best.key
        ORDER BY best.rank, i.key"""
    try:
        found = conn.raw(sql, [*params, source, limit]).fetchall()
        # the snippets: ts_headline over the text the index was made of, for the rows shown only
        snippets = [r[0] for r in conn.raw(
            f"""SELECT ts_headline('english', t.text, q.q, %s) FROM unnest(%s::text[]) WITH ORDINALITY AS t(text, n),
                (SELECT {expr} AS q) AS q ORDER BY t.n""",
            [_headline_options(marks), [item_text(r[3]) for r in found], *params]).fetchall()] if found else []
    except sqlite3.OperationalError as e:
        raise _fail(text, str(e)) from None
    return [{"key": f"{r[0]}:{r[1]}", "source": r[0], "url": r[2], "name": _name(r[3]),
             "snippet": search.one_line(snippet), "rank": round(r[4], 4)}
            for r, snippet in zip(found, snippets, strict=True)]


# what jsonb refuses in a string or a key: NUL, half a surrogate pair
_REFUSED = re.compile("[\x00\ud800-\udfff]")


def _refuse_constant(name):
    raise ValueError(name)


def item_text(record):
    """Every string of a record, as the items' trigger indexes it (db/pgschema: in jsonb's order, an
    object's keys by length then bytes, depth first); the record as it is when jsonb would not take it."""
    try:
        doc = json.loads(record, parse_constant=_refuse_constant)
    except ValueError:
        return record
    out = []

    def walk(value):
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            if any(_REFUSED.search(key) for key in value):
                raise ValueError("a key jsonb refuses")
            for key in sorted(value, key=lambda k: (len(k.encode()), k.encode())):
                walk(value[key])
        elif isinstance(value, list):
            for item in value:
                walk(item)

    try:
        walk(doc)
    except ValueError:
        return record
    return record if any(_REFUSED.search(text) for text in out) else " ".join(out)


def _name(record):
    """The record's `name` (json_extract's answer on SQLite); None when there is none."""
    try:
        doc = json.loads(record)
    except ValueError:
        return None
    return doc.get("name") if isinstance(doc, dict) else None


def rebuild(conn):
    """Make `workflows_tsv` again from every template (repairs; the triggers keep it in step); the number
    of templates indexed."""
    from scraper.db.store import transaction
    with transaction(conn) as c:
        c.raw("DELETE FROM workflows_tsv")
        c.raw(pgschema.REFRESH_ALL)
        return c.raw("SELECT COUNT(*) FROM workflows_tsv").fetchone()[0]
