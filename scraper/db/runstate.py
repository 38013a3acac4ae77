"""Is a run working on this database? On SQLite the run lock says whether anyone holds it and the `runs`
row says who and since when; on PostgreSQL many runs share the database and each `runs` row's heartbeat
says whether its run is alive."""

from __future__ import annotations

import fcntl
import os
import socket
import time
from typing import TYPE_CHECKING, Any, Literal

from scraper.base.errors import ConfigError, DatabaseError, RunLocked
from scraper.base.urls import is_db_url
from scraper.db import runrecord, schema, sqlite
from scraper.db.backend import Conn

if TYPE_CHECKING:
    from scraper.db import pg

LOCK_TRIES = 3
LOCK_RETRY_S = 0.05


class RunLock:
    """An exclusive flock beside the database: held for the whole run, freed by the kernel on any death.

    Workers inherit it, so a new run cannot start while orphaned workers of a killed one still run."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> RunLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        for attempt in range(LOCK_TRIES):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                # `status` probes the lock for an instant: only a holder that stays is another run
                if attempt == LOCK_TRIES - 1:
                    os.close(fd)
                    raise RunLocked(
                        f"another `scraper run` is already working on this database (lock {self.path})."
                    ) from None
                time.sleep(LOCK_RETRY_S)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def lock_held(lock_path: str) -> bool:
    """True while some process holds the run lock (a run, or the orphaned workers of a killed one).

    The probe takes a shared lock for an instant; `RunLock.acquire` tries again briefly, so a run
    starting at that very moment is not turned away."""
    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def runs(conn: Conn, lock_path: str, now: float) -> list[dict[str, Any]]:
    """Every live run: [{host, pid, started_at, workers, heartbeat_at, memory_mb, memory_limit_mb}] (its pool's
    memory as its supervisor last wrote it with its heartbeat, and its ceiling), newest first."""
    from scraper.db import store
    if not store.is_postgres(conn) and not lock_held(lock_path):
        return []
    rows = runrecord.live_runs(conn, now)
    if not store.is_postgres(conn):
        rows = rows[:1]      # one run at a time holds a SQLite file
    return [{"host": r["host"], "pid": r["pid"], "started_at": r["started_at"], "workers": r["workers"],
             "heartbeat_at": r["heartbeat_at"],
             "memory_mb": None if r["memory_mb"] is None else round(r["memory_mb"], 1),
             "memory_limit_mb": r["memory_limit_mb"]} for r in rows]


def current(conn: Conn, lock_path: str, now: float | None = None) -> dict[str, Any] | None:
    """{pid, started_at, alive} of the run that holds the database, or None when none does.

    `alive` is False when the lock is held but the run's supervisor is gone (it was killed and its
    workers are finishing their last jobs). On PostgreSQL: the newest run whose heartbeat is alive."""
    from scraper.db import store
    if store.is_postgres(conn):
        live = runs(conn, lock_path, store.clock(conn) if now is None else now)
        return None if not live else {"pid": live[0]["pid"], "started_at": live[0]["started_at"], "alive": True,
                                      "host": live[0]["host"]}
    if not lock_held(lock_path):
        return None
    row = runrecord.last_unfinished(conn)
    if row is None:          # the run has the lock but has not written its row yet
        return {"pid": None, "started_at": None, "alive": True}
    return {"pid": row["pid"], "started_at": row["started_at"], "alive": _running(row["pid"])}


def _running(pid: int) -> bool:
    import psutil  # only when a run holds the lock: `status` on an idle database does without it

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class walk_lock:
    """`with walk_lock(path, name) as mine:` one walk of a source at a time on a PostgreSQL database (many
    machines may start one): `mine` is False when another holds it. On SQLite always True (a walk's
    changes are one transaction there, and one machine runs the cron line)."""

    def __init__(self, path: str, name: str) -> None:
        self.path, self.name = path, name
        self.conn: pg.Connection | None = None

    def __enter__(self) -> bool:
        if not is_db_url(self.path):
            return True
        from scraper.db import store
        self.conn = store.open_postgres(self.path)
        got = self.conn.raw("SELECT pg_try_advisory_lock(hashtext(%s))", ("walk:" + self.name,)).one()[0]
        return bool(got)

    def __exit__(self, *exc: object) -> Literal[False]:
        if self.conn is not None:
            self.conn.close()    # a session lock: freed with its session
        return False


def host() -> str:
    return socket.gethostname()


def exists(path: str) -> bool:
    """A database is there: the SQLite file, or a PostgreSQL database with the schema (ConfigError, one
    sentence, when the URL cannot be opened)."""
    import os
    if not is_db_url(path):
        return os.path.exists(path)
    from scraper.db import store
    conn = store.postgres(path)
    try:
        from scraper.db import pg
        return pg.schema_version(conn) > 0
    finally:
        conn.close()


def check_readable(path: str) -> None:
    """Read the schema through a read-only connection: a damaged file is refused (ConfigError) before
    anything runs."""
    if is_db_url(path):
        return
    try:
        conn = sqlite.connect(f"file:{path}?mode=ro", uri=True)
        try:
            schema.readable(conn)
        finally:
            conn.close()
    except DatabaseError as e:
        raise ConfigError(f"{path} is not a usable SQLite database ({e}).") from e
