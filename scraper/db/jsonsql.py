"""JSON stored as TEXT, read in SQL: each dialect's own spelling, side by side.

SQLite reads a JSON list with `json_each` and guards text that is not JSON with `json_valid`. PostgreSQL
has `jsonb_array_elements`, but its cast `::jsonb` fails the whole statement on text that is not JSON,
and before version 16 it has no predicate to ask first (`IS JSON`). Rather than install a function in the
user's database, its spelling guards the cast with a regular expression that admits only a flat JSON list
of strings, numbers, booleans and nulls, which every such column holds (the extractor writes them with
json.dumps), and refuses the few texts `jsonb` would not take (`\\u0000`, a lone surrogate). A value that is
not such a list counts as no list, as `json_valid` makes SQLite count text that is not JSON.
"""

from __future__ import annotations

_STRING = r'"([^"\\[:cntrl:]]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
_SCALAR = rf"({_STRING}|-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?|true|false|null)"
FLAT_LIST_RE = rf"^\s*\[\s*({_SCALAR}\s*(,\s*{_SCALAR}\s*)*)?\]\s*$"
REFUSED_RE = r"\\u(0000|[dD][89abAB])"     # escapes jsonb refuses: NUL, a surrogate half


def _pg_list(column: str) -> str:
    """PostgreSQL: the column as jsonb when it is a flat JSON list, else the empty list."""
    return (f"(CASE WHEN {column} ~ '{FLAT_LIST_RE}' AND {column} !~ '{REFUSED_RE}' "
            f"THEN {column}::jsonb ELSE '[]'::jsonb END)")


def list_strings(pg: bool, column: str, alias: str = "j") -> tuple[str, str]:
    """(a FROM item named `alias` whose `value` is each string of the JSON list in `column`, the condition
    that goes with it in WHERE). Text that is not a JSON list gives no row."""
    if pg:
        return (f"LATERAL (SELECT e #>> '{{}}' AS value FROM jsonb_array_elements({_pg_list(column)}) AS e "
                f"WHERE jsonb_typeof(e) = 'string') AS {alias}", "TRUE")
    return (f"json_each(CASE WHEN json_valid({column}) THEN {column} ELSE '[]' END) AS {alias}",
            f"{alias}.type = 'text'")


def list_length(pg: bool, column: str) -> str:
    """The length of the JSON list in `column`; NULL when it is not JSON (0 for JSON that is not a list)."""
    if pg:
        return f"jsonb_array_length({_pg_list(column)})"
    return f"(CASE WHEN json_valid({column}) THEN json_array_length({column}) END)"


def count_if(condition: str) -> str:
    """How many rows meet `condition` (SUM of a boolean is SQLite's; PostgreSQL's SUM takes numbers)."""
    return f"SUM(CASE WHEN {condition} THEN 1 ELSE 0 END)"
