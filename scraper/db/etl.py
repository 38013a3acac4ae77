"""What the ETL API delivery keeps and reads (mirror/etl.py): which ETL run each run's work on a source reports
to (`etl_runs`), the items of a run, and its counts. A run's item is one of its source's jobs (its key is the
item's id); an ETL run may gather several runs (one continued after a kill), so counts take each job's last
outcome among them."""

from __future__ import annotations

from typing import Any

from scraper.db.backend import Conn
from scraper.db.dialect import same
from scraper.db.store import transaction

_MAPPED = "SELECT run_id FROM etl_runs WHERE etl_id = ? AND source = ?"


def mapped(conn: Conn, run_id: int, source: str) -> str | None:
    """The ETL run that run `run_id`'s work on `source` reports to, or None."""
    row = conn.execute(same("SELECT etl_id FROM etl_runs WHERE run_id = ? AND source = ?"), (run_id, source)).fetchone()
    return None if row is None else str(row[0])


def remember(conn: Conn, run_id: int, source: str, etl_id: str) -> None:
    with transaction(conn) as c:
        c.execute(same("INSERT INTO etl_runs (run_id, source, etl_id) VALUES (?, ?, ?) ON CONFLICT (run_id, source) "
                       "DO NOTHING"), (run_id, source, etl_id))


def items(conn: Conn, run_id: int, source: str) -> list[dict[str, Any]]:
    """The items a run's work on `source` covers: the source's jobs pending or running, and those the run
    already ended ({id, url}, by job id)."""
    rows = conn.execute(
        same("SELECT key, url FROM jobs WHERE source = ? AND (status IN ('pending', 'running') OR id IN "
             "(SELECT job_id FROM run_jobs WHERE run_id = ?)) ORDER BY id"), (source, run_id)).fetchall()
    return [{"id": r[0], "url": r[1]} for r in rows]


def done_since(conn: Conn, etl_id: str, source: str, since: float) -> tuple[list[dict[str, Any]], float]:
    """(the jobs of `source` the runs of ETL run `etl_id` ended done after run_jobs.at `since`, as item
    updates {id, url, status}; the newest `at` among them, or `since`)."""
    rows = conn.execute(
        same(f"SELECT j.key, j.url, MAX(rj.at) FROM run_jobs AS rj JOIN jobs AS j ON j.id = rj.job_id "
             f"WHERE rj.run_id IN ({_MAPPED}) AND j.source = ? AND rj.status = 'done' AND rj.at > ? "
             f"GROUP BY j.id, j.key, j.url ORDER BY j.id"), (etl_id, source, source, since)).fetchall()
    return ([{"id": r[0], "url": r[1], "status": "done"} for r in rows], max([since, *(r[2] for r in rows)]))


def done_at(conn: Conn, etl_id: str, source: str) -> float:
    """How far the done items of ETL run `etl_id` went (run_jobs.at)."""
    row = conn.execute(same("SELECT MAX(done_at) FROM etl_runs WHERE etl_id = ? AND source = ?"),
                       (etl_id, source)).one()
    return float(row[0] or 0.0)


def advance(conn: Conn, etl_id: str, source: str, at: float) -> None:
    with transaction(conn) as c:
        c.execute(same("UPDATE etl_runs SET done_at = ? WHERE etl_id = ? AND source = ? AND done_at < ?"),
                  (at, etl_id, source, at))


def counts(conn: Conn, etl_id: str, source: str) -> dict[str, int]:
    """{total, finished, failed, invalid} of ETL run `etl_id`: each job's last outcome among its runs, and
    the source's jobs still pending or running (so finished + failed + invalid = total once none is left)."""
    out = {"finished": 0, "failed": 0, "invalid": 0}
    for status, n in conn.execute(
            same(f"SELECT rj.status, COUNT(*) FROM run_jobs AS rj JOIN jobs AS j ON j.id = rj.job_id "
                 f"WHERE rj.run_id IN ({_MAPPED}) AND j.source = ? AND rj.at = (SELECT MAX(r2.at) FROM run_jobs AS r2 "
                 f"WHERE r2.job_id = rj.job_id AND r2.run_id IN ({_MAPPED})) GROUP BY rj.status"),
            (etl_id, source, source, etl_id, source)):
        out["finished" if status == "done" else status] += n
    left = conn.execute(same("SELECT COUNT(*) FROM jobs WHERE source = ? AND status IN ('pending', 'running')"),
                        (source,)).one()[0]
    return {"total": sum(out.values()) + int(left), **out}

