"""Connections and the schema: SQLite (`scraper.db.sqlite`: WAL, busy timeout, migrated by `PRAGMA
user_version`) for a path, PostgreSQL (`scraper.db.pg`: a `schema_version` table) for a database URL, both
`backend.Conn`. The migrations are the files of `scraper/db/migrations/`."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

from scraper.base.errors import ConfigError, DatabaseUnavailable, OperationalError
from scraper.base.urls import is_db_url
from scraper.db import migrations, sqlite
from scraper.db.backend import Conn
from scraper.db.dialect import Sql, same

if TYPE_CHECKING:
    from scraper.db import pg

BUSY_TIMEOUT_MS = 30_000    # writers queue behind each other; a claim or a result holds the lock for < 1 ms
WAL_KEPT_MB = 64            # the WAL file's size kept after a checkpoint resets it (SQLite's journal_size_limit)

SCHEMA_VERSION = migrations.LATEST    # what `migrate` brings a database to: the last file's number

JOB_STATUSES = ("pending", "running", "done", "failed", "invalid")


def is_postgres(conn: Conn) -> TypeGuard[pg.Connection]:
    """Whether `conn` is PostgreSQL's (mypy then knows its own calls: `raw`, `copy`, `stream`, `clock`)."""
    return conn.is_postgres


def clock(conn: Conn) -> float:
    """Now, in seconds since the epoch, on the clock that decides: the database's on PostgreSQL (many
    machines share it), this machine's on SQLite (one machine)."""
    return conn.clock() if is_postgres(conn) else time.time()


def connect(path: str, link: pg.Link | None = None, lock_report_s: float | None = None,
            busy_s: float | None = None) -> Conn:
    """A connection in autocommit mode (transactions are explicit), WAL, with a busy timeout
    (`scraper.db.sqlite`); a database URL gives a PostgreSQL connection (`scraper.db.pg`), held as `link`
    says (a run's processes: keepalives, timeouts, made again when lost; `run_link()`). `lock_report_s`
    (a run's on SQLite, `lock_report_after`): the busy timeout, after which a transaction keeps waiting for
    the write lock and says who holds it (`sqlite.Connection.begin`); `busy_s`, a shorter busy timeout (the
    supervisor's: its wait turns every `busy_s`, calling the connection's `while_locked` each time)."""
    if is_db_url(path):
        return postgres(path, link)
    wait_s = None if lock_report_s is None else min(busy_s or lock_report_s, lock_report_s)
    timeout_ms = BUSY_TIMEOUT_MS if wait_s is None else int(wait_s * 1000)
    try:
        conn = sqlite.connect(path, timeout_s=timeout_ms / 1000)
        conn.execute(f"PRAGMA busy_timeout = {timeout_ms}")
        conn.execute("PRAGMA journal_mode = WAL")
    except OperationalError as e:
        raise unopenable(path, e) from None
    # NORMAL under WAL loses at most the last commits on power loss, never consistency
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    # a reader's long read transaction keeps checkpoints from resetting the WAL, which grows meanwhile; once it
    # lets go, the WAL restarts and this truncates the file back, instead of keeping its peak for good
    conn.execute(f"PRAGMA journal_size_limit = {WAL_KEPT_MB * 2**20}")
    conn.lock_report_s = lock_report_s
    return conn


def path_of(conn: Conn) -> str:
    """The file of a SQLite connection's main database."""
    return str(conn.execute("PRAGMA database_list").fetchall()[0]["file"])


def open_postgres(url: str, link: pg.Link | None = None) -> pg.Connection:
    """`open_db` for a database URL, typed as PostgreSQL's (for the modules that run only there)."""
    conn = postgres(url, link)
    migrate(conn)
    return conn


def postgres(url: str, link: pg.Link | None = None) -> pg.Connection:
    """A connection to the PostgreSQL database at `url`. One that cannot be made is a ConfigError (one
    sentence) for a command, DatabaseUnavailable for a run's process given its `link` (it waits for the
    database, `pool/outage`)."""
    try:
        from scraper.db import pg
        return pg.Connection(url, link)
    except ImportError:
        raise ConfigError("a PostgreSQL database URL needs psycopg: pip install 'scraper[postgres]'.") from None
    except DatabaseUnavailable as e:
        if link is not None:
            raise
        raise ConfigError(str(e)) from None


def run_link(settings: Any) -> pg.Link | None:
    """How a run's processes hold a PostgreSQL connection (`settings`' db_* settings); None on SQLite."""
    if not is_db_url(settings.db_path):
        return None
    from scraper.db import pg
    return pg.Link.of(settings)


def ping(conn: Conn) -> None:
    """One round trip (a lost PostgreSQL session of a run's connection is made again first)."""
    conn.execute(same("SELECT 1")).one()


def unopenable(path: str, error: BaseException) -> ConfigError:
    """One sentence for a database file SQLite cannot open or create (settings.check_db_path has said
    already what it can of a new file's folder; this is for an existing file in a folder gone read-only)."""
    import os
    folder = os.path.dirname(os.path.abspath(path))
    why = (f"the folder {folder} cannot be written (SQLite keeps its journal beside the file)"
           if os.path.isdir(folder) and not os.access(folder, os.W_OK | os.X_OK) else str(error))
    return ConfigError(f"cannot open the database {path}: {why}.")


def read_only(path: str, time_limit_s: float) -> Conn:
    """A connection that cannot write and whose statements stop after `time_limit_s` seconds from now (a
    server's answer beside a running `run`: SQLite's `mode=ro` never takes the write lock, and WAL lets it
    read while workers write). A query cut off raises OperationalError "interrupted" (PostgreSQL: each
    statement's own statement_timeout, as the same class)."""
    if is_db_url(path):
        pg_conn = postgres(path)
        pg_conn.raw("SET default_transaction_read_only = on")
        pg_conn.raw(f"SET statement_timeout = {max(1, int(time_limit_s * 1000))}")     # 0 would mean no limit
        return pg_conn
    from urllib.parse import quote
    conn = sqlite.connect(f"file:{quote(str(path))}?mode=ro", timeout_s=BUSY_TIMEOUT_MS / 1000, uri=True)
    deadline = time.monotonic() + time_limit_s
    # called every 10,000 virtual machine steps: a non-zero answer interrupts the statement
    conn.set_progress_handler(lambda: time.monotonic() > deadline, 10_000)
    return conn


def open_db(path: str, link: pg.Link | None = None, lock_report_s: float | None = None,
            busy_s: float | None = None) -> Conn:
    """Connect (`connect`) and bring the schema up to date."""
    conn = connect(path, link, lock_report_s, busy_s)
    migrate(conn)
    return conn


def schema_version(conn: Conn) -> int:
    """The schema version the database is at (0: a new one): SQLite's `user_version`, PostgreSQL's
    `schema_version` table."""
    if is_postgres(conn):
        from scraper.db import pg
        return pg.schema_version(conn)
    return int(conn.execute("PRAGMA user_version").one()[0])


def migrate(conn: Conn, target: int = SCHEMA_VERSION) -> int:
    """Run the migrations this database has not run yet, up to schema version `target` (a lower one makes a
    database as an older release left it), all in one transaction: a failure leaves the schema as it was.
    Returns the schema version."""
    if is_postgres(conn):
        from scraper.db import pg
        return pg.migrate(conn, target)
    version = schema_version(conn)
    if version >= target:
        return version
    conn.begin()
    try:
        # another process may have migrated while we waited for the lock
        version = schema_version(conn)
        for migration in migrations.pending(version, target):
            for statement in migrations.statements(migration.sqlite):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {migration.version}")
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    return max(version, target)


class transaction:
    """`with transaction(conn):` = BEGIN IMMEDIATE ... COMMIT, ROLLBACK on any exception.

    On PostgreSQL BEGIN IMMEDIATE waits for the one write lock, as on SQLite; `shared=True` (a claim with
    SKIP LOCKED, finishing a job under its lease: row locks suffice) lets such transactions run together."""

    def __init__(self, conn: Conn, shared: bool = False) -> None:
        self.conn = conn
        self.shared = shared

    def __enter__(self) -> Conn:
        self.conn.begin(shared=self.shared)
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> Literal[False]:
        if exc_type:
            self.conn.rollback()
        else:
            self.conn.commit()
        return False


# --- the notifications table: pings and messages a run sent (scraper.net.notify) ---------------------

def record_notification(conn: Conn, at: float, kind: str, ok: bool, detail: str | None = None) -> None:
    with transaction(conn) as c:
        c.execute(same("INSERT INTO notifications (at, kind, ok, detail) VALUES (?, ?, ?, ?)"),
                  (at, kind, int(ok), detail))


def last_notification(conn: Conn) -> dict[str, Any] | None:
    """{at, kind, ok} of the last ping or notification sent, or None before the first."""
    row = conn.execute(same("SELECT at, kind, ok FROM notifications ORDER BY id DESC LIMIT 1")).fetchone()
    return None if row is None else {"at": row["at"], "kind": row["kind"], "ok": bool(row["ok"])}


def _with_verdict(row: dict[str, Any]) -> dict[str, Any]:
    from scraper.policy import redact  # imported when used: its patterns are compiled at import
    if not any(c in row for c in redact.COLUMNS):
        return row
    verdict, saved = redact.decided(row)
    return {**row, "clean_at_rules": verdict, "redacted": saved}


def upsert(conn: Conn, table: str, row: dict[str, Any], pk: str) -> None:
    """Insert `row` or update the row with the same `pk` (no duplicates on a re-fetch). A `workflows` row
    that sets any redacted column gets its redaction verdict and redacted form (`redact.decided`) set with
    it: every writer of those columns comes through here, so neither outlives the text it was made from."""
    if table == "workflows":
        row = _with_verdict(row)
    cols = list(row)
    updates = ", ".join(f"{c} = excluded.{c}" for c in cols if c != pk)
    conn.execute(
        same(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
             f"ON CONFLICT ({pk}) DO UPDATE SET {updates}"),
        [row[c] for c in cols],
    )


def replace_links(conn: Conn, table: str, column: str, value: object, rows: Iterable[dict[str, Any]]) -> None:
    """A link table's rows for one `column` = `value` become `rows` (a site's `Result.links`)."""
    conn.execute(same(f"DELETE FROM {table} WHERE {column} = ?"), (value,))
    for row in rows:
        cols = list(row)
        insert = f"INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        conn.execute(Sql(f"INSERT OR IGNORE {insert}", same(f"INSERT {insert} ON CONFLICT DO NOTHING").postgres),
                     [row[c] for c in cols])
