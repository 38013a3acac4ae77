"""What the report and `scraper failures` read of the runs' own record (the `runs` rows themselves are
`db/runrecord`'s): each run's `requests` log and `run_jobs`, and the jobs that ended failed or invalid. One
spelling serves both backends (a count of a condition through `db/jsonsql.count_if`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scraper.db import jsonsql
from scraper.db.backend import Conn, Row
from scraper.db.dialect import same


def last_trace(conn: Conn, run_id: int) -> float | None:
    """The time of a run's last request or finished job (where a run that died ends), or None."""
    return conn.execute(same("SELECT MAX(at) FROM (SELECT at FROM requests WHERE run_id = ? "
                             "UNION ALL SELECT at FROM run_jobs WHERE run_id = ?) AS traces"),
                        (run_id, run_id)).one()[0]


def request_counts(conn: Conn, run_id: int, answered: Sequence[str]) -> tuple[int, int, int]:
    """(requests, answered (a kind in `answered`), http_429) of one run."""
    marks = ", ".join(f"'{k}'" for k in answered)
    row = conn.execute(same(f"""SELECT COUNT(*), {jsonsql.count_if(f"kind IN ({marks})")},
                           {jsonsql.count_if("kind = 'http_429'")} FROM requests WHERE run_id = ?"""),
                       (run_id,)).one()
    return row[0], row[1] or 0, row[2] or 0


def latencies_ms(conn: Conn, run_id: int) -> list[Any]:
    """Every request's latency of one run, ascending."""
    return [m for (m,) in conn.execute(same("SELECT ms FROM requests WHERE run_id = ? ORDER BY ms"), (run_id,))]


def done_at(conn: Conn, run_id: int) -> list[float]:
    """When each job the run finished as done ended."""
    return [t for (t,) in conn.execute(same("SELECT at FROM run_jobs WHERE run_id = ? AND status = 'done'"), (run_id,))]


def requests(conn: Conn, run_id: int) -> list[Row]:
    """(at, domain, kind, ms) of every request of one run."""
    return conn.execute(same("SELECT at, domain, kind, ms FROM requests WHERE run_id = ?"), (run_id,)).fetchall()


FAILURE_FIELDS = ("key", "status", "error_kind", "last_error", "attempts", "http_status")


def failures(conn: Conn, limit: int | None = None) -> list[Row]:
    """The jobs that ended failed or invalid, newest end first: FAILURE_FIELDS and finished_at."""
    sql = (f"SELECT {', '.join(FAILURE_FIELDS)}, finished_at FROM jobs WHERE status IN ('failed', 'invalid') "
           "ORDER BY finished_at DESC, id DESC")
    if limit is None:
        return conn.execute(same(sql)).fetchall()
    return conn.execute(same(sql + " LIMIT ?"), (limit,)).fetchall()
