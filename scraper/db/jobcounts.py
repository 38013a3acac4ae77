"""The jobs counted by (site, source, domain, status): what `status`, `stats` and the readers' scope ask.

On SQLite the counts are kept (migration 22): `job_counts` holds every job up to `job_counts_mark.upto`,
triggers follow those jobs' changes, and whoever inserts jobs calls `catch_up` then `count_new` in the same
transaction (ids are never reused, so its new rows are the rows above the mark). A reader adds the
rows above the mark itself, so jobs inserted by another tool are counted too. On PostgreSQL the counts are
one GROUP BY (its ids come from a sequence, committed out of order, so a mark could pass a row by)."""

from collections.abc import Iterable

from scraper.db.backend import Conn
from scraper.db.dialect import same
from scraper.db.store import JOB_STATUSES, is_postgres

Row = tuple[str, str, str, str, int]     # (site, source, domain, status, jobs)

GROUPED = "SELECT site, source, domain, status, COUNT(*) FROM jobs {where} GROUP BY site, source, domain, status"


def catch_up(c: Conn) -> None:
    """Count the jobs inserted since the mark and move it (SQLite, inside the inserter's transaction)."""
    if is_postgres(c):
        return
    upto = c.execute("SELECT upto FROM job_counts_mark").one()[0]
    if c.execute("SELECT coalesce(max(id), 0) FROM jobs").one()[0] <= upto:
        return
    c.execute(
        "INSERT INTO job_counts (site, source, domain, status, n) "
        + GROUPED.format(where="WHERE id > ?")
        + " ON CONFLICT (site, source, domain, status) DO UPDATE SET n = n + excluded.n", (upto,))
    c.execute("UPDATE job_counts_mark SET upto = (SELECT max(id) FROM jobs)")


def count_new(c: Conn, new: dict[tuple[str, str, str], int]) -> None:
    """Count the jobs the caller just inserted, all pending, {(site, source, domain): rows}, and move the mark
    past them (SQLite, in the transaction that began with `catch_up`, so every row above the mark is theirs):
    their count is known, so no GROUP BY reads them again (a second of a million-row seed)."""
    if is_postgres(c) or not any(new.values()):
        return
    c.executemany(
        "INSERT INTO job_counts (site, source, domain, status, n) VALUES (?, ?, ?, 'pending', ?) "
        "ON CONFLICT (site, source, domain, status) DO UPDATE SET n = n + excluded.n",
        [(*group, n) for group, n in new.items() if n])
    c.execute("UPDATE job_counts_mark SET upto = (SELECT max(id) FROM jobs)")


def rows(conn: Conn) -> list[Row]:
    """Every (site, source, domain, status, jobs) with at least one job."""
    if is_postgres(conn):
        return [tuple(r) for r in conn.execute(same(GROUPED.format(where="")))]
    totals: dict[tuple[str, str, str, str], int] = {}
    upto = conn.execute("SELECT upto FROM job_counts_mark").one()[0]
    kept = conn.execute("SELECT site, source, domain, status, n FROM job_counts WHERE n > 0").fetchall()
    above = conn.execute(GROUPED.format(where="WHERE id > ?"), (upto,)).fetchall()
    for site, source, domain, status, n in (*kept, *above):
        key = (site, source, domain, status)
        totals[key] = totals.get(key, 0) + n
    return [(*key, n) for key, n in totals.items() if n > 0]


def by(counted: Iterable[Row], *fields: str) -> dict:
    """{value of `fields` (one: the value; several: a tuple): {status: jobs}}, every status present."""
    index = [("site", "source", "domain").index(f) for f in fields]
    out: dict = {}
    for row in counted:
        key = row[index[0]] if len(index) == 1 else tuple(row[i] for i in index)
        counts = out.setdefault(key, dict.fromkeys(JOB_STATUSES, 0))
        counts[row[3]] += row[4]
    return out


def by_status(counted: Iterable[Row]) -> dict[str, int]:
    """{status: jobs}, every status present."""
    out = dict.fromkeys(JOB_STATUSES, 0)
    for row in counted:
        out[row[3]] += row[4]
    return out
