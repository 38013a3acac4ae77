"""Full-text search, each database in its own way, side by side: SQLite's FTS5 (`workflows_fts`,
`items_fts`, ranked by bm25 with column weights, `snippet()`), PostgreSQL's weighted `tsvector`s with GIN
indexes (`workflows_tsv`, transcripts included, kept by triggers; `items.search_tsv`, kept by a trigger:
migrations 15 and 21), ranked by `ts_rank` (negated, so `rank` stays lower-is-better), with `ts_headline`
snippets made only for the rows shown. The indexes are kept in step by triggers in the writer's own
transaction; `rebuild()` makes the templates' again from scratch.

The query syntax, the same on both: words (all must match), "a phrase", prefix*, NOT word, a OR b,
column:word. On PostgreSQL column:word is the column's weight class (templates: name A; description,
author B; node_types, categories C; explainer, transcripts D, so `explainer:` and `transcripts:` each
match a word of either; items: name A, description B, text D, where text holds every string of the
record), and parentheses are FTS5-only and refused with a sentence. A query either database cannot run is
a `ConfigError` of one sentence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from scraper.base.errors import ConfigError, OperationalError
from scraper.db import jsonsql, schema
from scraper.db.backend import Conn
from scraper.db.dialect import only
from scraper.db.store import is_postgres, transaction

if TYPE_CHECKING:
    from scraper.db import pg

Marks = tuple[str, str, str]      # (start, end, ellipsis) of a snippet
COLUMNS = ("name", "description", "explainer", "node_types", "categories", "author", "transcripts")
# bm25 weight of each column, in COLUMNS order: a word in the name says more than one in a sticky note
WEIGHTS = (10.0, 4.0, 1.0, 2.0, 3.0, 3.0, 1.0)
SNIPPET_TOKENS = 16

# --- SQLite: FTS5 -------------------------------------------------------------------------------------

# what SQLite says when the query itself is wrong (as opposed to the database)
_QUERY_ERRORS = ("fts5", "syntax error", "unterminated", "no such column", "unknown special query")

_WORDS = """CASE WHEN json_valid({c}) THEN (SELECT group_concat(value, '{sep}') FROM json_each({c}))
                 ELSE {c} END"""


SYNTAX = 'use words, "a phrase", a OR b, a NOT b, prefix* or column:word'
# a minus before a word, outside double quotes: SQLite reads a column there, PostgreSQL drops the minus
_MINUS = re.compile(r"(?:^|(?<=\s))-(\w[\w.\-]*)")
_QUOTED = re.compile(r'"[^"]*"')


def check(text: str) -> None:
    """ConfigError (one plain sentence) for a query each database would misread alike: `-word`, which
    leaves nothing out (`NOT word` does)."""
    unquoted = _QUOTED.sub(" ", text)
    minus = _MINUS.search(unquoted)
    if minus:
        meant = _MINUS.sub(lambda m: f"NOT {m.group(1)}", text).strip()
        raise ConfigError(f"the search query {text!r} puts a minus before {minus.group(1)!r}, which leaves "
                          f"nothing out here; write {meant!r} (NOT before the word to leave out).")


def _fts5(text: str, e: OperationalError, columns: Sequence[str]) -> None:
    """Raise ConfigError, one plain sentence, when `e` is the query's fault (SQLite's own words are
    FTS5's grammar); else let the caller re-raise."""
    said = str(e)
    if not any(s in said.lower() for s in _QUERY_ERRORS):
        return
    column = re.match(r"no such column: (\S+)", said)
    near = re.search(r'syntax error near "(.*)"', said)
    if column and f"{column.group(1)}:" in text:
        why = f"{column.group(1)!r} is not a field to search (the fields: {', '.join(columns)})"
    elif column or (near and near.group(1) not in ("", "AND", "OR", "NOT")):
        why = ("a word with punctuation in it (a dot, a dash, a colon) needs double quotes, such as "
               "'\"n8n-nodes-base.slack\"'")
    elif "unterminated" in said:
        why = "a double quote is not closed (a phrase goes between two double quotes)"
    elif near:
        why = "AND, OR and NOT each need a word on both sides, and an open parenthesis its closing one"
    else:
        why = "it cannot be read"
    raise _fail(text, why) from None


def _sqlite_templates(conn: Conn, text: str, limit: int, marks: Marks) -> list[tuple[Any, ...]]:
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
        return [tuple(r) for r in conn.execute(sql, (*marks, text, limit)).fetchall()]
    except OperationalError as e:
        _fts5(text, e, COLUMNS)
        raise


def _sqlite_items(conn: Conn, source: str, text: str, limit: int, marks: Marks) -> list[tuple[Any, ...]]:
    sql = f"""
        SELECT i.source, i.key, i.url, json_extract(i.record, '$.name') AS name,
               snippet(items_fts, -1, ?, ?, ?, {SNIPPET_TOKENS}) AS snippet, bm25(items_fts, 10.0, 4.0, 1.0) AS rank
        FROM items_fts JOIN items i ON i.rowid = items_fts.rowid
        WHERE items_fts MATCH ? AND i.source = ?
        ORDER BY rank, i.key
        LIMIT ?"""
    try:
        return [tuple(r) for r in conn.execute(sql, (*marks, text, source, limit)).fetchall()]
    except OperationalError as e:
        _fts5(text, e, tuple(ITEM_WEIGHT))
        raise


def _sqlite_rebuild(conn: Conn) -> int:
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
        return int(c.execute("SELECT COUNT(*) FROM workflows_fts").one()[0])


# --- PostgreSQL: tsvector -----------------------------------------------------------------------------

WEIGHT = {"name": "A", "description": "B", "author": "B", "node_types": "C", "categories": "C", "explainer": "D",
          "transcripts": "D"}
ITEM_WEIGHT = {"name": "A", "description": "B", "text": "D"}      # items_fts' columns

# the text of one template's transcripts, as workflows_fts.transcripts holds it
_TRANSCRIPTS_TEXT = """(SELECT string_agg(t.text, ' ' ORDER BY t.video_id) FROM template_videos tv
                   JOIN transcripts t ON t.video_id = tv.video_id WHERE tv.template_id = w.id)"""

# every template's `workflows_tsv` row made again, as the trigger function of migration 21 writes one (the test
# of `rebuild` on PostgreSQL checks that they agree); in id order, so that two writers lock rows in one order
_PG_REBUILD = f"""INSERT INTO workflows_tsv (id, tsv)
    SELECT w.id, setweight(to_tsvector('english', coalesce(w.name, '')), 'A')
        || setweight(to_tsvector('english', coalesce(w.description, '') || ' ' || coalesce(w.author, '')), 'B')
        || setweight(to_tsvector('english', translate(coalesce(w.node_types, '') || ' ' || coalesce(w.categories, ''),
                                                      '."[],-', '      ')), 'C')
        || setweight(to_tsvector('english', coalesce(w.explainer, '') || ' ' || coalesce({_TRANSCRIPTS_TEXT}, '')), 'D')
    FROM workflows w ORDER BY w.id
    ON CONFLICT (id) DO UPDATE SET tsv = EXCLUDED.tsv"""
_TOKEN = re.compile(r'"[^"]*"|\S+')
_WORD = re.compile(r"[\w][\w.\-]*", re.U)


def _fail(text: str, why: str) -> ConfigError:
    return ConfigError(f"the search query {text!r} cannot be read: {why}; {SYNTAX}.")


def tsquery(text: str, weights: dict[str, str] = WEIGHT) -> tuple[str, list[str]]:
    """(SQL expression, params) of the tsquery for `text` (`weights`: the column names it knows and
    their weight class); ConfigError when it cannot be one."""
    if text.count('"') % 2:
        raise _fail(text, "a double quote is not closed (a phrase goes between two double quotes)")
    if "(" in text or ")" in text:
        raise _fail(text, "parentheses are not supported on PostgreSQL")
    parts: list[str] = []
    params: list[str] = []
    op, negate = "&&", False
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
            raise _fail(text, f"{column!r} is not a field to search (the fields: {', '.join(weights)})")
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


def _headline_options(marks: Marks) -> str:
    start, end, ellipsis = marks
    return f"StartSel={start}, StopSel={end}, MaxWords=16, MinWords=4, FragmentDelimiter={ellipsis}"


def _pg_templates(conn: pg.Connection, text: str, limit: int, marks: Marks) -> list[tuple[Any, ...]]:
    expr, params = tsquery(text)
    sql = f"""
        WITH q AS (SELECT {expr} AS q),
        best AS (SELECT s.id, -ts_rank(s.tsv, q.q) AS rank FROM workflows_tsv s, q WHERE s.tsv @@ q.q
                 ORDER BY rank, s.id LIMIT %s)
        SELECT w.id, w.name,
               ts_headline('english', concat_ws(' ', w.name, w.description,
                   translate(w.node_types, '."[],-', '      '), w.explainer, {_TRANSCRIPTS_TEXT}), q.q, %s),
               best.rank, w.paid, w.hollow
        FROM best JOIN workflows w ON w.id = best.id, q
        ORDER BY best.rank, w.id"""
    try:
        return [tuple(r) for r in conn.raw(sql, [*params, limit, _headline_options(marks)]).fetchall()]
    except OperationalError as e:
        raise _fail(text, str(e)) from None


def _pg_count(conn: pg.Connection, text: str) -> int:
    expr, params = tsquery(text)
    try:
        return int(conn.raw(f"SELECT COUNT(*) FROM workflows_tsv s WHERE s.tsv @@ ({expr})", params).one()[0])
    except OperationalError as e:
        raise _fail(text, str(e)) from None


def _pg_items(conn: pg.Connection, source: str, text: str, limit: int, marks: Marks) -> list[tuple[Any, ...]]:
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
    except OperationalError as e:
        raise _fail(text, str(e)) from None
    return [(r[0], r[1], r[2], _name(r[3]), snippet, r[4]) for r, snippet in zip(found, snippets, strict=True)]


def _pg_rebuild(conn: pg.Connection) -> int:
    with transaction(conn):
        conn.raw("DELETE FROM workflows_tsv")
        conn.raw(_PG_REBUILD)
        return int(conn.raw("SELECT COUNT(*) FROM workflows_tsv").one()[0])


# what jsonb refuses in a string or a key: NUL, half a surrogate pair
_REFUSED = re.compile("[\x00\ud800-\udfff]")


def _refuse_constant(name: str) -> None:
    raise ValueError(name)


def item_text(record: str) -> str:
    """Every string of a record, as the items' trigger indexes it (migration 21: in jsonb's order, an
    object's keys by length then bytes, depth first); the record as it is when jsonb would not take it."""
    try:
        doc = json.loads(record, parse_constant=_refuse_constant)
    except ValueError:
        return record
    out: list[str] = []

    def walk(value: object) -> None:
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


def _name(record: str) -> Any:
    """The record's `name` (json_extract's answer on SQLite); None when there is none."""
    try:
        doc = json.loads(record)
    except ValueError:
        return None
    return doc.get("name") if isinstance(doc, dict) else None


# --- the data layer's search, one call per question -----------------------------------------------------

def templates(conn: Conn, text: str, limit: int, marks: Marks) -> list[tuple[Any, ...]]:
    """(id, name, snippet, rank, paid, hollow) of the best `limit` templates for `text`, best (lowest
    rank) first."""
    check(text)
    if is_postgres(conn):
        return _pg_templates(conn, text, limit, marks)
    return _sqlite_templates(conn, text, limit, marks)


def count(conn: Conn, text: str) -> int:
    """How many stored templates match `text`."""
    check(text)
    if is_postgres(conn):
        return _pg_count(conn, text)
    return int(conn.execute("SELECT COUNT(*) FROM workflows_fts WHERE workflows_fts MATCH ?", (text,)).one()[0])


def items(conn: Conn, source: str, text: str, limit: int, marks: Marks) -> list[tuple[Any, ...]]:
    """(source, key, url, name, snippet, rank) of the best `limit` items of `source` for `text`."""
    check(text)
    if is_postgres(conn):
        return _pg_items(conn, source, text, limit, marks)
    return _sqlite_items(conn, source, text, limit, marks)


def rebuild(conn: Conn) -> int:
    """Make the templates' index again from `workflows` (and the transcripts of each template's videos), in
    one transaction; the number of templates indexed."""
    return _pg_rebuild(conn) if is_postgres(conn) else _sqlite_rebuild(conn)


def _match(conn: Conn, text: str) -> tuple[str, list[Any]]:
    """(FROM fragment joining the full-text matches as `m` with their rank, its params)."""
    check(text)
    if is_postgres(conn):
        expr, params = tsquery(text)
        # `dialect.only` makes the statement's `?` psycopg's: the tsquery's own placeholders become `?` too
        expr = expr.replace("%s", "?")
        return (f"JOIN (SELECT s.id, -ts_rank(s.tsv, {expr}) AS rank FROM workflows_tsv s WHERE s.tsv @@ {expr}) m "
                "ON m.id = w.id"), [*params, *params]
    weights = ", ".join(str(x) for x in WEIGHTS)
    return (f"JOIN (SELECT rowid AS id, bm25(workflows_fts, {weights}) AS rank FROM workflows_fts "
            "WHERE workflows_fts MATCH ?) m ON m.id = w.id"), [text]


def filtered(conn: Conn, text: str = "", nodes: Sequence[str] = (), category: str = "", include_paid: bool = True,
             limit: int = 20, offset: int = 0) -> tuple[int, list[Any]]:
    """(total, rows of id, name, author, node_types, total_views, created_at, paid): the live templates
    matching every word of `text` (best first; without one, most viewed first), using every node type in
    `nodes` (the full type or its last part, any case), in `category`, and not paid unless `include_paid`;
    `limit` of them from `offset` on."""
    pg = is_postgres(conn)
    joins, where, params = "", ["w.removed_at IS NULL"], list[Any]()
    order = "w.total_views DESC, w.id"
    if text.strip():
        joins, params = _match(conn, text)
        order = "m.rank, w.id"
    # text that is not a JSON list matches nothing (jsonsql guards it in each dialect)
    node_each, node_where = jsonsql.list_strings(pg, "w.node_types")
    for node in nodes:
        where.append(f"EXISTS (SELECT 1 FROM {node_each} WHERE {node_where} AND (lower(j.value) = lower(?) "
                     f"OR lower(j.value) {'ILIKE' if pg else 'LIKE'} ?))")
        params += [node, "%." + node.lower()]
    if category.strip():
        each, cond = jsonsql.list_strings(pg, "w.categories")
        where.append(f"EXISTS (SELECT 1 FROM {each} WHERE {cond} AND lower(j.value) = lower(?))")
        params.append(category.strip())
    if not include_paid:
        where.append("(w.paid IS NULL OR w.paid = 0)")
    body = f"FROM workflows w {joins} WHERE {' AND '.join(where)}"
    # built for this connection's engine (the tsquery and the JSON lists are each dialect's own)
    total = int(conn.execute(only(pg, f"SELECT COUNT(*) {body}"), params).one()[0])
    found = conn.execute(
        only(pg, f"SELECT w.id, w.name, w.author, w.node_types, w.total_views, w.created_at, w.paid AS paid "
                 f"{body} ORDER BY {order} LIMIT ? OFFSET ?"), [*params, limit, offset]).fetchall()
    return total, found
