"""The database seam: what the pool and the mirror ask of a backend. `scraper.db.store` (connections,
schema), `scraper.db.runrecord` (the runs rows) and `scraper.db.queue.Queue` (the jobs) implement it for both
backends: `--db PATH` is SQLite (`scraper.db.sqlite`), `--db postgresql://...` PostgreSQL (`scraper.db.pg`,
which translates the statements not yet written in its own dialect). Both connections follow `Conn`, give rows
that follow `Row` and raise `scraper.base.errors.DatabaseError` and its kinds. Only where the two differ in
meaning is there a PostgreSQL path (`store.is_postgres`, which tells mypy the connection is `pg.Connection`
there): the claim's SKIP LOCKED, the clock, the rate slot (`db.slots`), the runs rows and heartbeats, search.

mypy checks these protocols strictly, and that the SQLite modules conform (see the bottom of
`scraper.db.queue`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from scraper.db.dialect import Sql


class Row(Protocol):
    """A row of a result: by position (`row[0]`) and by column name (`row["id"]`); sqlite3.Row on SQLite,
    `db.pg.Row` on PostgreSQL. Its values are what the column holds (int, float, str, bytes or None)."""

    def __getitem__(self, key: int | str, /) -> Any: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __len__(self) -> int: ...
    def keys(self) -> list[str]: ...


class Cursor(Protocol):
    """What a statement gave: its rows, and how many rows it changed."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Row | None: ...
    # the row a statement always gives (an aggregate, an INSERT's RETURNING); none is a DatabaseError
    def one(self) -> Row: ...
    def fetchall(self) -> list[Row]: ...
    def fetchmany(self, size: int = 1, /) -> list[Row]: ...
    def __iter__(self) -> Iterator[Row]: ...


Params = Sequence[Any] | Mapping[str, Any]    # `?` placeholders by position, or `:name` ones by name


class Conn(Protocol):
    """A connection as db/ uses it: statements, explicit transactions (autocommit otherwise), close.
    What only one backend has (PostgreSQL's `raw`, `copy`, `stream`, `clock`) is reached after
    `store.is_postgres(conn)`."""

    @property
    def is_postgres(self) -> bool: ...
    # `sql`: both dialects' spellings (`dialect.Sql`), or SQLite's only (PostgreSQL translates it)
    def execute(self, sql: str | Sql, params: Params = (), /) -> Cursor: ...
    def executemany(self, sql: str | Sql, seq: Iterable[Sequence[Any]], /) -> Cursor: ...
    # BEGIN; on SQLite IMMEDIATE (the write lock at once); on PostgreSQL the advisory write lock unless `shared`
    def begin(self, shared: bool = False) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def close(self) -> None: ...


Writer = Callable[[Conn], object]   # `write(conn)`: a result written in the transaction that ends a job


@dataclasses.dataclass(frozen=True)
class Job:
    """A claimed job, as a worker holds it (the same on both backends)."""

    id: int
    key: str
    site: str
    url: str
    domain: str
    attempts: int           # including the current one
    probe: bool = False     # this job tests a half-open domain
    source: str = "n8n"     # the source (sources file) whose walk or job found it


JobRef = Job


class JobQueue(Protocol):
    """Every change of a job's state, each one short transaction; ownership checked by worker name."""

    # a row is (key, site, url, domain) or (key, site, url, domain, source); without it the source is n8n
    def seed(self, rows: Iterable[tuple[str, ...]], now: float | None = None) -> tuple[int, int]: ...
    # `sources`: levels of source names, first level first (claims prefer the first level with a job)
    def claim(self, worker: str, now: float, lease_s: float, sites: Sequence[str] | None = None,
              demands: dict[str, Any] | None = None, workers: int = 1,
              sources: Sequence[Sequence[str]] | None = None, skip_keys: Sequence[str] = ()) -> JobRef | None: ...
    def heartbeat(self, job: JobRef, worker: str, now: float, lease_s: float) -> bool: ...
    def complete(self, job: JobRef, worker: str, now: float, duration_ms: int, write: Writer | None = None,
                 http_status: int = 200) -> bool: ...
    def fail(self, job: JobRef, worker: str, now: float, status: str, kind: str, message: str,
             http_status: int | None = None, available_at: float | None = None, duration_ms: int | None = None,
             counted: bool = True, write: Writer | None = None) -> bool: ...
    def release(self, job: JobRef, worker: str, now: float) -> bool: ...
    # (taken back to pending, ended failed)
    def abandon(self, now: float, workers: Sequence[str], max_attempts: int) -> tuple[int, int]: ...
    def requeue(self, now: float, workers: Sequence[str] | None = None, expired: bool = False) -> int: ...
    def retry(self, statuses: Sequence[str], now: float | None = None) -> int: ...
    def update_domain(self, domain: str, change: Callable[[Any], Any], now: float) -> Any: ...
    def work_left(self, sites: Sequence[str] | None = None, sources: Sequence[str] | None = None) -> bool: ...
    def counts(self) -> dict[str, int]: ...


class Store(Protocol):
    """Connections, the schema, transactions (a module implements it: `db.store`)."""

    def open_db(self, path: str) -> Conn: ...
    def migrate(self, conn: Conn) -> int: ...
    def transaction(self, conn: Conn) -> AbstractContextManager[Conn]: ...
    def upsert(self, conn: Conn, table: str, row: dict[str, Any], pk: str) -> None: ...


class Runs(Protocol):
    """The `runs` rows (a module implements it: `db.runrecord`, their one owner)."""

    def start_run(self, conn: Conn, pid: int, started_at: float, workers: int, settings_json: str) -> int: ...
    def finish_run(self, conn: Conn, run_id: int, finished_at: float, counts: dict[str, int],
                   exit_code: int) -> None: ...
    def last_run(self, conn: Conn) -> Row | None: ...
