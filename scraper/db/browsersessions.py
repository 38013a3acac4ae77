"""The `browser_sessions` table (migrations 28, 29): one row per remote browser session a worker opened, kept as
it goes (placed for a page of a domain, opened, a page started, a page done or failed, closed) for `status`, for
the picker of sessions (`pool/browserslot`: the run's sessions, what each renders) and for the next start,
which closes (and has released) the sessions of workers that died.

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
        self.attached = False       # the row is a session opened, not only one reserved for a page

    def _write(self, sql: str, params: tuple[Any, ...]) -> Any:
        try:
            return self.conn.execute(same(sql), params)
        except DiskFull:
            raise       # the job cannot be written either: the worker hands it back and stops
        except DatabaseError as e:
            log.warning("browser session figures not written: %s", e)
            return None

    def reserve(self, provider: str, endpoint: str, domain: str) -> None:
        """A session about to be opened for a page of `domain`: its row counts among the run's sessions (busy
        with that domain) from the decision on, so a worker deciding meanwhile sees it."""
        found = self._write("INSERT INTO browser_sessions (run_id, worker, host, pid, provider, endpoint, opened_at, "
                            "active, domain) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?) RETURNING id",
                            (self.run_id, self.worker, self.host, self.pid, provider, endpoint, self.clock(), domain))
        self.row, self.attached = (None if found is None else int(found.one()[0])), False

    def unreserve(self) -> None:
        """The reserved session was never opened (refused, handed back): its row goes, it was no session."""
        if self.row is not None and not self.attached:
            self._write("DELETE FROM browser_sessions WHERE id = ?", (self.row,))
            self.row = None

    def placed(self, domain: str) -> None:
        """A page of `domain` is placed on the session: busy with it until the page ends (`paged`, `idle`)."""
        if self.row is not None:
            self._write("UPDATE browser_sessions SET active = 1, domain = ? WHERE id = ?", (domain, self.row))

    def idle(self) -> None:
        """The page placed on the session never began (its job ended otherwise): not busy any more."""
        if self.row is not None:
            self._write("UPDATE browser_sessions SET active = 0 WHERE id = ?", (self.row,))

    def run_sessions(self) -> list[Row]:
        """The open sessions of the recorder's run, each worker's (none without a run): id, host, pid, pages,
        active, domain."""
        if self.run_id is None:
            return []
        found = self._write("SELECT id, host, pid, pages, active, domain FROM browser_sessions "
                            "WHERE run_id = ? AND closed_at IS NULL ORDER BY id", (self.run_id,))
        return [] if found is None else found.fetchall()

    def opened(self, provider: str, endpoint: str, provider_session: str | None) -> None:
        """A session opens (`endpoint` as shown; `provider_session` the provider's id, or None): the row reserved
        for it, or a new one."""
        if self.row is not None and not self.attached:
            self._write("UPDATE browser_sessions SET provider_session = ?, opened_at = ? WHERE id = ?",
                        (provider_session, self.clock(), self.row))
            self.attached = True
            return
        found = self._write("INSERT INTO browser_sessions (run_id, worker, host, pid, provider, endpoint, "
                            "provider_session, opened_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                            (self.run_id, self.worker, self.host, self.pid, provider, endpoint, provider_session,
                             self.clock()))
        self.row, self.attached = (None if found is None else int(found.one()[0])), True

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
