"""The SQLite connection: sqlite3's own, rows by position and by name (sqlite3.Row), and the project's
exceptions (`scraper.base.errors`) in place of sqlite3's, so callers catch the same classes on both
backends. A subclass, not a wrapper: every statement still runs in sqlite3's C code, the subclass adds one
Python call per statement (scripts/bench.py's queue figures do not move), and sqlite_utils takes it as is."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from scraper.base.errors import DatabaseError, DiskFull, IntegrityError, OperationalError
from scraper.db.backend import Row
from scraper.db.dialect import Sql

log = logging.getLogger(__name__)

# SQLite's primary result codes (sqlite3 names them from Python 3.11; the lowest byte of an extended code)
SQLITE_BUSY = 5
SQLITE_FULL = 13

if TYPE_CHECKING:
    from _typeshed import SupportsLenAndGetItem

    Params = SupportsLenAndGetItem[Any] | Mapping[str, Any]     # what sqlite3 takes


def error(e: sqlite3.Error) -> DatabaseError:
    """The project's exception for sqlite3's `e` (the message kept); a full disk is `DiskFull`."""
    if getattr(e, "sqlite_errorcode", 0) & 0xFF == SQLITE_FULL:
        return DiskFull(str(e))
    kind = (IntegrityError if isinstance(e, sqlite3.IntegrityError)
            else OperationalError if isinstance(e, sqlite3.OperationalError) else DatabaseError)
    return kind(str(e))


def connect(database: str, timeout_s: float = 5.0, uri: bool = False) -> Connection:
    """A connection in autocommit mode (transactions are explicit) whose rows are sqlite3.Row."""
    try:
        conn = sqlite3.connect(database, timeout=timeout_s, uri=uri, isolation_level=None, factory=Connection)
    except sqlite3.Error as e:
        raise error(e) from e
    conn.row_factory = sqlite3.Row
    return conn


class Cursor(sqlite3.Cursor):
    """sqlite3's cursor; a statement steps on as its rows are read, so reading raises the project's errors
    too (a statement interrupted by a time limit, a lock met on the way)."""

    def fetchone(self) -> Row | None:
        try:
            return super().fetchone()
        except sqlite3.Error as e:
            raise error(e) from e

    def one(self) -> Row:
        row = self.fetchone()
        if row is None:
            raise DatabaseError("the statement gave no row")
        return row

    def fetchall(self) -> list[Row]:
        try:
            return super().fetchall()
        except sqlite3.Error as e:
            raise error(e) from e

    def fetchmany(self, size: int | None = 1, /) -> list[Row]:
        try:
            return super().fetchmany(size)
        except sqlite3.Error as e:
            raise error(e) from e

    def __next__(self) -> Row:
        try:
            return super().__next__()
        except sqlite3.Error as e:
            raise error(e) from e


_execute = sqlite3.Connection.execute


class Connection(sqlite3.Connection):
    """A connection in autocommit mode (`isolation_level=None`): transactions are `begin`/`commit`."""

    is_postgres = False
    # a run's connection (`store.connect(lock_report_s=)`): its busy timeout; `begin` then waits for the write
    # lock as long as it takes, saying who holds it after each such wait (None: BUSY after the timeout)
    lock_report_s: float | None = None
    # called (with the seconds waited) each time `begin`'s wait for the lock runs out its busy timeout: the
    # supervisor, whose busy timeout is short, frees the lock from a frozen worker of its own meanwhile
    while_locked: Callable[[float], None] | None = None

    def execute(self, sql: str | Sql, params: Params = (), /) -> Cursor:
        cur = self.cursor(Cursor)
        try:
            cur.execute(sql.sqlite if isinstance(sql, Sql) else sql, params)
        except sqlite3.Error as e:
            raise error(e) from e
        return cur

    def executemany(self, sql: str | Sql, seq: Iterable[Params], /) -> Cursor:
        cur = self.cursor(Cursor)
        try:
            cur.executemany(sql if isinstance(sql, str) else sql.sqlite, seq)
        except sqlite3.Error as e:
            raise error(e) from e
        return cur

    def begin(self, shared: bool = False) -> None:
        """BEGIN IMMEDIATE: the write lock now, not at the first write (SQLite has one writer; `shared` is
        PostgreSQL's business). With `lock_report_s`, an outsider's lock (an analyst's `BEGIN EXCLUSIVE`) is
        waited out, however long: a job is never failed for it; the wait is said, with the holder, each time.
        sqlite3's own execute: no row is read, so no cursor of ours is needed (a claim and its completion are
        two transactions: every Python call here is paid twice a job)."""
        if self.lock_report_s is None:
            try:
                _execute(self, "BEGIN IMMEDIATE")
            except sqlite3.Error as e:
                raise error(e) from e
            return
        waited, report_at = 0.0, self.lock_report_s
        while True:
            started = time.monotonic()
            try:
                _execute(self, "BEGIN IMMEDIATE")
                break
            except sqlite3.Error as e:
                if getattr(e, "sqlite_errorcode", 0) & 0xFF != SQLITE_BUSY:
                    raise error(e) from e
            waited += time.monotonic() - started
            if self.while_locked is not None:
                self.while_locked(waited)
            if waited >= report_at:
                report_at += self.lock_report_s
                from scraper.db import holders, store
                database = store.path_of(self)
                log.warning("the database %s has been locked for %.1f s%s; waiting for it", database, waited,
                            holders.described(database, exclude={os.getpid()}))
        if waited:
            log.warning("the database's lock is free again after %.1f s; going on", waited)

    def commit(self) -> None:
        try:
            # through sqlite3's statement cache: its own commit() prepares "COMMIT" anew each time (~5 us a
            # transaction, two a job); as commit(), nothing to do outside a transaction
            if self.in_transaction:
                _execute(self, "COMMIT")
        except sqlite3.Error as e:
            raise error(e) from e

    def rollback(self) -> None:
        try:
            super().rollback()
        except sqlite3.Error as e:
            raise error(e) from e
