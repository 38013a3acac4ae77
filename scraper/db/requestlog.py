"""The compact request log behind `scraper report`: one `requests` row per HTTP request a worker sends
(its own, and those a site's library sends, such as youtube-transcript-api's).

One INSERT in autocommit mode per request (tens of microseconds under WAL; a run sends a few requests
a second), written after the answer, so it never sits between a rate slot and its request. A failure
to write it is logged and forgotten: the log must never cost a job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from types import TracebackType
from typing import Literal

from scraper.base.errors import DatabaseError, DiskFull, FetchError
from scraper.db.backend import Conn
from scraper.db.dialect import same

log = logging.getLogger(__name__)

OK = "ok"            # the kind of a 2xx answer; failures keep their retry kind (http_5xx, timeout, ...)
NO_ROBOTS = "robots_4xx"    # a robots.txt answered 4xx: no rules (RFC 9309), an answer and not an error


def record(conn: Conn, at: float, domain: str, kind: str, status: int | None, ms: int, run_id: int | None = None,
           slot_wait_s: float = 0.0) -> bool:
    """Append one row (`run_id`: the run that sent it; `slot_wait_s`: the wait for its rate slot before it
    was sent); False (and a warning) when the database would not take it."""
    try:
        conn.execute(same("INSERT INTO requests (at, domain, kind, status, ms, run_id, slot_wait_ms) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?)"),
                     (at, domain, kind, status, ms, run_id, int(slot_wait_s * 1000)))
        return True
    except DiskFull:
        raise       # the job cannot be written either: the worker hands it back and stops
    except DatabaseError as e:
        log.warning("request log not written: %s", e)
        return False


class timed:
    """`with requestlog.timed(conn, domain):` around one request: records how it ended and how long it
    took (a FetchError's kind and status), then lets any exception go on."""

    def __init__(self, conn: Conn, domain: str, clock: Callable[[], float] = time.time, run_id: int | None = None,
                 slot_wait_s: float = 0.0, answered_4xx: bool = False) -> None:
        self.conn, self.domain, self.clock = conn, domain, clock
        self.run_id, self.slot_wait_s = run_id, slot_wait_s
        self.answered_4xx = answered_4xx        # a robots.txt: its 4xx is logged as NO_ROBOTS

    def __enter__(self) -> timed:
        self.started = time.monotonic()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        ms = int((time.monotonic() - self.started) * 1000)
        if exc is None:
            kind, status = OK, None
        elif isinstance(exc, FetchError):
            kind, status = exc.kind, exc.status
            if self.answered_4xx and status is not None and 400 <= status < 500 and status != 429:
                kind = NO_ROBOTS
        else:
            return False        # not an answer (e.g. KeyboardInterrupt): nothing to log
        record(self.conn, self.clock(), self.domain, kind, status, ms, self.run_id, self.slot_wait_s)
        return False


def slot_waits(conn: Conn, since: float) -> dict[str, float]:
    """{domain: seconds its workers waited for its rate slot before the requests sent since `since`}."""
    return {d: ms / 1000.0 for d, ms in conn.execute(
        same("SELECT domain, SUM(slot_wait_ms) FROM requests WHERE at >= ? GROUP BY domain"), (since,))}


def sent_since(conn: Conn, since: float) -> dict[str, int]:
    """{domain: requests sent since `since`} (the dashboard's rate per domain over the status's window)."""
    rows = conn.execute(same("SELECT domain, COUNT(*) FROM requests WHERE at >= ? GROUP BY domain"), (since,))
    return {r[0]: r[1] for r in rows}
