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

import dataclasses
import logging
import math
import os
import socket
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from scraper.base.errors import DatabaseError, DatabaseUnavailable, IntegrityError, OperationalError
from scraper.base.urls import redact_db_url
from scraper.db import backend, dialect, migrations

log = logging.getLogger(__name__)

WRITE_LOCK = 0x5C4A9E01      # the advisory lock that stands for SQLite's one writer (BEGIN IMMEDIATE)
MIGRATE_LOCK = 0x5C4A9E02
CONNECT_TIMEOUT_S = 10
CLOCK_RESYNC_S = 5.0         # how often the offset to the database's clock is measured again
WATCH_EVERY_S = 0.5          # how often the watchdog looks for a round trip nobody answers
# SQLSTATEs that say the database (not the statement) failed: connection exceptions (class 08), a shutdown or
# a crash of the server, one still starting, a statement or an idle transaction cut by the run's timeouts
UNAVAILABLE = ("57P01", "57P02", "57P03", "57014", "25P03")


@dataclasses.dataclass(frozen=True)
class Link:
    """How a run's process holds its connection (issue 44): connect within `connect_timeout_s`; TCP keepalives
    after `keepalive_s` idle and `tcp_user_timeout` of as long, so a dead peer is noticed; the server cancels a
    statement (or an idle transaction, which would hold its locks) after `statement_timeout_s`; a round trip
    unanswered for `statement_timeout_s + keepalive_s` is cut by the process's watchdog (a silent network acks
    what it swallows, so only the client can tell); a lost connection is made again at the next statement."""

    connect_timeout_s: float
    keepalive_s: float
    statement_timeout_s: float

    @classmethod
    def of(cls, settings: Any) -> Link:
        return cls(settings.db_connect_timeout_s, settings.db_keepalive_s, settings.db_statement_timeout_s)

    @property
    def bound_s(self) -> float:
        """How long a round trip may go unanswered before the connection counts as lost."""
        return self.statement_timeout_s + self.keepalive_s

    def params(self, url: str) -> dict[str, Any]:
        """libpq's connection parameters for this link (the URL's own `options` kept)."""
        from psycopg.conninfo import conninfo_to_dict
        keep = math.ceil(self.keepalive_s)
        ms = max(1, int(self.statement_timeout_s * 1000))
        options = f"-c statement_timeout={ms} -c idle_in_transaction_session_timeout={ms}"
        own = conninfo_to_dict(url).get("options")
        return {"connect_timeout": max(2, math.ceil(self.connect_timeout_s)), "keepalives": 1,
                "keepalives_idle": keep, "keepalives_interval": max(1, math.ceil(keep / 3)), "keepalives_count": 3,
                "tcp_user_timeout": int(self.keepalive_s * 1000), "options": f"{own} {options}" if own else options}


class _Watchdog:
    """One thread per process: a connection whose round trip has waited past its link's bound has its socket
    shut, so the wait ends with an error instead of lasting as long as the network stays silent (what
    `net/http` does to a trickling answer)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Nothing watched, no thread: a process's start, and a forked child's (the parent's thread is not in
        it, and a lock it held at the fork would stay held)."""
        self.conns: weakref.WeakSet[Connection] = weakref.WeakSet()
        self.lock = threading.Lock()
        self.started = False

    def watch(self, conn: Connection) -> None:
        with self.lock:
            if not self.started:
                self.started = True
                threading.Thread(target=self._loop, name="pg-watchdog", daemon=True).start()
            self.conns.add(conn)

    def _loop(self) -> None:
        while True:
            time.sleep(WATCH_EVERY_S)
            now = time.monotonic()
            with self.lock:
                conns = list(self.conns)
            for conn in conns:
                conn.cut_if_silent(now)


_WATCHDOG = _Watchdog()
os.register_at_fork(after_in_child=_WATCHDOG.reset)
# how many times a run's connection of this process was found lost: a restart or a silent network takes all
# of a process's sessions at once, so each made before the last loss is made again before its next statement
_LOSSES = [0]


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
    return kind(_first_line(e))


def _server_went(e: BaseException | None) -> bool:
    """Whether `e` or what it was raised from says the server went (a shutdown, a crash, the connection
    broken) or cut the statement by the run's timeouts: psycopg's "cannot exit pipeline mode" is raised from
    the shutdown that caused it."""
    while e is not None:
        state = str(getattr(e, "sqlstate", None) or "")
        if state in UNAVAILABLE or state.startswith("08"):
            return True
        e = e.__cause__ or e.__context__
    return False


def _readable(fd: int) -> bool:
    import select
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return False


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


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
            raise self._conn.error(e) from e

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

    def __init__(self, url: str, link: Link | None = None) -> None:
        self.url = redact_db_url(url)
        self._url, self.link = url, link
        self._busy_since: float | None = None    # when the round trip under way began (the watchdog reads it)
        self._pipe: Any = None               # the pipeline of the transaction under way
        self._pipe_cm: Any = None            # (and its context)
        self._offset, self._synced = 0.0, -CLOCK_RESYNC_S
        # statements run last in the transaction, right before its COMMIT (db/events.py: the outbox's rows)
        self.at_commit: list[tuple[str | dialect.Sql, Sequence[Any]]] = []
        self._raw = self._open()
        self._made_after = _LOSSES[0]
        self.losses = 0         # lost sessions made again (`status` counts the database's outages by them)
        if link is not None:
            _WATCHDOG.watch(self)

    def _open(self) -> Any:
        """A new session: DatabaseUnavailable (the sentence of `unreachable`) when it cannot be made."""
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

        params = {"connect_timeout": CONNECT_TIMEOUT_S} if self.link is None else self.link.params(self._url)
        try:
            # server-side binding: a statement run five times is prepared once and planned no more
            raw = psycopg.connect(self._url, autocommit=True, row_factory=_row_factory, **params)
        except psycopg.Error as e:
            raise DatabaseUnavailable(unreachable(self._url, e)) from None
        for name, loader in (("numeric", _Number), ("bool", _Bool), ("json", _Text), ("jsonb", _Text)):
            raw.adapters.register_loader(name, loader)
        return raw

    def error(self, e: Exception) -> DatabaseError:
        """The project's exception for psycopg's `e`: DatabaseUnavailable when the session is lost or the
        server says it is going (or cut a statement by the run's timeouts)."""
        import psycopg
        if isinstance(e, psycopg.OperationalError) and (self.lost or _server_went(e)):
            return DatabaseUnavailable(_first_line(e))
        return error(e)

    @property
    def lost(self) -> bool:
        """The session is gone (a restart, a cut round trip): the next statement makes a new one."""
        return bool(self._raw.broken or self._raw.closed)

    def reconnect(self) -> None:
        """Make a new session in place of a lost one (everything holding this Connection keeps it); raises
        DatabaseUnavailable while the database cannot be reached."""
        self._pipe = self._pipe_cm = None
        self.at_commit = []
        was_lost = self.lost
        if was_lost:
            _LOSSES[0] += 1
        old, self._raw = self._raw, self._open()
        self._made_after = _LOSSES[0]
        self.losses += was_lost
        try:
            old.close()
        except Exception:       # a broken session's close has nothing to say
            pass
        log.info("reconnected to %s", self.url)

    def ensure(self) -> None:
        """Before a statement: a lost session of a run's connection is made again, outside a transaction (in
        one, the transaction went with the session: its caller rolls back). An idle session with something to
        read was ended by the server (a shutdown's last message, or the end of the stream): read it first, so
        that a restart costs no statement that was bound to fail."""
        if self.link is None:
            return
        if self._pipe is None and not self.lost and _readable(self._raw.fileno()):
            try:
                self._raw.pgconn.consume_input()
            except Exception:       # psycopg.OperationalError: the session is gone (`lost` says so now)
                pass
        if self._pipe is None and self._made_after < _LOSSES[0]:
            self.reconnect()        # another session of this process was lost: this one likely went with it
        elif self.lost:
            if self._pipe is not None:
                raise DatabaseUnavailable("the connection was lost during the transaction")
            self.reconnect()

    def cut_if_silent(self, now: float) -> None:
        """The watchdog's check: shut the socket of a round trip unanswered past the link's bound."""
        since, link = self._busy_since, self.link
        if since is None or link is None or now - since < link.bound_s:
            return
        self._busy_since = None
        log.warning("%s: no answer for %.0f s; the connection counts as lost", self.url, now - since)
        try:
            with socket.socket(fileno=os.dup(self._raw.fileno())) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except (OSError, ValueError, Exception):     # already closed: nothing to cut
            pass

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
        self.ensure()
        self._busy_since = time.monotonic()
        try:
            cur = self._raw.cursor()
            (cur.executemany if many else cur.execute)(sql, params)
        except psycopg.Error as e:
            raise self.error(e) from e
        finally:
            self._busy_since = None
        return Cursor(self, cur)

    def settle(self) -> None:
        """Wait for the answers of the statements sent in the pipeline so far (their errors raised here)."""
        import psycopg
        if self._pipe is not None:
            self._busy_since = time.monotonic()
            try:
                self._pipe.sync()
            except psycopg.Error as e:
                raise self.error(e) from e
            finally:
                self._busy_since = None

    def _leave_pipeline(self) -> None:
        """Settle and leave the pipeline; the transaction goes on without it (COPY, a named cursor)."""
        if self._pipe is not None:
            cm, self._pipe = self._pipe_cm, None
            self._busy_since = time.monotonic()
            try:
                cm.__exit__(None, None, None)
            except Exception as e:
                import psycopg
                if isinstance(e, psycopg.Error):
                    raise self.error(e) from e
                raise
            finally:
                self._busy_since = None
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
            raise self.error(e) from e

    def begin(self, shared: bool = False) -> None:
        """BEGIN; unless `shared`, wait for the write lock first (SQLite's BEGIN IMMEDIATE). The transaction
        runs in a pipeline (`_send`): BEGIN goes with its first statement, COMMIT with its last."""
        self.ensure()
        self._pipe_cm = self._raw.pipeline()
        self._pipe = self._pipe_cm.__enter__()
        try:
            self.raw("BEGIN")
            if not shared:
                self.raw("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        except DatabaseError:
            self.rollback()     # no transaction to leave behind: the caller's `with` never began
            raise

    # --- the session ---------------------------------------------------------------------------

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus
        return self._pipe is not None or self._raw.info.transaction_status != TransactionStatus.IDLE

    def commit(self) -> None:
        if self.in_transaction:
            held, self.at_commit = self.at_commit, []
            try:
                for sql, params in held:
                    self.execute(sql, params)
                self.raw("COMMIT")
                self._leave_pipeline()
            except DatabaseError:
                self.rollback()     # a COMMIT refused (a timeout, a conflict) leaves the session usable
                raise

    def rollback(self) -> None:
        """Undo the transaction; an error still waiting in the pipeline is the reason, not news."""
        import psycopg
        self.at_commit = []
        if self._pipe is not None:
            cm, self._pipe = self._pipe_cm, None
            try:
                cm.__exit__(None, None, None)
            except (psycopg.Error, OSError):
                if self._raw.pgconn.pipeline_status:    # a pipeline that cannot be left: the session is done
                    self._raw.close()                   # (ending it rolls back; a run's is made again)
        if self.lost:           # the transaction went with the session
            return
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
        """Seconds since the epoch on the database's clock: this machine's monotonic clock plus its measured
        offset to `clock_timestamp()` (taken again every CLOCK_RESYNC_S), so machines whose clocks or time
        zones differ agree, and a step of this machine's wall clock changes nothing, at one round trip every
        few seconds."""
        mono = time.monotonic()
        if mono - self._synced >= CLOCK_RESYNC_S:
            before = time.monotonic()
            db_now = self.raw("SELECT extract(epoch FROM clock_timestamp())::float8").one()[0]
            after = time.monotonic()
            self._offset, self._synced = db_now - (before + after) / 2, after
        return time.monotonic() + self._offset

    def skew(self) -> float:
        """How far this machine's wall clock is ahead of the database's, in seconds (`status` shows it)."""
        before = time.time()
        db_now = self.raw("SELECT extract(epoch FROM clock_timestamp())::float8").one()[0]
        return (before + time.time()) / 2 - db_now


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
