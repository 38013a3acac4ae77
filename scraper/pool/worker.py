"""The worker: claim a job, process it through the site, record its outcome. One job a step.

Every request of a job goes through the worker's polite client (`politeness.client.Client`), bound to
the job (`pool.jobclient.JobClient`, the site's `Context`); its pages through the worker's browser
(`pool.browserslot.BrowserSlot`).

A worker process keeps several jobs in flight (`policy.inflight`): each in a lane, a thread with its own
`Worker` loop, database connection, limiter handle, session and polite client (as a process of its own
would: nothing live is shared between lanes, so the leases, the shared bucket and a kill -9 work as they
do between processes). Every lane claims under the process's name; the signal flags are the process's."""

import logging
import os
import random
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

from scraper import sites
from scraper.base import exitcodes
from scraper.base.clock import SYSTEM
from scraper.base.errors import (
    ConfigError,
    DatabaseDown,
    DatabaseError,
    DatabaseUnavailable,
    DiskFull,
    FetchError,
    HandedBack,
    JobInvalid,
    ParseError,
)
from scraper.db import disk, runstate, store
from scraper.db.claims import source_levels
from scraper.db.queue import Queue
from scraper.mirror import record
from scraper.policy import inflight, retry
from scraper.politeness import client as polite_client
from scraper.politeness import proxypool, rates
from scraper.politeness.limiter import open_limiter
from scraper.pool import memory
from scraper.pool.browserslot import BrowserSlot
from scraper.pool.jobclient import JobClient, iso
from scraper.pool.outage import Outage

log = logging.getLogger(__name__)

FORK_BLOCKED = {signal.SIGINT, signal.SIGTERM}   # blocked around a fork (supervisor), unblocked in the child
IDLE_S = 0.05                # nap when nothing is runnable; short, so the end of a backoff is not missed
STOP_SLICE_S = 0.01          # a nap looks at the stop flag this often: the run's end waits for no full nap
JOIN_S = 0.2                 # the main thread's wait on its lanes (signal handlers run in between)


class Flags:
    """Set by signal handlers, read by the loop (handlers do nothing else)."""

    stop = False
    recycle = False


class Quota:
    """The jobs a worker process takes before it recycles (--max-jobs-per-worker), shared by its lanes: a
    lane takes a place before it claims and gives it back when the claim found nothing."""

    def __init__(self, jobs):
        self.jobs, self.taken = jobs, 0
        self.held = set()       # ids of the jobs the process's lanes work on (what an outage must not hand back)
        self.claiming = threading.Lock()    # a claim and its entry in `held` are one step for the other lanes
        self._lock = threading.Lock()

    def take(self):
        with self._lock:
            if self.taken >= self.jobs:
                return False
            self.taken += 1
            return True

    def give_back(self):
        with self._lock:
            self.taken -= 1


class Worker:
    """One worker's loop over an open queue, limiter and HTTP session."""

    def __init__(self, settings, name, queue, limiter, session, flags=None, clock=SYSTEM, rng=random,
                 parent_pid=None, proxies=None, lanes=1, quota=None, wakeup=None):
        self.s = settings
        self.wakeup = wakeup    # `pool.wakeup.Wakeup`: rung when claims start finding nothing (the run may be over)
        self.lanes = lanes      # the process's lanes: they share its idle polls and its quota
        self.parent_pid = parent_pid
        self.name = name
        self.queue = queue
        self.flags = flags or Flags()
        self.quota = quota or Quota(settings.max_jobs_per_worker)
        self.clock = clock
        self.rng = rng
        self.fetchers = {}
        self.idle_since = None  # when claims started finding nothing
        self.sites = sites.enabled(settings)
        self.levels = source_levels(settings.working_sources)   # claims prefer the first priority level
        self.domains = sites.domains(settings)
        self.requests_per_job = sites.requests_per_job(settings)
        # every request of every job leaves through this one client (proxies: a proxypool.Pool, or None)
        self.client = polite_client.Client(settings, queue, limiter, session, name, clock, self.stopping, proxies)
        self.browser_slot = BrowserSlot(settings, self.client, name)
        self.outage = Outage(settings, name, lambda: store.ping(queue.conn), self.stopping)
        self.held = None        # the job in flight when the database went away: handed back once it answers
        self.claim_lost = False     # a claim's answer was lost with the connection

    @property
    def robots(self):
        return self.client.robots

    @property
    def browser(self):
        """The worker's net.browser.BrowserFetcher used last (local or remote), or None before its first page."""
        return self.browser_slot.fetcher

    def politeness_of(self, domain):
        """The domain's Politeness (one per domain in this process, the client's)."""
        return self.client.politeness_of(domain)

    def context(self, job):
        """The client bound to `job`: what its site may ask during one attempt (`sites.Context`)."""
        return JobClient(self.client, job, self.queue, self.s, self.name, self.stopping, self.browser_slot)

    def stopping(self):
        """Asked to stop, or the supervisor is gone (then nobody would watch us)."""
        return self.flags.stop or (self.parent_pid is not None and os.getppid() != self.parent_pid)

    def run(self):
        """Loop until asked to stop or to recycle; returns the exit code."""
        while True:
            if self.stopping():
                return exitcodes.WORKER_STOPPED
            if self.flags.recycle or not self.quota.take():
                if not self.flags.recycle:      # once for the process: its other lanes finish their jobs and go
                    self.flags.recycle = True
                    log.info("%s recycling after %d jobs", self.name, self.quota.taken)
                return exitcodes.WORKER_RECYCLE
            try:
                stepped = self.step()
            except DatabaseUnavailable as e:
                # the database's outage: nothing is charged to the job or its site (DatabaseDown ends the lane)
                if not self._outage(e):
                    return exitcodes.WORKER_STOPPED
                stepped = True
            if not stepped:
                self.quota.give_back()
                # the lanes of a process poll as often together as one lane alone (claims take the write lock)
                self._nap(IDLE_S * min(self.lanes, 4))

    def _nap(self, seconds):
        """Sleep `seconds`, or less when a stop comes meanwhile."""
        end = self.clock.monotonic() + seconds
        while not self.stopping() and (left := end - self.clock.monotonic()) > 0:
            self.clock.sleep(min(STOP_SLICE_S, left))

    def step(self, now=None):
        """Claim and process one job; False when no job was runnable."""
        now = self.clock() if now is None else now
        demands = self._demands()
        with self.quota.claiming:
            try:
                job = self.queue.claim(self.name, now, self.s.lease_s, sites=self.sites, demands=demands,
                                       workers=self.s.workers * self.lanes,
                                       sources=self.browser_slot.claim_levels(self.levels),
                                       skip_keys=self.browser_slot.skip_keys())
            except DatabaseUnavailable:
                self.claim_lost = True  # it may have committed unheard: `_outage` hands back what it took
                raise
            if job is not None:
                self.quota.held.add(job.id)
        if job is None:
            self._idle(now)
            return False
        self.idle_since = None
        try:
            self.process(job)
        finally:
            self.quota.held.discard(job.id)
            self.browser_slot.job_ended()
        return True

    def _outage(self, error):
        """Wait for the database (`pool.outage`); then hand back, for free, the job in flight and any job a
        lost answer left running under this process's name (a claim that committed unheard). False when
        asked to stop first."""
        while self.outage.wait(error):
            try:
                self._hand_back()
                return True
            except DatabaseUnavailable as e:    # gone again at once (a session made during a shutdown)
                error = e
        return False

    def _hand_back(self):
        now = self.clock()
        if self.held is not None and self.queue.release(self.held, self.name, now):
            log.info("%s handed back %s after the outage; its attempt is not counted", self.name, self.held.key)
        self.held = None
        if self.claim_lost:
            with self.quota.claiming:
                n = self.queue.requeue(now, workers=[self.name], keep=sorted(self.quota.held))
            self.claim_lost = False
            if n:
                log.info("%s handed back %d job(s) claimed while the connection was lost", self.name, n)

    def _idle(self, now):
        """Nothing to claim: after BROWSER_IDLE_S, close the worker's browsers (`BrowserSlot.idle_for`)."""
        if self.idle_since is None:
            self.idle_since = now
            if self.wakeup is not None:
                self.wakeup.ring()      # the supervisor asks at once whether work is left
        else:
            self.browser_slot.idle_for(now - self.idle_since)

    def _demands(self):
        """Each domain's rate slot, rate and requests per job, so the claim keeps every worker on a
        domain that can send soon (`fairness.plan`; only worth asking when the run has several domains)."""
        if len(self.domains) < 2:
            return None
        return {d: self.politeness_of(d).demand(self.requests_per_job.get(d, 1)) for d in self.domains}

    def process(self, job):
        """One job, contained: whatever goes wrong ends this attempt with a reason, never the worker."""
        started = self.clock.monotonic()
        try:
            self._process(job, started)
        except DatabaseUnavailable:
            self.held = job     # the outage is the database's: the job goes back once it answers, uncharged
            raise
        except Exception as e:
            if disk.exhausted(self.s.db_path, e):
                self._disk_full(job, e)
                # the lane ends: no job can be written until space is freed (the supervisor stops the run)
                if isinstance(e, DiskFull):
                    raise
                raise DiskFull(str(e)) from e
            # fetching, decoding, parsing, extracting, storing: a bug or an answer nobody foresaw
            log.exception("%s %s: unexpected %s while processing it", self.name, job.key, type(e).__name__)
            self._failed(job, retry.INTERNAL, f"{type(e).__name__}: {e}", None, None, started)

    def _process(self, job, started):
        """Run the job's site on it; write its Result in the transaction that marks it done."""
        try:
            site = sites.get(job.site)
            if site is None:
                raise JobInvalid("unknown_site", f"no site {job.site!r} in this version of scraper")
            result = self._fetcher(site).fetch(job, self.context(job))
        except HandedBack:
            return
        except JobInvalid as e:
            self._invalid(job, e.kind, str(e), started, result=e.result)
        except FetchError as e:
            self._failed(job, e.kind, str(e), e.status, e.retry_after, started, probe=job.probe)
        except ParseError as e:
            # a site may name its own final kind (catalogue's `incomplete`)
            self._failed(job, getattr(e, "kind", retry.PARSE), str(e), 200, None, started,
                         result=getattr(e, "result", None))
        else:
            result = record.prepare(result)     # hashing, compressing, redacting: not under the write lock
            ms = _ms_since(started, self.clock)
            now = self.clock()
            ok = self.queue.complete(job, self.name, now, ms,
                                     write=lambda c: record.write(c, result, now, source=job.source))
            if not ok:
                log.warning("%s lost the lease of %s; its result was not written", self.name, job.key)
            else:
                log.debug("%s done %s in %d ms", self.name, job.key, ms)

    def _disk_full(self, job, error):
        """SQLite said the disk is full while this job was written: hand it back for free (an UPDATE in place
        may still fit; if not, the supervisor takes it back). The supervisor says the one sentence of the fault."""
        try:
            self.queue.release(job, self.name, self.clock())
        except DatabaseError:
            pass
        log.debug("%s %s: the disk under the database is full (%s); the job goes back to pending", self.name,
                  job.key, error)

    def _fetcher(self, site):
        """The site's per-process side, opened on its first job (after the fork)."""
        fetcher = self.fetchers.get(site.name)
        if fetcher is None:
            fetcher = self.fetchers[site.name] = site.open(self.s)
        return fetcher

    def close(self):
        self.client.close()
        for fetcher in self.fetchers.values():
            fetcher.close()
        self.fetchers.clear()
        self.browser_slot.close()

    def _invalid(self, job, kind, message, started, result=None):
        """The job has nothing to fetch (no transcript, a removed video): final, with the reason; `result`
        (a refused answer to keep) is written in the same transaction."""
        message = _storable_text(message)
        now = self.clock()
        write = None if result is None else (lambda c: record.write(c, result, now, source=job.source))
        if not self.queue.fail(job, self.name, now, retry.INVALID, kind, message, None, None,
                               _ms_since(started, self.clock), write=write):
            log.warning("%s lost the lease of %s; its failure was not recorded", self.name, job.key)
            return
        log.info("%s %s: %s -> invalid", self.name, job.key, message)

    def _failed(self, job, kind, message, status, retry_after, started, probe=False, result=None):
        """End this attempt as `retry.decide` says; `result` (a site's Result) is written with it."""
        now = self.clock()
        message = _storable_text(message)
        outcome = retry.decide(
            kind, status, job.attempts, self.s.max_attempts, retry_after, self.s.backoff_base_s, rng=self.rng,
            probe=probe,
        )
        new_status = "pending" if outcome.action == retry.RETRY else outcome.action
        available_at = now + outcome.delay_s if outcome.action == retry.RETRY else None
        write = None if result is None else lambda c: record.write(c, result, now, source=job.source)
        if new_status == retry.INVALID and status in retry.GONE:
            # gone from its site: the site may record that (n8n marks a stored template removed, its data
            # kept), in the same transaction
            site = sites.get(job.site)
            gone = site.gone(job)
            write = lambda c: record.write(c, gone, now, iso(now), source=job.source)  # noqa: E731 - a one-line callback
        if not self.queue.fail(job, self.name, now, new_status, kind, message, status, available_at,
                               _ms_since(started, self.clock), counted=outcome.counted, write=write):
            log.warning("%s lost the lease of %s; its failure was not recorded", self.name, job.key)
            return
        # a retry is routine (the supervisor logs one summary per interval); a final failure is news, but for
        # an endpoint that refused every session, which the run's last line says once for all its jobs
        level = logging.DEBUG if new_status == "pending" or kind == retry.BROWSER_UNAVAILABLE else logging.INFO
        log.log(level, "%s %s attempt %d: %s -> %s%s", self.name, job.key, job.attempts, message, new_status,
                f" in {outcome.delay_s:.1f} s" if available_at else "")


def main(settings, slot, parent_pid, run_id=None, clock=None, beat=None, wakeup=None):
    """Entry point of a worker process: its lanes, each opened in its own thread, after the fork; `clock`: the
    run's (`base.clock.SteadyClock` on SQLite), else the database's or the system's. `beat` (a shared double,
    the supervisor's) is set to this process's monotonic time every JOIN_S: a process that stops beating is
    frozen (SIGSTOP, a paused machine), and the supervisor replaces it. `wakeup`: the supervisor's
    `pool.wakeup.Wakeup`, rung when a lane's claims start finding nothing."""
    flags = Flags()
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C goes to the supervisor, which tells us
    signal.signal(signal.SIGTERM, lambda *_: setattr(flags, "stop", True))
    signal.signal(signal.SIGUSR1, lambda *_: setattr(flags, "recycle", True))
    # the supervisor blocked these around the fork: one that came meanwhile is delivered now, to our handler
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORK_BLOCKED)
    name = worker_name(slot, os.getpid(), settings)
    n = lanes_of(settings)
    if n > 1:
        memory.one_malloc_arena()
    codes = [exitcodes.WORKER_CRASHED] * n
    quota = Quota(settings.max_jobs_per_worker)
    threads = [threading.Thread(target=_lane, name=f"{name}/{i}", daemon=True,
                                args=(settings, name, slot, parent_pid, run_id, flags, quota, n, i, codes, clock,
                                      wakeup))
               for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            if beat is not None:
                beat.value = time.monotonic()
            t.join(JOIN_S)     # in slices: the signal handlers run in this thread, between them
    sys.exit(_process_code(codes))


def lanes_of(settings):
    """The jobs each worker keeps in flight: `inflight`, else enough for the sum of the run's domain rates
    (`policy.inflight`); one without a limit (the queue's benchmarks), and one when a source may render
    pages (a lane's browser is its own: the pool's browser slots and memory go further one to a worker)."""
    if settings.inflight is not None:
        return settings.inflight
    if settings.no_limit or any(src.opt("fetcher", "http") in ("browser", "auto") for src in settings.working_sources):
        return 1
    total = sum(settings.rate_for(d)[0] for d in sites.domains(settings)) or settings.rate_per_s
    return inflight.lanes(total, settings.workers)


def _lane(settings, name, slot, parent_pid, run_id, flags, quota, lanes, index, codes, clock=None, wakeup=None):
    """One lane of a worker process: its own connection, limiter, session and Worker loop; its exit code in
    `codes[index]`. A lane that ends for another reason than a stop or a recycle stops the others."""
    code = exitcodes.WORKER_CRASHED
    try:
        code = _run_lane(settings, name, slot, parent_pid, run_id, flags, quota, lanes, clock, wakeup)
    finally:
        codes[index] = code
        if code not in (exitcodes.WORKER_STOPPED, exitcodes.WORKER_RECYCLE):
            flags.stop = True


def _run_lane(settings, name, slot, parent_pid, run_id, flags, quota, lanes, clock=None, wakeup=None):
    try:
        return _work_lane(settings, name, slot, parent_pid, run_id, flags, quota, lanes, clock, wakeup)
    except DatabaseDown:
        # the supervisor's outage ends the run with the one sentence; a worker says only that it stops
        log.warning("%s stops: the database stayed unreachable past db_down_after", name)
        return exitcodes.WORKER_DB_DOWN


def _work_lane(settings, name, slot, parent_pid, run_id, flags, quota, lanes, clock, wakeup):
    try:
        conn, limiter = _open(settings, name, flags, parent_pid)
    except (OSError, DatabaseError, ConfigError) as e:
        if disk.exhausted(settings.db_path, e):
            return exitcodes.WORKER_DISK_FULL      # the supervisor says why, once, and stops the run
        log.error("%s cannot start: %s", name, e)
        return exitcodes.WORKER_CRASHED
    if conn is None:
        return exitcodes.WORKER_STOPPED
    session = polite_client.open_session(settings)
    if clock is None:           # the database's decides on PostgreSQL (the supervisor passes the run's on SQLite)
        clock = polite_client.clock_of(conn)
    pool = proxypool.Pool(settings, conn, session, name, clock, start=slot) if settings.uses_proxies else None
    w = Worker(settings, name, Queue(conn, run_id), limiter, session, flags, clock=clock, parent_pid=parent_pid,
               proxies=pool, lanes=lanes, quota=quota, wakeup=wakeup)
    try:
        return w.run()
    except DatabaseDown:
        raise
    except DiskFull:
        return exitcodes.WORKER_DISK_FULL      # the supervisor says why, once, and stops the run
    except Exception:
        log.exception("%s crashed", name)
        return exitcodes.WORKER_CRASHED
    finally:
        w.close()
        session.close()
        limiter.close()
        conn.close()


def _open(settings, name, flags, parent_pid):
    """(connection, limiter) of a lane; a database that does not answer yet (a worker started during an
    outage) is waited for as an outage is; (None, None) when asked to stop meanwhile."""
    link = store.run_link(settings)

    def attempt():
        conn = store.connect(settings.db_path, link, lock_report_s=settings.lock_report_after_s)
        try:
            return conn, open_limiter(settings, rate_of=rates.limiter_rates(conn, settings))
        except BaseException:
            conn.close()
            raise

    try:
        return attempt()
    except DatabaseUnavailable as e:
        opened = []
        if not Outage(settings, name, lambda: opened.append(attempt()),
                      lambda: flags.stop or os.getppid() != parent_pid).wait(e):
            return None, None
        return opened[0]


def _process_code(codes):
    """The process's exit code from its lanes': a full disk wins (it stops the run), then a crash, then the
    database's outage, then a recycle, then a stop."""
    return next((c for c in (exitcodes.WORKER_DISK_FULL, exitcodes.WORKER_CRASHED, exitcodes.WORKER_DB_DOWN,
                             exitcodes.WORKER_RECYCLE) if c in codes), exitcodes.WORKER_STOPPED)


def _storable_text(text):
    """`text` with anything UTF-8 cannot carry escaped, so a message quoting a hostile answer can be stored."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def worker_name(slot, pid, settings=None):
    """Unique among the workers of one database: on PostgreSQL runs on other machines share it, so the
    host is part of the name."""
    if settings is not None and settings.postgres:
        return f"w{slot}-{pid}@{runstate.host()}"
    return f"w{slot}-{pid}"


def _ms_since(started, clock):
    return int((clock.monotonic() - started) * 1000)


if TYPE_CHECKING:
    def _conforms(ctx: JobClient) -> sites.Context:   # mypy: the worker's Context follows the site seam
        return ctx

    def _errand(jc: JobClient) -> polite_client.Errand:   # and it is an errand of the polite client
        return jc
