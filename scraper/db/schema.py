"""What tables and columns a database holds, asked of each database in its own way: SQLite's catalogue
(`sqlite_master`, `PRAGMA table_info`) on a file, PostgreSQL's (`pg_catalog`) on a URL. The one place the
rest of the code learns the schema from; nothing reads a catalogue anywhere else.
"""

from __future__ import annotations

from scraper.db.backend import Conn
from scraper.db.store import is_postgres

# PostgreSQL's type names as SQLite declares the same columns (the Parquet export maps those)
_PG_TYPES = {"bigint": "INTEGER", "integer": "INTEGER", "smallint": "INTEGER", "double precision": "REAL",
             "real": "REAL", "text": "TEXT", "bytea": "BLOB", "boolean": "INTEGER"}


def tables(conn: Conn) -> set[str]:
    """The names of the database's own tables (not views, not SQLite's internal ones nor FTS5's shadows)."""
    if is_postgres(conn):
        return {r[0] for r in conn.raw(
            """SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')""").fetchall()}
    return {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'").fetchall()}


def has_table(conn: Conn, name: str) -> bool:
    return name in tables(conn)


def virtual_tables(conn: Conn) -> set[str]:
    """SQLite's FTS5 tables (PostgreSQL has none: its search lives in ordinary tables and columns)."""
    if is_postgres(conn):
        return set()
    return {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'").fetchall()}


def columns(conn: Conn, table: str) -> list[tuple[str, str]]:
    """(name, declared type) of each stored column of `table`, in table order; generated columns left out
    (as SQLite's table_info does); types in SQLite's words (INTEGER, REAL, TEXT, BLOB)."""
    if is_postgres(conn):
        rows = conn.raw(
            """SELECT a.attname::text, format_type(a.atttypid, NULL) FROM pg_attribute a
               WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped
                 AND a.attgenerated = '' ORDER BY a.attnum""", (table,)).fetchall()
        return [(r[0], _PG_TYPES.get(r[1], r[1].upper())) for r in rows]
    return [(r[1], r[2]) for r in conn.execute(f'PRAGMA table_info("{table}")').fetchall()]


def column_names(conn: Conn, table: str) -> list[str]:
    return [name for name, _ in columns(conn, table)]


def readable(conn: Conn) -> None:
    """Read the catalogue once: an SQLite file that is not a database raises DatabaseError here."""
    if not is_postgres(conn):
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()


def identity_columns(conn: Conn, table: str) -> list[str]:
    """PostgreSQL's identity columns of `table` (whose sequence a copy moves past the copied ids); none
    on SQLite, whose INTEGER PRIMARY KEY needs no sequence."""
    if not is_postgres(conn):
        return []
    return [r[0] for r in conn.raw(
        """SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0
             AND NOT a.attisdropped AND a.attidentity <> '' ORDER BY a.attnum""", (table,)).fetchall()]


def copyable_tables(conn: Conn) -> list[str]:
    """The own tables, sorted, without FTS5 indexes and their shadow tables (what `migrate --to` copies)."""
    fts = virtual_tables(conn)
    return sorted(n for n in tables(conn) if n not in fts and not any(n.startswith(f + "_") for f in fts))
