"""`scraper migrate --to URL`: copy a SQLite mirror into an empty PostgreSQL database, every table found
by introspection (so tables that later migrations add come along), in one transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scraper.base.errors import ConfigError
from scraper.base.urls import redact_db_url
from scraper.db import schema, store
from scraper.db.backend import Conn

if TYPE_CHECKING:
    from scraper.db import pg


def rows_in(dst: pg.Connection) -> dict[str, int]:
    """{table: rows} of the target's tables that hold any (schema_version aside)."""
    out: dict[str, int] = {}
    for table in sorted(schema.tables(dst) - {"schema_version"}):
        n = dst.raw(f'SELECT COUNT(*) FROM "{table}"').one()[0]
        if n:
            out[table] = n
    return out


def copy(src_path: str, url: str, batch: int = 5_000) -> dict[str, int]:
    """Copy the SQLite database at `src_path` into the PostgreSQL database at `url`, which must be empty.
    Returns {table: rows copied}; ConfigError (one sentence) when the target is not empty."""
    src = store.open_db(src_path)          # brought to the current schema first, like the target
    dst = store.open_postgres(url)
    try:
        full = rows_in(dst)
        if full:
            listed = ", ".join(f"{t} {n}" for t, n in list(full.items())[:4])
            raise ConfigError(f"the target database {redact_db_url(url)} is not empty ({listed}); migrate copies "
                              f"into an empty database only.")
        copied: dict[str, int] = {}
        with store.transaction(dst):
            for table in schema.copyable_tables(src):
                have = schema.column_names(src, table)
                # generated columns are the target's own: column_names leaves them out
                columns = [c for c in schema.column_names(dst, table) if c in have]
                identity = schema.identity_columns(dst, table)
                if not columns:
                    continue       # a SQLite-only table (no PostgreSQL twin): nothing to copy into
                copied[table] = _copy_table(src, dst, table, columns, batch)
                for col in identity:
                    dst.raw(f"""SELECT setval(pg_get_serial_sequence('"{table}"', '{col}'),
                                              GREATEST(1, (SELECT COALESCE(MAX("{col}"), 0) FROM "{table}")))""")
        return copied
    finally:
        src.close()
        dst.close()


def _copy_table(src: Conn, dst: pg.Connection, table: str, columns: list[str], batch: int) -> int:
    names = ", ".join(f'"{c}"' for c in columns)
    cur = src.execute(f'SELECT {names} FROM "{table}"')
    n = 0
    with dst.copy(f'COPY "{table}" ({names}) FROM STDIN') as sink:
        while True:
            chunk = cur.fetchmany(batch)
            if not chunk:
                return n
            for row in chunk:
                sink.write_row(tuple(row))
            n += len(chunk)



