"""The jobs table as a queue: seed, claim with a lease, finish, retry later, hand back, count."""

import functools
import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from scraper.db import claims, counters, domains, events, jobcounts
from scraper.db.backend import Conn, Job, Writer
from scraper.db.dialect import Sql, same
from scraper.db.store import is_postgres, transaction
from scraper.policy import breaker, fairness
from scraper.policy.breaker import Breaker

SEED_BATCH = 5_000
DEFAULT_SOURCE = "n8n"      # the built-in source; every job made before sources existed is its
EVENT_REASON_CHARS = 500    # a failure's reason in its event (the job row keeps 1,000)


# rows per INSERT: one statement of many rows costs half what executemany does row for row (each of its rows
# is the statement run again); 1,000 rows of 5 stay far below SQLite's 32,766 parameters
INSERT_CHUNK = 1_000
_INSERT_JOBS = ("{} jobs (key, site, url, domain, source, priority, created_at, updated_at) "
                 "SELECT column1, column2, column3, column4, column5, ?, ?, ? FROM (VALUES {{}}) AS new{}")
# {} stands for the rows' placeholders; a known key is left as it is (both name VALUES' columns column1...)
INSERT_JOBS = Sql(_INSERT_JOBS.format("INSERT OR IGNORE INTO", ""),
                  same(_INSERT_JOBS.format("INSERT INTO", " ON CONFLICT DO NOTHING")).postgres)

# a job handed back, its attempt not counted (never below none): SQLite's scalar MAX is PostgreSQL's GREATEST
RELEASE = Sql(
    """UPDATE jobs SET status = 'pending', worker = NULL, lease_until = NULL,
           attempts = MAX(0, attempts - 1), updated_at = ?, available_at = COALESCE(?, available_at)
       WHERE id = ? AND worker = ? AND status = 'running'""",
    """UPDATE jobs SET status = 'pending', worker = NULL, lease_until = NULL,
           attempts = GREATEST(0, attempts - 1), updated_at = %s, available_at = COALESCE(%s, available_at)
       WHERE id = %s AND worker = %s AND status = 'running'""")


def add_jobs(c: Conn, rows: Iterable[Sequence[str]], now: float, priority: int = 0,
             source: str = DEFAULT_SOURCE) -> int:
    """Queue (key, site, url, domain[, source]) rows inside the caller's transaction (a row without its
    source gets `source`); known keys are left as they are. Returns how many were new."""
    jobcounts.catch_up(c)      # rows another tool inserted are counted first: those above the mark are then ours
    groups: dict[tuple[str, str, str], list[Sequence[str]]] = {}
    for row in rows:
        row = row if len(row) == 5 else with_source(row, source)
        # by (site, source, domain), so each insert's new rows are counted without reading them again; the
        # ids (a claim's last tie-break) follow the rows' order within a group, the groups one after another
        groups.setdefault((row[1], row[4], row[3]), []).append(row)
    new: dict[tuple[str, str, str], int] = {}
    for group, values in groups.items():
        for i in range(0, len(values), INSERT_CHUNK):
            chunk = values[i:i + INSERT_CHUNK]
            new[group] = new.get(group, 0) + c.execute(
                _rows_of(INSERT_JOBS, len(chunk)),
                [priority, now, now, *itertools.chain.from_iterable(chunk)]).rowcount
    jobcounts.count_new(c, new)
    return sum(new.values())


@functools.lru_cache(maxsize=64)
def _rows_of(sql: Sql, n: int) -> Sql:
    """`sql` for `n` rows of five values (each dialect's placeholders)."""
    return Sql(sql.sqlite.format(", ".join(["(?, ?, ?, ?, ?)"] * n)),
               sql.postgres.format(", ".join(["(%s, %s, %s, %s, %s)"] * n)))


def with_source(row: Sequence[str], source: str = DEFAULT_SOURCE) -> tuple[str, ...]:
    """(key, site, url, domain, source): a row of four gets `source`."""
    return tuple(row) if len(row) == 5 else (*row, source)


class Queue:
    """All job-state changes go through here; each is one short transaction."""

    def __init__(self, conn: Conn, run_id: int | None = None) -> None:
        self.conn = conn
        self._levels: Sequence[Sequence[str]] | None = None
        self.run_id = run_id        # a run's workers record each job they finish under it (`run_jobs`)

    # --- seeding -------------------------------------------------------------------------

    def seed(self, rows: Iterable[Sequence[str]], now: float | None = None) -> tuple[int, int]:
        """Insert (key, site, url, domain[, source]) rows as pending; known keys are left as they are.

        Returns (new, known)."""
        now = time.time() if now is None else now
        new = known = 0
        batch: list[Sequence[str]] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= SEED_BATCH:
                n = self._insert(batch, now)
                new, known, batch = new + n, known + len(batch) - n, []
        if batch:
            n = self._insert(batch, now)
            new, known = new + n, known + len(batch) - n
        return new, known

    def _insert(self, batch: list[Sequence[str]], now: float) -> int:
        with transaction(self.conn) as c:
            return add_jobs(c, batch, now)

    # --- claiming ------------------------------------------------------------------------

    def claim(self, worker: str, now: float, lease_s: float, sites: Sequence[str] | None = None,
              demands: dict[str, Any] | None = None, workers: int = 1,
              sources: Sequence[Sequence[str]] | None = None, skip_keys: Sequence[str] = ()) -> Job | None:
        """Take the next runnable job for `worker` (or None): BEGIN IMMEDIATE makes it atomic.

        Jobs of a paused or open domain are skipped; an open domain whose time is up gives one
        probe job and turns half-open, so only one worker tests it. `sites` limits the claim to those
        sites. `demands` ({domain: fairness.Demand}) makes claims fair between domains (`fairness.plan`,
        from the jobs each domain has in flight, counted in this transaction): the domains whose new
        job could send soon first, in `CLAIM_ORDER` between them; then one by one the domains that
        would make their job wait, each only while it has no job in flight. `workers`: the pool's size.

        `sources` (levels of source names, first level first: `claims.source_levels`) limits the claim to
        those sources and, among the domains it may take from, prefers a job of the first level that has one.
        `skip_keys`: jobs this worker is not to take (those it handed back for want of a browser slot)."""
        self._levels = sources
        base, base_args = "1 = 1", []
        if sites is not None:
            base, base_args = f"site IN ({','.join('?' * len(sites))})", list(sites)
        if skip_keys:
            base, base_args = f"{base} AND key NOT IN ({','.join('?' * len(skip_keys))})", [*base_args, *skip_keys]
        if not demands and is_postgres(self.conn):
            # one statement, one round trip: every domain with a row that is not closed, or paused, takes
            # no ordinary job (breaker.admits says so of each such row); the UPDATE is atomic alone.
            # Without a job, the whole claim below looks for a probe.
            job = self._claim_where(
                self.conn, f"{base} AND domain NOT IN (SELECT domain FROM domains WHERE state != 'closed' "
                           "OR paused_until > ?)", [*base_args, now], worker, now, lease_s)
            if job is not None:
                return job
        with transaction(self.conn, shared=True) as c:
            blocked, probes = self._blocked_domains(c, now)
            if probes and is_postgres(c):
                # only one claimer may turn a domain half-open: wait for the write lock, then look again
                from scraper.db import pg
                c.raw("SELECT pg_advisory_xact_lock(%s)", (pg.WRITE_LOCK,))
                blocked, probes = self._blocked_domains(c, now)
            job = self._claim_fair(c, base, base_args, blocked, demands or {}, workers, worker, now, lease_s)
            for domain in probes:
                if job is not None:
                    break
                job = self._claim_where(c, f"{base} AND domain = ?", base_args + [domain], worker, now, lease_s,
                                        probe=True)
                if job is not None:
                    self._save_breaker(c, domain, breaker.on_probe(self._breaker(c, domain), now, lease_s), now)
            return job

    def _claim_fair(self, c: Conn, base: str, base_args: list[Any], blocked: list[str], demands: dict[str, Any],
                    workers: int, worker: str, now: float, lease_s: float) -> Job | None:
        later: tuple[str, ...] = ()
        skip = sorted(blocked)
        if demands:
            open_demands = {d: v for d, v in demands.items() if d not in blocked}
            p = fairness.plan(open_demands, self.in_flight(c), workers)
            # the ready domains, and any the worker has no demand for (not its sites'), go by CLAIM_ORDER
            skip, later = sorted(set(blocked) | (set(demands) - set(p.now))), (*p.later, *p.held)
        where = f"{base} AND domain NOT IN ({','.join('?' * len(skip))})" if skip else base
        job = self._claim_where(c, where, base_args + skip, worker, now, lease_s)
        for domain in later:
            if job is not None:
                break
            job = self._claim_where(c, f"{base} AND domain = ?", base_args + [domain], worker, now, lease_s)
        return job

    def in_flight(self, c: Conn | None = None) -> dict[str, int]:
        """{domain: jobs running}."""
        return {r[0]: r[1] for r in (c or self.conn).execute(
            same("SELECT domain, COUNT(*) FROM jobs WHERE status = 'running' GROUP BY domain"))}

    def _blocked_domains(self, c: Conn, now: float) -> tuple[list[str], list[str]]:
        """(domains that take no ordinary job, those of them that take one probe); no row = closed."""
        blocked, probes = [], []
        for r in c.execute(same("SELECT * FROM domains WHERE state != 'closed' OR paused_until > ?"), (now,)):
            verdict = breaker.admits(domains.breaker_of(r), now)
            if verdict != "yes":
                blocked.append(r["domain"])
            if verdict == "probe":
                probes.append(r["domain"])
        return blocked, probes

    # On PostgreSQL claims run side by side: SKIP LOCKED (in the pick) passes over a row another claim is
    # taking, and `status = 'pending'` is checked again on the locked row (READ COMMITTED), so no job is
    # taken twice.
    def _claim_where(self, c: Conn, where: str, args: list[Any], worker: str, now: float, lease_s: float,
                     probe: bool = False) -> Job | None:
        for pick, pick_args in claims.picks(self._levels, where, args, now, postgres=is_postgres(c)):
            job = self._take(c, pick, pick_args, worker, now, lease_s, probe)
            if job is not None:
                return job
        return None

    @staticmethod
    def _take(c: Conn, pick: str, pick_args: list[Any], worker: str, now: float, lease_s: float,
              probe: bool) -> Job | None:
        row = c.execute(same(
            f"""UPDATE jobs SET status = 'running', worker = ?, lease_until = ?, attempts = attempts + 1,
                    started_at = ?, updated_at = ?
                WHERE id = ({pick}) AND status = 'pending'
                RETURNING id, key, site, url, domain, attempts, source"""),
            [worker, now + lease_s, now, now, *pick_args],
        ).fetchone()
        return None if row is None else Job(row[0], row[1], row[2], row[3], row[4], row[5], probe=probe, source=row[6])

    def heartbeat(self, job: Job, worker: str, now: float, lease_s: float) -> bool:
        """Extend the lease; False when the job is no longer ours (it was taken back)."""
        with transaction(self.conn, shared=True) as c:
            cur = c.execute(
                same("UPDATE jobs SET lease_until = ? WHERE id = ? AND worker = ? AND status = 'running'"),
                (now + lease_s, job.id, worker),
            )
            return cur.rowcount == 1

    # --- finishing -----------------------------------------------------------------------

    def complete(self, job: Job, worker: str, now: float, duration_ms: int, write: Writer | None = None,
                 http_status: int = 200) -> bool:
        """Mark the job done and run `write(conn)` (the result) in the same transaction.

        Returns False, writing nothing, when the lease was lost to another worker."""
        with transaction(self.conn, shared=True) as c:
            cur = c.execute(same(
                """UPDATE jobs SET status = 'done', worker = NULL, lease_until = NULL, error_kind = NULL,
                       last_error = NULL, http_status = ?, finished_at = ?, updated_at = ?, duration_ms = ?
                   WHERE id = ? AND worker = ? AND status = 'running'"""),
                (http_status, now, now, duration_ms, job.id, worker),
            )
            if cur.rowcount != 1:
                return False
            self._record(c, job, "done", now)
            if write is not None:
                with events.in_run(self.run_id):
                    write(c)
            return True

    def _record(self, c: Conn, job: Job, status: str, now: float) -> None:
        """The run's own record of a job it finished (what `report` counts, whatever happens later)."""
        if self.run_id is not None:
            c.execute(same("INSERT INTO run_jobs (run_id, job_id, status, at) VALUES (?, ?, ?, ?)"),
                      (self.run_id, job.id, status, now))

    def fail(self, job: Job, worker: str, now: float, status: str, kind: str, message: str,
             http_status: int | None = None, available_at: float | None = None, duration_ms: int | None = None,
             counted: bool = True, write: Writer | None = None) -> bool:
        """Record a failed attempt: `status` is pending (retry at `available_at`), failed or invalid.
        With `counted=False` the attempt is given back (a 429 is the domain's, not the job's); `write(conn)`
        runs in the same transaction (a confirmed removal)."""
        finished = None if status == "pending" else now
        with transaction(self.conn, shared=True) as c:
            cur = c.execute(same(
                """UPDATE jobs SET status = ?, worker = NULL, lease_until = NULL, error_kind = ?, last_error = ?,
                       http_status = ?, available_at = COALESCE(?, available_at), finished_at = ?,
                       updated_at = ?, duration_ms = ?, attempts = attempts - ?
                   WHERE id = ? AND worker = ? AND status = 'running'"""),
                (status, kind, message[:1000], http_status, available_at, finished, now, duration_ms,
                 0 if counted else 1, job.id, worker),
            )
            if cur.rowcount != 1:
                return False
            counters.bump(c, "error:" + kind)
            if finished is not None:
                self._record(c, job, status, now)
                self._ended(c, job.key, job.source, job.url, status, kind, message, http_status, job.attempts, now)
            if write is not None:
                with events.in_run(self.run_id):
                    write(c)
            return True

    def _ended(self, c: Conn, key: str, source: str, url: str, status: str, kind: str, reason: str,
               http_status: int | None, attempts: int, now: float) -> None:
        """The event of a job that ended failed or invalid (`job.failed`, `job.invalid`), with its reason."""
        events.append(c, f"job.{status}", source, key,
                      {"key": key, "url": url, "kind": kind, "reason": reason[:EVENT_REASON_CHARS],
                       "http_status": http_status, "attempts": attempts}, events.iso(now), self.run_id)

    def release(self, job: Job, worker: str, now: float, available_at: float | None = None) -> bool:
        """Hand an unfinished job back (shutdown, recycle): pending again, the attempt not counted; claimable
        again from `available_at` when given (else at once)."""
        with transaction(self.conn, shared=True) as c:
            cur = c.execute(RELEASE, (now, available_at, job.id, worker))
            return cur.rowcount == 1

    def abandon(self, now: float, workers: Sequence[str], max_attempts: int) -> tuple[int, int]:
        """Take back the running rows of `workers` that died holding them: the attempt counts (the job
        may be what killed them); after `max_attempts` the row ends failed, `abandoned`.

        Returns (pending again, failed)."""
        if not workers:
            return 0, 0
        marks = ",".join("?" * len(workers))
        with transaction(self.conn) as c:
            rows = c.execute(
                same(f"""UPDATE jobs SET status = CASE WHEN attempts >= ? THEN 'failed' ELSE 'pending' END,
                        finished_at = CASE WHEN attempts >= ? THEN ? END,
                        error_kind = 'abandoned', last_error = 'the worker ' || worker || ' died holding it',
                        http_status = NULL, worker = NULL, lease_until = NULL, updated_at = ?
                    WHERE status = 'running' AND worker IN ({marks})
                    RETURNING status, key, source, url, attempts, last_error"""),
                [max_attempts, max_attempts, now, now, *workers],
            ).fetchall()
            if rows:
                counters.bump(c, "error:abandoned", len(rows))
            for r in rows:
                if r[0] == "failed":
                    self._ended(c, r[1], r[2], r[3], "failed", "abandoned", r[5], None, r[4], now)
        failed = sum(1 for r in rows if r[0] == "failed")
        return len(rows) - failed, failed

    def expired_holders(self, now: float) -> list[str]:
        """Names of the workers holding a running job whose lease has run out."""
        return [r[0] for r in self.conn.execute(
            same("SELECT DISTINCT worker FROM jobs WHERE status = 'running' AND lease_until < ?"), (now,))]

    def requeue(self, now: float, workers: Sequence[str] | None = None, expired: bool = False,
                keep: Sequence[int] = ()) -> int:
        """Take back running rows: those of `workers` (names) but the ids in `keep`, those with an expired
        lease, or (neither given) every running row. Their attempt is not counted: a clean hand-back (stop,
        recycle, a claim whose answer a lost connection swallowed)."""
        args: list[Any]
        if workers is not None:
            marks = ",".join("?" * len(workers))
            where, args = f"worker IN ({marks})", list(workers)
            if keep:
                where += f" AND id NOT IN ({','.join('?' * len(keep))})"
                args += list(keep)
        elif expired:
            where, args = "lease_until < ?", [now]
        else:
            where, args = "1 = 1", []
        if workers is not None and not workers:
            return 0
        with transaction(self.conn) as c:
            # the attempt not counted, never below none: SQLite's scalar MAX is PostgreSQL's GREATEST
            back = ("UPDATE jobs SET status = 'pending', worker = NULL, lease_until = NULL, "
                    "attempts = {}(0, attempts - 1), updated_at = ? WHERE status = 'running' AND " + where)
            cur = c.execute(Sql(back.format("MAX"), same(back.format("GREATEST")).postgres), [now, *args])
            return cur.rowcount

    def retry(self, statuses: Sequence[str], now: float | None = None,
              finished_before: float | None = None) -> int:
        """Move rows of `statuses` back to pending with attempts reset; returns how many. `finished_before`:
        only rows whose last attempt ended before that time (`update --retry-after`)."""
        now = time.time() if now is None else now
        marks = ",".join("?" * len(statuses))
        older = "" if finished_before is None else " AND COALESCE(finished_at, updated_at) < ?"
        with transaction(self.conn) as c:
            cur = c.execute(
                same(f"""UPDATE jobs SET status = 'pending', attempts = 0, available_at = ?, finished_at = NULL,
                        worker = NULL, lease_until = NULL, updated_at = ?
                    WHERE status IN ({marks}){older}"""),
                [now, now, *statuses, *(() if finished_before is None else (finished_before,))],
            )
            return cur.rowcount

    def refetch(self, keys: Iterable[str | tuple[str, float]], now: float) -> int:
        """Queue finished jobs of `keys` again, attempts reset (a sync or a refresh); a job that is pending
        or running already is left alone. `keys` is a list of keys, or of (key, available_at) to order
        the claims. Returns how many were queued."""
        rows = [(k, now) if isinstance(k, str) else k for k in keys]
        with transaction(self.conn) as c:
            # the rows this statement changed (total_changes would count the kept counts' triggers too)
            return c.executemany(
                same("""UPDATE jobs SET status = 'pending', attempts = 0, available_at = ?, finished_at = NULL,
                       updated_at = ? WHERE key = ? AND status IN ('done', 'failed', 'invalid')"""),
                [(at, now, key) for key, at in rows],
            ).rowcount if rows else 0

    # --- domains -------------------------------------------------------------------------

    def update_domain(self, domain: str, change: Callable[[Breaker], Breaker],
                      now: float) -> tuple[Breaker, Breaker]:
        """Apply `change(Breaker) -> Breaker` to the domain's row atomically; returns (before, after)."""
        with transaction(self.conn) as c:
            before = self._breaker(c, domain)
            after = change(before)
            self._save_breaker(c, domain, after, now)
            return before, after

    def domains(self) -> dict[str, Breaker]:
        return domains.every_breaker(self.conn)

    def breaker(self, domain: str) -> Breaker:
        """The domain's breaker, read by its key (a closed one when it has no row)."""
        return domains.read_breaker(self.conn, domain)

    def give_up(self, domain: str, reason: str, now: float, until: float) -> tuple[Breaker, Breaker]:
        """This run sends nothing more to `domain` until `until`, for `reason`; (before, after)."""
        return domains.give_up(self.conn, domain, reason, now, until)

    def new_run(self, now: float) -> list[str]:
        """Give domains a previous run gave up another chance; returns their names."""
        names = [r[0] for r in self.conn.execute(same("SELECT domain FROM domains WHERE gave_up != 0"))]
        for name in names:
            self.update_domain(name, breaker.on_new_run, now)
        return names

    def given_up(self) -> dict[str, int]:
        """{domain: pending jobs} of the domains this run gave up."""
        return {r[0]: r[1] for r in self.conn.execute(
            same("""SELECT domains.domain, COUNT(jobs.id) FROM domains
               LEFT JOIN jobs ON jobs.domain = domains.domain AND jobs.status = 'pending'
               WHERE domains.gave_up != 0 GROUP BY domains.domain ORDER BY domains.domain"""))}

    def work_left(self, sites: Sequence[str] | None = None, sources: Sequence[str] | None = None) -> bool:
        """True while a job (of `sites` and `sources`, default all) runs, or a pending one belongs to a
        domain that was not given up."""
        where, args = "", []
        if sites is not None:
            where, args = f" AND site IN ({','.join('?' * len(sites))})", list(sites)
        if sources is not None:
            where, args = where + f" AND source IN ({','.join('?' * len(sources))})", args + list(sources)
        return bool(self.conn.execute(
            same(f"""SELECT EXISTS (SELECT 1 FROM jobs WHERE (status = 'running'
                    OR (status = 'pending'
                        AND domain NOT IN (SELECT domain FROM domains WHERE gave_up != 0))){where})"""),
            args,
        ).one()[0])

    @staticmethod
    def _breaker(c: Conn, domain: str) -> Breaker:
        return domains.read_breaker(c, domain)

    @staticmethod
    def _save_breaker(c: Conn, domain: str, b: Breaker, now: float) -> None:
        domains.save_breaker(c, domain, b, now)

    # --- reading -------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Rows per status (every status present, zero when none)."""
        return jobcounts.by_status(jobcounts.rows(self.conn))

    def run_counts(self, run_id: int) -> dict[str, int]:
        """What run `run_id` itself finished: {done, failed, invalid}."""
        counts = dict.fromkeys(("done", "failed", "invalid"), 0)
        counts.update((r[0], r[1]) for r in self.conn.execute(
            same("SELECT status, COUNT(*) FROM run_jobs WHERE run_id = ? GROUP BY status"), (run_id,)))
        return counts

    def finished_since(self, since: float) -> int:
        return self.conn.execute(same("SELECT COUNT(*) FROM jobs WHERE finished_at >= ?"), (since,)).one()[0]

    def counts_by_site(self) -> dict[str, dict[str, int]]:
        """{site: {status: rows}} (every status present, zero when none)."""
        return jobcounts.by(jobcounts.rows(self.conn), "site")

    def counters(self) -> dict[str, int]:
        return counters.every(self.conn)


if TYPE_CHECKING:
    from scraper.db import backend, runrecord, store

    def _conforms(q: Queue, job: Job) -> tuple[backend.JobQueue, backend.JobRef, backend.Store, backend.Runs]:
        """mypy: the SQLite queue, its jobs, the store and the runs modules follow the backend seam."""
        return q, job, store, runrecord
