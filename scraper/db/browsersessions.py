"""The `browser_sessions` table (migration 28): one row per remote browser session a worker opened, kept as
it goes (opened, a page started, a page done or failed, closed) for `status` and for the next start, which
closes (and has released) the sessions of workers that died.

`Recorder` is what a worker's browser (`net/browser.BrowserFetcher`, its `SessionLog`) writes through: one
short autocommit statement per event, on the worker's own connection, outside any job's transaction. A
failure to write is logged and forgotten, as the request log's: the figures must never cost a page."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from scraper.base.errors import DatabaseError, DiskFull
from scraper.db.backend import Conn, Row
from scraper.db.dialect import same

log = logging.getLogger(__name__)

ERRORS = ("crash", "disconnect", "protocol")     # a session's own faults, never the site's 4xx/5xx


class Recorder:
    """The rows of one worker's sessions, one at a time (a worker holds one session at most)."""

    def __init__(self, conn: Conn, run_id: int | None, worker: str, host: str | None, pid: int,
                 clock: Callable[[], float]) -> None:
        self.conn, self.run_id, self.worker, self.host, self.pid, self.clock = conn, run_id, worker, host, pid, clock
        self.row: int | None = None

    def _write(self, sql: str, params: tuple[Any, ...]) -> Any:
        try:
            return self.conn.execute(same(sql), params)
        except DiskFull:
            raise       # the job cannot be written either: the worker hands it back and stops
        except DatabaseError as e:
            log.warning("browser session figures not written: %s", e)
            return None

    def opened(self, provider: str, endpoint: str, provider_session: str | None) -> None:
        """A session opens (`endpoint` as shown; `provider_session` the provider's id, or None)."""
        found = self._write("INSERT INTO browser_sessions (run_id, worker, host, pid, provider, endpoint, "
                            "provider_session, opened_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                            (self.run_id, self.worker, self.host, self.pid, provider, endpoint, provider_session,
                             self.clock()))
        self.row = None if found is None else int(found.one()[0])

    def page_started(self) -> None:
        if self.row is not None:
            self._write("UPDATE browser_sessions SET active = 1 WHERE id = ?", (self.row,))

    def paged(self, rendered: bool, failure: str | None = None) -> None:
        """A page ended: `rendered` (it counts among the pages), or not, lost to the session's own `failure`
        (one of ERRORS) or to the site (nothing counted)."""
        if self.row is None:
            return
        column = f"errors_{failure}" if failure in ERRORS else None
        self._write("UPDATE browser_sessions SET active = 0, pages = pages + ?"
                    + (f", {column} = {column} + 1" if column else "") + " WHERE id = ?", (int(rendered), self.row))

    def closed(self) -> None:
        if self.row is not None:
            self._write("UPDATE browser_sessions SET active = 0, closed_at = ? WHERE id = ?", (self.clock(), self.row))
            self.row = None


def of_run(conn: Conn, run_id: int) -> list[Row]:
    """The sessions of `run_id`, in the order they opened (one indexed read: `status` is timed)."""
    return conn.execute(same("SELECT id, provider, endpoint, provider_session, worker, opened_at, closed_at, pages, "
                             "active, errors_crash, errors_disconnect, errors_protocol FROM browser_sessions "
                             "WHERE run_id = ? ORDER BY id"), (run_id,)).fetchall()


def left_open(conn: Conn) -> list[Row]:
    """The sessions still marked open (by the partial index), oldest first: id, run_id, host, pid, provider,
    provider_session."""
    return conn.execute(same("SELECT id, run_id, host, pid, provider, provider_session FROM browser_sessions "
                             "WHERE closed_at IS NULL ORDER BY opened_at")).fetchall()


def close(conn: Conn, session_row: int, now: float) -> None:
    """Mark a session closed (a dead worker's, once its provider was told)."""
    conn.execute(same("UPDATE browser_sessions SET active = 0, closed_at = ? WHERE id = ? AND closed_at IS NULL"),
                 (now, session_row))
