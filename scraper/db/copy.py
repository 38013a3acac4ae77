"""`scraper migrate --to URL`: copy a SQLite mirror into an empty PostgreSQL database, every table found
by introspection (so tables that later migrations add come along), in one transaction."""



from scraper.base.errors import ConfigError
from scraper.base.urls import redact_db_url
from scraper.db import store


def _sqlite_tables(src):
    """The SQLite file's own tables (not its internals, not the FTS5 index and its shadow tables)."""
    names = [r[0] for r in src.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    fts = {r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'")}
    return [n for n in names if n not in fts and not any(n.startswith(f + "_") for f in fts)]


def _pg_columns(dst, table):
    """Columns a copy may write (generated ones are the database's own), and the identity columns."""
    rows = dst.raw(
        """SELECT column_name::text, is_identity, is_generated FROM information_schema.columns
           WHERE table_schema = current_schema() AND table_name = %s ORDER BY ordinal_position""",
        (table,)).fetchall()
    return [r[0] for r in rows if r[2] == "NEVER"], [r[0] for r in rows if r[1] == "YES"]


def rows_in(dst):
    """{table: rows} of the target's tables that hold any (schema_version aside)."""
    out = {}
    for (table,) in dst.raw("SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() "
                            "AND tablename != 'schema_version' ORDER BY tablename").fetchall():
        n = dst.raw(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0]
        if n:
            out[table] = n
    return out


def copy(src_path, url, batch=5_000):
    """Copy the SQLite database at `src_path` into the PostgreSQL database at `url`, which must be empty.
    Returns {table: rows copied}; ConfigError (one sentence) when the target is not empty."""
    src = store.open_db(src_path)          # brought to the current schema first, like the target
    dst = store.open_db(url)
    try:
        full = rows_in(dst)
        if full:
            listed = ", ".join(f"{t} {n}" for t, n in list(full.items())[:4])
            raise ConfigError(f"the target database {redact_db_url(url)} is not empty ({listed}); migrate copies "
                              f"into an empty database only.")
        copied = {}
        with store.transaction(dst):
            for table in _sqlite_tables(src):
                columns, identity = _pg_columns(dst, table)
                have = [r[1] for r in src.execute(f'PRAGMA table_info("{table}")')]
                columns = [c for c in columns if c in have]
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


def _copy_table(src, dst, table, columns, batch):
    names = ", ".join(f'"{c}"' for c in columns)
    cur = src.execute(f'SELECT {names} FROM "{table}"')
    n = 0
    with dst._raw.cursor().copy(f'COPY "{table}" ({names}) FROM STDIN') as sink:
        while True:
            chunk = cur.fetchmany(batch)
            if not chunk:
                return n
            for row in chunk:
                sink.write_row(tuple(row))
            n += len(chunk)



