"""The run record: every statement on the `runs` rows (one per `scraper run`: started and finished by its
supervisor, its heartbeat, the live and the dead runs, the rows the report and `runs` read), and the run
record as an API (`scraper runs`): each run per source with its status and counts (how many jobs
in all, finished, failed and invalid), and the run events of the outbox (`run.started`, `run.progress`,
`run.finished`, one per source of the run, db/events.py).

A run's claims span its sources, so its counts per source come from its own record (`run_jobs`, joined to
each job's source); `total` adds the jobs of that source still pending or running (as the run ended, kept
in `run_sources`; now, for a run under way). So `finished + failed + invalid <= total` always holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from scraper.base import exitcodes
from scraper.db import events, jobcounts
from scraper.db.backend import Conn, Row
from scraper.db.dialect import same
from scraper.db.store import transaction

RUN_HEARTBEAT_S = 2.0       # a run's supervisor writes its heartbeat this often
RUN_DEAD_AFTER_S = 20.0     # a run whose heartbeat is older than this is dead (its leases expire on their own)
PROGRESS_EVENT_S = 10.0     # a run writes `run.progress` at most this often
PAGE = 100                  # runs rows read at a time while filtering
STATUSES = ("running", "succeeded", "failed", "gave_up", "stopped", "crashed", "died")
_BY_EXIT = {exitcodes.OK: "succeeded", exitcodes.FAILED: "failed", exitcodes.GAVE_UP: "gave_up",
            exitcodes.SIGINT: "stopped", exitcodes.SIGTERM: "stopped", exitcodes.CRASHING: "crashed"}
COUNTS = ("total", "finished", "failed", "invalid")
_COLUMNS = "id, pid, host, started_at, finished_at, exit_code, heartbeat_at, sources"


def status(exit_code: int | None, finished_at: float | None, heartbeat_at: float | None, now: float) -> str:
    """A run's status (one of STATUSES): by its exit code once finished; else running while its heartbeat
    is fresh, died after."""
    if finished_at is not None:
        return _BY_EXIT.get(exit_code, "failed") if exit_code is not None else "failed"
    return "running" if heartbeat_at is not None and heartbeat_at >= now - RUN_DEAD_AFTER_S else "died"


def own_counts(conn: Conn, run_id: int) -> dict[str, dict[str, int]]:
    """{source: {finished, failed, invalid}} of the jobs run `run_id` ended, by the job's source."""
    out: dict[str, dict[str, int]] = {}
    for source, st, n in conn.execute(
            same("SELECT j.source, rj.status, COUNT(*) FROM run_jobs AS rj JOIN jobs AS j ON j.id = rj.job_id "
                 "WHERE rj.run_id = ? GROUP BY j.source, rj.status"), (run_id,)):
        counts = out.setdefault(source, {"finished": 0, "failed": 0, "invalid": 0})
        counts["finished" if st == "done" else st] += n
    return out


def _left(conn: Conn) -> dict[str, int]:
    """{source: jobs pending or running}."""
    left: dict[str, int] = {}
    for _site, source, _domain, st, n in jobcounts.rows(conn):
        if st in ("pending", "running"):
            left[source] = left.get(source, 0) + n
    return left


def counted(conn: Conn, run_id: int, sources: Sequence[str]) -> dict[str, dict[str, int]]:
    """{source: {total, finished, failed, invalid}} of a run as it stands, for `sources` and every source
    it ended a job of."""
    own, left = own_counts(conn, run_id), _left(conn)
    out = {}
    for source in dict.fromkeys([*sources, *own]):
        c = own.get(source, {"finished": 0, "failed": 0, "invalid": 0})
        out[source] = {"total": sum(c.values()) + left.get(source, 0), **c}
    return out


def _sources_of(row: Row) -> list[str]:
    try:
        names = json.loads(row["sources"]) if row["sources"] else []
    except ValueError:
        names = []
    return [n for n in names if isinstance(n, str)]


# --- the runs rows -------------------------------------------------------------------------------

def start_run(conn: Conn, pid: int, started_at: float, workers: int, settings_json: str,
              host: str | None = None, sources: Sequence[str] = ()) -> int:
    """Record a run that starts (its machine, its first heartbeat, the sources it works and their
    `run.started` events); returns its id."""
    with transaction(conn) as c:
        run_id = int(c.execute(
            same("INSERT INTO runs (pid, started_at, workers, settings, host, heartbeat_at) "
                 "VALUES (?, ?, ?, ?, ?, ?) RETURNING id"),
            (pid, started_at, workers, settings_json, host, started_at),
        ).one()[0])
        started(c, run_id, sources, started_at, host, pid, workers)
        return run_id


def finish_run(conn: Conn, run_id: int, finished_at: float, counts: dict[str, int], exit_code: int) -> None:
    """Record how the run ended: its exit code and the rows done, failed and invalid (`counts`) by then, its
    own counts per source and their `run.finished` events."""
    with transaction(conn) as c:
        c.execute(
            same("UPDATE runs SET finished_at = ?, done = ?, failed = ?, invalid = ?, exit_code = ? WHERE id = ?"),
            (finished_at, counts["done"], counts["failed"], counts["invalid"], exit_code, run_id),
        )
        finished(c, run_id, finished_at, exit_code)


def heartbeat_run(conn: Conn, run_id: int, now: float, memory_mb: float | None = None,
                  memory_limit_mb: float | None = None) -> None:
    """The run is alive at `now` (its supervisor says so every RUN_HEARTBEAT_S), its pool holding
    `memory_mb` (PSS, as last sampled; None: not yet, the last value kept) of `memory_limit_mb`."""
    with transaction(conn, shared=True) as c:     # on SQLite a transaction waits out an outsider's lock
        c.execute(same("UPDATE runs SET heartbeat_at = ?, memory_mb = COALESCE(?, memory_mb), "
                       "memory_limit_mb = COALESCE(?, memory_limit_mb) WHERE id = ?"),
                  (now, memory_mb, memory_limit_mb, run_id))


def last_run(conn: Conn) -> Row | None:
    """The newest row of `runs` (pid, started_at, finished_at), or None before the first run."""
    return conn.execute(same("SELECT pid, started_at, finished_at FROM runs ORDER BY id DESC LIMIT 1")).fetchone()


def last_unfinished(conn: Conn) -> Row | None:
    """(pid, started_at) of the newest run not finished, or None."""
    return conn.execute(
        same("SELECT pid, started_at FROM runs WHERE finished_at IS NULL ORDER BY id DESC LIMIT 1")).fetchone()


def latest_id(conn: Conn) -> int | None:
    """The id of the newest run (live or finished), or None before the first."""
    return conn.execute(same("SELECT MAX(id) FROM runs")).one()[0]


def live_runs(conn: Conn, now: float) -> list[Row]:
    """Unfinished runs whose heartbeat is younger than RUN_DEAD_AFTER_S, newest first."""
    return conn.execute(
        same("SELECT id, host, pid, started_at, workers, heartbeat_at, memory_mb, memory_limit_mb FROM runs "
             "WHERE finished_at IS NULL AND heartbeat_at >= ? ORDER BY id DESC"), (now - RUN_DEAD_AFTER_S,)
    ).fetchall()


def dead_runs(conn: Conn, now: float) -> list[Row]:
    """Unfinished runs whose heartbeat stopped (killed, or their machine is gone)."""
    return conn.execute(
        same("SELECT id, host, pid, started_at, workers, heartbeat_at FROM runs "
             "WHERE finished_at IS NULL AND (heartbeat_at IS NULL OR heartbeat_at < ?) ORDER BY id"),
        (now - RUN_DEAD_AFTER_S,),
    ).fetchall()


def every(conn: Conn) -> list[Row]:
    """Every `runs` row, oldest first: id, pid, started_at, finished_at, workers, settings, done, failed,
    invalid, exit_code, heartbeat_at (the report)."""
    return conn.execute(same("SELECT id, pid, started_at, finished_at, workers, settings, done, failed, invalid, "
                             "exit_code, heartbeat_at FROM runs ORDER BY id")).fetchall()


# --- writing: in the transaction of the runs row ----------------------------------------------------

def started(c: Conn, run_id: int, sources: Sequence[str], at: float, host: str | None, pid: int,
            workers: int) -> None:
    """Note the run's sources and write its `run.started` events (inside the caller's transaction)."""
    c.execute(same("UPDATE runs SET sources = ? WHERE id = ?"), (json.dumps(list(sources)), run_id))
    for source in sources:
        events.append(c, "run.started", source, str(run_id),
                      {"run_id": run_id, "started_at": events.iso(at), "host": host, "pid": pid, "workers": workers},
                      events.iso(at), run_id)


def progress(c: Conn, run_id: int, at: float) -> None:
    """Write the run's `run.progress` events, its counts per source now (inside the caller's transaction)."""
    row = c.execute(same("SELECT sources FROM runs WHERE id = ?"), (run_id,)).fetchone()
    for source, counts in counted(c, run_id, [] if row is None else _sources_of(row)).items():
        events.append(c, "run.progress", source, str(run_id), {"run_id": run_id, **counts}, events.iso(at), run_id)


def finished(c: Conn, run_id: int, at: float, exit_code: int) -> None:
    """Keep the run's counts per source as it ended (`run_sources`) and write its `run.finished` events
    (inside the caller's transaction that finishes the runs row)."""
    row = c.execute(same(f"SELECT {_COLUMNS} FROM runs WHERE id = ?"), (run_id,)).one()
    st = status(exit_code, at, None, at)
    for source, counts in counted(c, run_id, _sources_of(row)).items():
        c.execute(same("INSERT INTO run_sources (run_id, source, total, finished, failed, invalid) "
                       "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, source) DO UPDATE SET total = excluded.total, "
                       "finished = excluded.finished, failed = excluded.failed, invalid = excluded.invalid"),
                  (run_id, source, *(counts[k] for k in COUNTS)))
        events.append(c, "run.finished", source, str(run_id),
                      {"run_id": run_id, "status": st, "exit_code": exit_code,
                       "started_at": events.iso(row["started_at"]), "finished_at": events.iso(at), **counts},
                      events.iso(at), run_id)


# --- reading --------------------------------------------------------------------------------------

def _per_source(conn: Conn, row: Row) -> dict[str, dict[str, int]]:
    """{source: counts} of one runs row: as kept when it ended, else as it stands (a run that died: what it
    ended only, nothing pending is its any more)."""
    kept = conn.execute(same("SELECT source, total, finished, failed, invalid FROM run_sources WHERE run_id = ?"),
                        (row["id"],)).fetchall()
    if kept:
        return {r["source"]: {k: r[k] for k in COUNTS} for r in kept}
    if row["finished_at"] is None and row["sources"] is not None:
        return counted(conn, row["id"], _sources_of(row))
    return {s: {"total": sum(c.values()), **c} for s, c in own_counts(conn, row["id"]).items()}


def _record(row: Row, st: str, source: str, counts: dict[str, int]) -> dict[str, Any]:
    return {"id": row["id"], "source": source, "status": st, "started_at": events.iso(row["started_at"]),
            "finished_at": None if row["finished_at"] is None else events.iso(row["finished_at"]),
            **{k: counts.get(k, 0) for k in COUNTS}, "exit_code": row["exit_code"], "host": row["host"],
            "pid": row["pid"]}


def _rows(conn: Conn, before: int | None) -> Iterator[Row]:
    while True:
        sql, args = f"SELECT {_COLUMNS} FROM runs", []
        if before is not None:
            sql, args = sql + " WHERE id < ?", [before]
        page = conn.execute(same(sql + " ORDER BY id DESC LIMIT ?"), [*args, PAGE]).fetchall()
        yield from page
        if len(page) < PAGE:
            return
        before = page[-1]["id"]


def listing(conn: Conn, now: float, source: str | None = None, status_: str | None = None,
            before: int | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Runs newest first, each {id, source, status, started_at, finished_at, total, finished, failed,
    invalid, exit_code, host, pid}: with `source`, the runs that worked it and that source's counts;
    without, every run with its sources' names joined by commas and their counts summed. `status_`: of that
    status only; `before`: runs with a lower id (the next page's key); at most `limit`."""
    out: list[dict[str, Any]] = []
    for row in _rows(conn, before):
        if limit is not None and len(out) >= limit:
            break
        st = status(row["exit_code"], row["finished_at"], row["heartbeat_at"], now)
        if status_ is not None and st != status_:
            continue
        per = _per_source(conn, row)
        if source is not None:
            if source in per or source in _sources_of(row):
                out.append(_record(row, st, source, per.get(source, {})))
            continue
        sums = {k: sum(c[k] for c in per.values()) for k in COUNTS}
        out.append(_record(row, st, ",".join(per) or ",".join(_sources_of(row)), sums))
    return out


def started_by(conn: Conn, run_id: int) -> tuple[int | None, str | None]:
    """(pid, host) of the process that ran run `run_id` ((None, None) for an unknown run)."""
    row = conn.execute(same("SELECT pid, host FROM runs WHERE id = ?"), (run_id,)).fetchone()
    return (None, None) if row is None else (row["pid"], row["host"])


def latest(conn: Conn, now: float, source: str | None = None) -> dict[str, Any] | None:
    """The newest run (of `source`), as `listing` gives it, or None."""
    found = listing(conn, now, source=source, limit=1)
    return found[0] if found else None
