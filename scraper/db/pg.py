"""The PostgreSQL connection (`backend.Conn`): statements, rows by position and by name (`Row`), the
project's exceptions (`scraper.base.errors`) for psycopg's.

`execute` sends PostgreSQL's text of a `dialect.Sql` as written; a statement in SQLite's spelling only (one
not yet written in both dialects) it translates once (`dialect.translate`, cached). `raw` takes PostgreSQL's
own text (the PostgreSQL-only paths).

Transactions: `begin()` takes a transaction-level advisory lock, so the read-modify-write transactions
written for SQLite (one writer at a time) stay correct here unchanged; the hot paths (a claim with
`FOR UPDATE SKIP LOCKED`, finishing a job under its lease) ask for `begin(shared=True)` and run side by side.

psycopg (3) is imported only here, only when a URL is opened: SQLite users need not install it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from scraper.base.errors import ConfigError, DatabaseError, IntegrityError, OperationalError
from scraper.base.urls import redact_db_url
from scraper.db import backend, dialect, migrations

log = logging.getLogger(__name__)

WRITE_LOCK = 0x5C4A9E01      # the advisory lock that stands for SQLite's one writer (BEGIN IMMEDIATE)
MIGRATE_LOCK = 0x5C4A9E02
CONNECT_TIMEOUT_S = 10
CLOCK_RESYNC_S = 5.0         # how often the offset to the database's clock is measured again


class Row(tuple[Any, ...]):
    """A row by position and by column name (`backend.Row`)."""

    __slots__ = ()
    _names: dict[str, int] = {}

    def __getitem__(self, key: Any) -> Any:     # a name as well as a position
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


_ROW_CLASSES: dict[tuple[bytes, ...], type] = {}      # one Row class per list of column names, made once


def _row_factory(cursor: Any) -> Any:
    """Rows of `cursor`'s result as Row (by position and by name); the class is looked up from the result's
    column names read from libpq directly (psycopg's `description` makes an object per column each time)."""
    res = cursor.pgresult
    if res is None or not res.nfields:
        return tuple
    key = tuple(res.fname(i) for i in range(res.nfields))
    if None in key:          # COPY's result: no rows to make
        return tuple
    cls = _ROW_CLASSES.get(key)
    if cls is None:
        names = {n.decode(): i for i, n in enumerate(key)}
        cls = _ROW_CLASSES[key] = type("Row", (Row,), {"_names": names, "__slots__": ()})
    return cls


def error(e: Exception) -> DatabaseError:
    """The project's exception for psycopg's `e` (the first line of its message kept)."""
    import psycopg
    kind = IntegrityError if isinstance(e, psycopg.IntegrityError) else OperationalError
    return kind(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)


class Cursor:
    """What a statement gave: rows and rowcount. Inside a transaction its statement may still be in
    the pipeline: asking for its rows or its count waits for the answers sent so far (one round trip)."""

    def __init__(self, conn: Connection, cur: Any) -> None:
        self._conn, self._cur = conn, cur

    def _rows(self) -> bool:
        # whether the statement returned rows, asked of libpq (psycopg's `description` builds objects)
        self._conn.settle()
        res = self._cur.pgresult
        return res is not None and res.nfields > 0

    def _fetch(self, how: str, *args: Any) -> Any:
        import psycopg
        try:
            return getattr(self._cur, how)(*args) if self._rows() else None
        except psycopg.Error as e:
            raise error(e) from e

    def fetchone(self) -> backend.Row | None:
        row: backend.Row | None = self._fetch("fetchone")
        return row

    def one(self) -> backend.Row:
        row = self.fetchone()
        if row is None:
            raise DatabaseError("the statement gave no row")
        return row

    def fetchall(self) -> list[backend.Row]:
        return self._fetch("fetchall") or []

    def fetchmany(self, size: int = 1, /) -> list[backend.Row]:
        return self._fetch("fetchmany", size) or []

    def __iter__(self) -> Iterator[backend.Row]:
        return iter(self.fetchall())

    @property
    def rowcount(self) -> int:
        self._conn.settle()
        return self._cur.rowcount

    @property
    def description(self) -> list[tuple[Any, ...]] | None:
        return None if self._cur.description is None else [(c.name,) + (None,) * 6 for c in self._cur.description]

    def close(self) -> None:
        self._cur.close()


class Connection:
    """One session on a PostgreSQL database, in autocommit mode (transactions are explicit)."""

    is_postgres = True

    def __init__(self, url: str) -> None:
        import psycopg
        from psycopg.adapt import Loader

        class _Number(Loader):
            """numeric (SUM of bigint, AVG) as int when whole, else float: what sqlite3 returns."""

            def load(self, data: Any) -> int | float:
                text = bytes(data).decode()
                return int(text) if text.lstrip("-").isdigit() else float(text)

        class _Bool(Loader):
            def load(self, data: Any) -> int:
                return 1 if bytes(data) == b"t" else 0

        class _Text(Loader):
            def load(self, data: Any) -> str:
                return bytes(data).decode()

        self.url = redact_db_url(url)
        try:
            # server-side binding: a statement run five times is prepared once and planned no more
            self._raw = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                                        row_factory=_row_factory)
        except psycopg.Error as e:
            raise ConfigError(unreachable(url, e)) from None
        for name, loader in (("numeric", _Number), ("bool", _Bool), ("json", _Text), ("jsonb", _Text)):
            self._raw.adapters.register_loader(name, loader)
        self._pipe: Any = None               # the pipeline of the transaction under way
        self._pipe_cm: Any = None            # (and its context)
        self._offset, self._synced = 0.0, -CLOCK_RESYNC_S
        # statements run last in the transaction, right before its COMMIT (db/events.py: the outbox's rows)
        self.at_commit: list[tuple[str | dialect.Sql, Sequence[Any]]] = []

    # --- statements ----------------------------------------------------------------------------

    def execute(self, sql: str | dialect.Sql, params: Sequence[Any] | Mapping[str, Any] = (), /) -> Cursor:
        """PostgreSQL's spelling of a `dialect.Sql` as written; a statement in SQLite's spelling only
        translated (`dialect.translate`)."""
        return self._send(self._text(sql), params if isinstance(params, Mapping) else tuple(params))

    def executemany(self, sql: str | dialect.Sql, seq: Iterable[Sequence[Any]], /) -> Cursor:
        return self._send(self._text(sql), [tuple(p) for p in seq], many=True)

    @staticmethod
    def _text(sql: str | dialect.Sql) -> str:
        return dialect.translate(sql) if isinstance(sql, str) else sql.postgres

    def raw(self, sql: str, params: Any = None) -> Cursor:
        """A statement in PostgreSQL's own dialect, untranslated (the PostgreSQL-only paths)."""
        return self._send(sql, params)

    def _send(self, sql: str, params: Any, many: bool = False) -> Cursor:
        """Run one statement. In a transaction it joins the pipeline: sent at once, its answer read when
        someone asks for it, or at COMMIT, so a transaction costs a round trip per answer awaited, not per
        statement."""
        import psycopg
        cur = self._raw.cursor()
        try:
            (cur.executemany if many else cur.execute)(sql, params)
        except psycopg.Error as e:
            raise error(e) from e
        return Cursor(self, cur)

    def settle(self) -> None:
        """Wait for the answers of the statements sent in the pipeline so far (their errors raised here)."""
        import psycopg
        if self._pipe is not None:
            try:
                self._pipe.sync()
            except psycopg.Error as e:
                raise error(e) from e

    def _leave_pipeline(self) -> None:
        """Settle and leave the pipeline; the transaction goes on without it (COPY, a named cursor)."""
        if self._pipe is not None:
            cm, self._pipe = self._pipe_cm, None
            try:
                cm.__exit__(None, None, None)
            except Exception as e:
                import psycopg
                if isinstance(e, psycopg.Error):
                    raise error(e) from e
                raise
            self.settle()

    def copy(self, sql: str) -> Any:
        """psycopg's COPY ... FROM STDIN (`with conn.copy(sql) as sink: sink.write_row(row)`), in the
        transaction begun, if any."""
        self._leave_pipeline()
        return self._raw.cursor().copy(sql)

    def stream(self, sql: str | dialect.Sql, params: Sequence[Any] = (), size: int = 500) -> Iterator[dict[str, Any]]:
        """Dicts of a SELECT, `size` rows at a time through a server-side cursor (a whole table is never
        in memory; sqlite_utils' `query` does the same on SQLite)."""
        import psycopg
        try:
            self._leave_pipeline()
            with self._raw.cursor(name=f"scraper_stream_{id(self)}", withhold=True) as cur:
                cur.itersize = size
                cur.execute(self._text(sql), tuple(params))
                for row in cur:
                    yield dict(zip(row.keys(), row, strict=True))
        except psycopg.Error as e:
            raise error(e) from e

    def begin(self, shared: bool = False) -> None:
        """BEGIN; unless `shared`, wait for the write lock first (SQLite's BEGIN IMMEDIATE). The transaction
        runs in a pipeline (`_send`): BEGIN goes with its first statement, COMMIT with its last."""
        self._pipe_cm = self._raw.pipeline()
        self._pipe = self._pipe_cm.__enter__()
        self.raw("BEGIN")
        if not shared:
            self.raw("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))

    # --- the session ---------------------------------------------------------------------------

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus
        return self._pipe is not None or self._raw.info.transaction_status != TransactionStatus.IDLE

    def commit(self) -> None:
        if self.in_transaction:
            held, self.at_commit = self.at_commit, []
            for sql, params in held:
                self.execute(sql, params)
            self.raw("COMMIT")
            self._leave_pipeline()

    def rollback(self) -> None:
        """Undo the transaction; an error still waiting in the pipeline is the reason, not news."""
        import psycopg
        self.at_commit = []
        if self._pipe is not None:
            cm, self._pipe = self._pipe_cm, None
            try:
                cm.__exit__(None, None, None)
            except psycopg.Error:
                pass
        if self._raw.info.transaction_status != 0:      # not IDLE
            self.raw("ROLLBACK")

    def close(self) -> None:
        self._raw.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False

    def clock(self) -> float:
        """Seconds since the epoch on the database's clock: the local clock plus its measured offset to
        `clock_timestamp()` (taken again every CLOCK_RESYNC_S), so machines whose clocks or time zones
        differ agree, at one round trip every few seconds."""
        mono = time.monotonic()
        if mono - self._synced >= CLOCK_RESYNC_S:
            before = time.time()
            db_now = self.raw("SELECT extract(epoch FROM clock_timestamp())::float8").one()[0]
            after = time.time()
            self._offset, self._synced = db_now - (before + after) / 2, mono
        return time.time() + self._offset


def unreachable(url: str, error: BaseException) -> str:
    """One sentence for a database URL that cannot be opened (no password in it)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "localhost (Unix socket)", parts.port or 5432
    reason = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
    if parts.password:
        reason = reason.replace(parts.password, "***")
    return (f"cannot open the PostgreSQL database {redact_db_url(url)} at {host}:{port} ({reason}); check that "
            f"the server runs and accepts connections there, and the user, the password (PGPASSWORD or "
            f"~/.pgpass) and the database name.")


# --- the schema ------------------------------------------------------------------------------------

def schema_version(conn: Connection) -> int:
    if not conn.raw("SELECT to_regclass('schema_version') IS NOT NULL").one()[0]:
        return 0
    row = conn.raw("SELECT version FROM schema_version").fetchone()
    return 0 if row is None else int(row[0])


def migrate(conn: Connection, target: int) -> int:
    """Run the migrations this database has not run yet, up to schema version `target`, all in one
    transaction: each file's PostgreSQL text as written where it has one (`NNNN_name.pg.sql`), else its
    SQLite text translated statement by statement. Returns the schema version."""
    if schema_version(conn) >= target:
        return target
    conn.raw("BEGIN")
    try:
        conn.raw("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
        conn.raw("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        for migration in migrations.pending(schema_version(conn), target):
            if migration.postgres is not None:
                conn.raw(migration.postgres)
            else:
                for statement in migrations.statements(migration.sqlite):
                    conn.raw(dialect.translate(statement, ddl=True), ())
        conn.raw("DELETE FROM schema_version")
        conn.raw("INSERT INTO schema_version (version) VALUES (%s)", (target,))
        conn.raw("COMMIT")
    except BaseException:
        conn.raw("ROLLBACK")
        raise
    return target
