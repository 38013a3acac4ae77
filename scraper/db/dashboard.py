"""The history charts of `scraper serve`'s dashboard, one statement each: the runs over time, the changes per
day and the catalogue over time. Each is also a canned query of Datasette (db/canned), the same text with the
same `:source`, `:since` and `:until` parameters (an empty one filters nothing; dates as YYYY-MM-DD, `until`
included), so a chart's link opens its own query there. SQLite only, as `scraper serve` is.

The live figures are `scraper status --json`'s own (products/status) and the freshness of each source is
db/walklog's: neither is written again here.
"""

from __future__ import annotations

from typing import Any

from scraper.db.backend import Conn
from scraper.db.dialect import Sql, only

# a run's counts are its own record (`run_jobs`, as the report counts them), so a live run shows its work so
# far; a run belongs to a day by its start, and `until` is a whole day: up to the next midnight (UTC)
_RUNS = """SELECT r.id, r.started_at, r.finished_at, r.heartbeat_at, r.exit_code, r.workers,
  COUNT(CASE WHEN x.status = 'done' THEN 1 END) AS done, COUNT(CASE WHEN x.status = 'failed' THEN 1 END) AS failed,
  COUNT(CASE WHEN x.status = 'invalid' THEN 1 END) AS invalid
FROM runs AS r LEFT JOIN (SELECT rj.run_id, rj.status, j.source FROM run_jobs AS rj JOIN jobs AS j ON j.id = rj.job_id)
  AS x ON x.run_id = r.id AND (:source = '' OR x.source = :source)
WHERE (:since = '' OR r.started_at >= CAST(strftime('%s', :since) AS REAL))
  AND (:until = '' OR r.started_at < CAST(strftime('%s', :until, '+1 day') AS REAL))
  AND (:source = '' OR x.source IS NOT NULL OR r.sources LIKE '%"' || :source || '"%')
GROUP BY r.id ORDER BY r.id"""

_CHANGES = """SELECT substr(at, 1, 10) AS day, source, change, COUNT(*) AS n FROM changes
WHERE (:source = '' OR source = :source) AND (:since = '' OR at >= :since)
  AND (:until = '' OR at < date(:until, '+1 day'))
GROUP BY day, source, change ORDER BY day, source, change"""

# the live count is the running sum of every day's net change since the first, so the window is chosen
# after the sum: a range starting today still counts what was added before it
_CATALOGUE = """SELECT day, source, live FROM (
  SELECT day, source, SUM(net) OVER (PARTITION BY source ORDER BY day) AS live FROM (
    SELECT substr(at, 1, 10) AS day, source,
      SUM(CASE change WHEN 'removed' THEN -1 WHEN 'changed' THEN 0 ELSE 1 END) AS net
    FROM changes WHERE (:source = '' OR source = :source) GROUP BY day, source) AS daily) AS running
WHERE (:since = '' OR day >= :since) AND (:until = '' OR day <= :until)
ORDER BY day, source"""

QUERIES: dict[str, dict[str, str]] = {
    "dashboard_runs": {
        "title": "Runs over time",
        "description": "Each run (of a source, when given) started in the date range: its start, end, exit code, "
                       "workers, and the jobs it finished done, failed and invalid (of that source). "
                       "Parameters: source, since and until (YYYY-MM-DD), empty for all.",
        "sql": _RUNS,
    },
    "dashboard_changes": {
        "title": "Changes per day",
        "description": "Templates and items added, changed, removed and restored each day (UTC), per source. "
                       "Parameters: source, since and until (YYYY-MM-DD), empty for all.",
        "sql": _CHANGES,
    },
    "dashboard_catalogue": {
        "title": "Catalogue over time",
        "description": "Live templates or items of each source at the end of each day with a change, counted "
                       "from the change records. Parameters: source, since and until (YYYY-MM-DD), empty for all.",
        "sql": _CATALOGUE,
    },
}
PARAMS = ("source", "since", "until")


def _sql(name: str) -> Sql:
    return only(False, QUERIES[name]["sql"])


def _run(conn: Conn, name: str, source: str, since: str, until: str) -> list[dict[str, Any]]:
    args = {"source": source, "since": since, "until": until}
    return [dict(zip(r.keys(), r, strict=True)) for r in conn.execute(_sql(name), args)]


def runs(conn: Conn, source: str = "", since: str = "", until: str = "") -> list[dict[str, Any]]:
    """The runs started in the range, oldest first: {id, started_at, finished_at, heartbeat_at, exit_code,
    workers, done, failed, invalid} (the counts of the source given, else of all its sources)."""
    return _run(conn, "dashboard_runs", source, since, until)


def changes(conn: Conn, source: str = "", since: str = "", until: str = "") -> list[dict[str, Any]]:
    """[{day, source, change, n}] of the changes in the range."""
    return _run(conn, "dashboard_changes", source, since, until)


def catalogue(conn: Conn, source: str = "", since: str = "", until: str = "") -> list[dict[str, Any]]:
    """[{day, source, live}]: each source's live count at the end of each day in the range with a change."""
    return _run(conn, "dashboard_catalogue", source, since, until)
