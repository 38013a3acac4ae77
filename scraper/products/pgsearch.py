"""`scraper search` on PostgreSQL: the same query syntax and answer as the FTS5 search, on a weighted
`tsvector` column of `workflows` (`search_tsv`, generated, with a GIN index; pg.EXTRA_MIGRATIONS), ranked
by `ts_rank` (negated: `rank` stays lower-is-better), with `ts_headline` snippets.

The syntax: words (all must match), "a phrase", prefix*, NOT word, a OR b, column:word (the column's
weight class: name A; description, author B; node_types, categories C; explainer D). Parentheses and the
transcripts column are FTS5-only and refused with a sentence."""

import re
import sqlite3

from scraper.base.errors import ConfigError

WEIGHT = {"name": "A", "description": "B", "author": "B", "node_types": "C", "categories": "C", "explainer": "D"}
_TOKEN = re.compile(r'"[^"]*"|\S+')
_WORD = re.compile(r"[\w][\w.\-]*", re.U)


def _fail(text, why):
    return ConfigError(f"the search query {text!r} cannot run here ({why}); use words, \"phrases\", prefix*, "
                       f"NOT word, a OR b, or column:word.")


def tsquery(text):
    """(SQL expression, params) of the tsquery for `text`; ConfigError when it cannot be one."""
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
        if colon and not token.startswith('"') and column in WEIGHT:
            weight, token = WEIGHT[column], rest
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


def query(conn, text, limit, marks):
    """[{id, name, snippet, rank}] best first (lowest rank)."""
    start, end, ellipsis = marks
    expr, params = tsquery(text)
    options = f"StartSel={start}, StopSel={end}, MaxWords=16, MinWords=4, FragmentDelimiter={ellipsis}"
    sql = f"""
        WITH q AS (SELECT {expr} AS q)
        SELECT w.id, w.name,
               ts_headline('english', concat_ws(' ', w.name, w.description,
                   translate(w.node_types, '."[],-', '      '), w.explainer), q.q, %s) AS snippet,
               -ts_rank(w.search_tsv, q.q) AS rank
        FROM workflows w, q
        WHERE w.search_tsv @@ q.q
        ORDER BY rank, w.id
        LIMIT %s"""
    try:
        found = conn.raw(sql, [*params, options, limit]).fetchall()
    except sqlite3.OperationalError as e:
        raise _fail(text, str(e)) from None
    return [{"id": r[0], "name": r[1], "snippet": " ".join((r[2] or "").split()), "rank": round(r[3], 4)}
            for r in found]


def count(conn, text):
    """How many stored templates match `text` (the total `--limit` cuts)."""
    expr, params = tsquery(text)
    try:
        return conn.raw(f"SELECT COUNT(*) FROM workflows w WHERE w.search_tsv @@ ({expr})", params).fetchone()[0]
    except sqlite3.OperationalError as e:
        raise _fail(text, str(e)) from None
