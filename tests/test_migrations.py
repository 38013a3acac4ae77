"""The migrations as files (scraper/db/migrations/): numbered without gaps, and databases made by the last
release's code, on both backends, migrate to exactly the schema a new database gets, every row kept.

tests/old_schema/ holds what that code (commit 8bc439e, when the migrations were one module) made, never to
be made again: `sqlite-schema23.db` (its latest schema) and `sqlite-schema7.db` (an older one, before the
mirror core rebuilt answers and changes), each with rows in jobs, workflows, answers (and items at 23);
`postgres-schema23.json`, the statements its migration ran on PostgreSQL, version by version.
"""

import json
import shutil
import sqlite3
from importlib import resources
from pathlib import Path

import pytest

from scraper.db import migrations, search, store

OLD = Path(__file__).parent / "old_schema"
MARKS = ("[", "]", "...")


# --- the files ------------------------------------------------------------------------------------------

def test_the_files_are_numbered_as_applied_without_gaps_and_each_postgres_text_has_its_base():
    names = sorted(e.name for e in resources.files(migrations).iterdir() if e.name.endswith(".sql"))
    found = [migrations.FILE_NAME.fullmatch(n) for n in names]
    assert all(found), [n for n, m in zip(names, found, strict=True) if m is None]
    base = [int(m.group(1)) for m in found if not m.group(2)]
    assert base == list(range(1, len(base) + 1))            # no gap, no duplicate
    assert {int(m.group(1)) for m in found if m.group(2)} <= set(base)
    assert [m.version for m in migrations.MIGRATIONS] == base and store.SCHEMA_VERSION == base[-1]
    # 0015 is PostgreSQL's alone, 0022 SQLite's alone: the other side's file is comments only
    by_version = {m.version: m for m in migrations.MIGRATIONS}
    assert migrations.statements(by_version[15].sqlite) == []
    assert "CREATE TABLE workflows_tsv" in by_version[15].postgres
    assert all(line.startswith("--") for line in by_version[22].postgres.splitlines() if line.strip())


@pytest.mark.parametrize("files, why", [
    (["0001_a.sql", "0003_c.sql"], "without gaps"),
    (["0001_a.sql", "0001_b.sql"], "two migration files numbered 1"),
    (["0001_a.sql", "0002_b.pg.sql"], "0002_b.pg.sql has no base file"),
    (["0001_a.sql", "2_b.sql"], "2_b.sql is not named"),
])
def test_a_folder_with_a_gap_a_duplicate_an_orphan_or_a_misnamed_file_is_refused(tmp_path, files, why):
    for name in files:
        (tmp_path / name).write_text("SELECT 1;\n")
    with pytest.raises(RuntimeError, match=why):
        migrations.load(tmp_path)


# --- SQLite: the stored databases of the last release ------------------------------------------------------

def schema_of(conn):
    return [tuple(r) for r in conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")]


def rows_of(path):
    """{table: (columns, sorted rows)} of every table but the full-text indexes' own."""
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                             "AND name NOT LIKE '%fts%' AND name NOT LIKE 'sqlite_%'")]
        return {t: ([r[1] for r in conn.execute(f"PRAGMA table_info({t})")],
                    sorted(map(tuple, conn.execute(f"SELECT * FROM {t}")), key=repr)) for t in tables}
    finally:
        conn.close()


def open_old(tmp_path, name):
    """The stored database opened with this code (migrated), its rows as they were before, and a fresh one."""
    path = tmp_path / name
    shutil.copy(OLD / name, path)
    before = rows_of(path)
    fresh = store.open_db(str(tmp_path / "fresh.db"))
    return store.open_db(str(path)), before, fresh


def assert_rows_kept(conn, before):
    for table, (columns, rows) in before.items():
        after = sorted(map(tuple, conn.execute(f"SELECT {', '.join(columns)} FROM {table}")), key=repr)
        assert after == rows, table


@pytest.mark.parametrize("name, version", [("sqlite-schema23.db", 23), ("sqlite-schema7.db", 7)])
def test_a_sqlite_database_of_the_last_release_migrates_to_the_fresh_schema_with_its_rows(tmp_path, name, version):
    assert sqlite3.connect(OLD / name).execute("PRAGMA user_version").fetchone()[0] == version
    conn, before, fresh = open_old(tmp_path, name)
    assert {"jobs", "workflows", "answers"} <= set(before) and all(before[t][1] for t in ("jobs", "answers"))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
    assert schema_of(conn) == schema_of(fresh)
    assert_rows_kept(conn, before)
    # what later migrations made of the rows: n8n's answers keyed by (source, key), the jobs counted
    assert {tuple(r) for r in conn.execute("SELECT source, key FROM answers WHERE template_id = 1001")} == \
        {("n8n", "1001")}
    assert conn.execute("SELECT sum(n) FROM job_counts").fetchone()[0] == len(before["jobs"][1])
    # the full-text index holds the rows and the transcript it had, and follows a write
    assert [r[0] for r in search.templates(conn, "marsupial", 10, MARKS)] == [1001]
    conn.execute("UPDATE workflows SET name = 'Wallaby relay' WHERE id = 1001")
    assert [r[0] for r in search.templates(conn, "wallaby", 10, MARKS)] == [1001]
    if version == 23:
        assert [r[1] for r in search.items(conn, "events", "wombats", 10, MARKS)] == ["e1"]


# --- PostgreSQL: a database migrated by the last release's code ------------------------------------------

def old_postgres(url, version):
    """A PostgreSQL database as the last release's migration left it at schema `version`."""
    frozen = json.loads((OLD / "postgres-schema23.json").read_text())["versions"]
    conn = store.connect(url)
    conn.raw("BEGIN")
    for number in range(1, version + 1):
        for statement in frozen[str(number)]:
            conn.raw(statement)
    conn.raw("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.raw("INSERT INTO schema_version (version) VALUES (%s)", (version,))
    conn.raw("COMMIT")
    return conn


def catalog(url):
    """What a PostgreSQL database's schema holds, as pg_catalog describes it: columns, constraints, indexes,
    views, functions, triggers, sequences."""
    conn = store.connect(url)
    queries = {
        "columns": """SELECT table_name, column_name, ordinal_position, data_type, is_nullable, column_default,
                             is_identity, is_generated, generation_expression
                      FROM information_schema.columns WHERE table_schema = current_schema()""",
        "constraints": """SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
                          WHERE connamespace = current_schema()::regnamespace""",
        "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()",
        "views": "SELECT viewname, definition FROM pg_views WHERE schemaname = current_schema()",
        "functions": """SELECT proname, prokind, pg_get_function_identity_arguments(oid),
                               CASE WHEN prokind = 'f' THEN pg_get_functiondef(oid) END
                        FROM pg_proc WHERE pronamespace = current_schema()::regnamespace""",
        "triggers": """SELECT t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                       WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal""",
        "sequences": """SELECT sequence_name, data_type, start_value, increment FROM information_schema.sequences
                        WHERE sequence_schema = current_schema()""",
    }
    try:
        return {kind: sorted(tuple(r) for r in conn.raw(sql).fetchall()) for kind, sql in queries.items()}
    finally:
        conn.close()


def test_a_postgres_database_migrated_by_the_last_release_ends_as_a_fresh_one(pg_url, pg_migrated_url):
    conn = old_postgres(pg_url, 23)
    assert store.migrate(conn) == store.SCHEMA_VERSION
    conn.close()
    assert catalog(pg_url) == catalog(pg_migrated_url)


def test_an_older_postgres_database_migrates_to_the_fresh_schema_with_its_rows_and_search(pg_url, pg_migrated_url):
    conn = old_postgres(pg_url, 14)          # before PostgreSQL's own search of transcripts and items (15)
    conn.raw("""INSERT INTO jobs (key, site, url, domain, status, created_at, updated_at)
                VALUES ('n8n:1001', 'n8n', 'https://n8n.io/workflows/1001', 'n8n.io', 'done', 1, 1)""")
    conn.raw("""INSERT INTO workflows (id, name, description, node_types, categories, version)
                VALUES (1001, 'Quokka relay', 'Relays quokkas', '["n8n-nodes-base.slack"]', '["Sales"]', 1),
                       (1002, 'Numbat digest', 'A digest', '[]', '[]', 1)""")
    conn.raw("INSERT INTO transcripts VALUES ('vid1', 'en', 0, 'marsupial words', '[]', 'f')")
    conn.raw("INSERT INTO template_videos VALUES (1001, 'vid1')")
    conn.raw("""INSERT INTO items (source, key, url, record, version, first_seen_at, last_seen_at, content_hash,
                                   fetched_at)
                VALUES ('events', 'e1', 'https://e/1', '{"name": "Wombat fair", "where": "Hobart"}', 1, 'f', 'f',
                        'h', 'f')""")
    conn.raw("""INSERT INTO answers (template_id, version, kind, content_hash, fetched_at, body_fetched_at, size,
                                     body, source, key)
                VALUES (1001, 1, 'api', 'h', 'f', 'f', 2, '\\x7b7d', 'n8n', '1001')""")
    before = {t: conn.raw(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in ("jobs", "items", "answers")}
    assert store.migrate(conn) == store.SCHEMA_VERSION
    for table, rows in before.items():
        width = len(rows[0])
        assert [tuple(r)[:width] for r in conn.raw(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()] == \
            [tuple(r) for r in rows], table
    # the search of 15 indexed what was there (the transcript too), and the triggers of 21 follow writes
    assert [r[0] for r in search.templates(conn, "marsupial", 10, MARKS)] == [1001]
    assert [r[1] for r in search.items(conn, "events", "hobart", 10, MARKS)] == ["e1"]
    conn.raw("UPDATE workflows SET name = 'Wallaby digest' WHERE id = 1002")
    assert [r[0] for r in search.templates(conn, "wallaby", 10, MARKS)] == [1002]
    # a rebuild (db/search) makes the rows the triggers keep
    kept = conn.raw("SELECT id, tsv::text FROM workflows_tsv ORDER BY id").fetchall()
    assert search.rebuild(conn) == 2
    assert conn.raw("SELECT id, tsv::text FROM workflows_tsv ORDER BY id").fetchall() == kept
    conn.close()
    assert catalog(pg_url) == catalog(pg_migrated_url)
