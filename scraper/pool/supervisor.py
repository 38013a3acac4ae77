"""The supervisor: the run lock, N worker processes, their memory, signals, progress, the end."""

import dataclasses
import gc
import json
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import time

import psutil

from scraper import sites
from scraper.base import exitcodes
from scraper.base.clock import SYSTEM, DatabaseClock, SteadyClock
from scraper.base.errors import ConfigError, DatabaseDown, DatabaseError, DatabaseUnavailable, DiskFull
from scraper.base.settings import PROGRESS_EVERY_S
from scraper.db import counters, disk, holders, runrecord, runstate, store
from scraper.db.queue import Queue
from scraper.mirror import record, source
from scraper.policy import progress
from scraper.politeness import proxypool
from scraper.pool import deadsessions, memory, orphans, pacing, worker
from scraper.pool.outage import Outage
from scraper.pool.wakeup import Wakeup

log = logging.getLogger(__name__)

TICK_S = 0.05               # the loop wakes at least this often, and at once when a worker dies
SAMPLE_EVERY_S = 1.0        # memory and lease checks
TTY_REFRESH_S = 0.5
# a WAL this large has not been reset for a while: a reader's long transaction keeps checkpoints from passing it
# (the file shrinks back to store.WAL_KEPT_MB once they do); said once, with the reader's name, until it shrinks
WAL_WARN_MB = 256
QUICK_DEATH_S = 2.0         # a worker that dies this soon after its start, holding no job, counts towards a crash loop
MAX_QUICK_DEATHS = 5


@dataclasses.dataclass
class Slot:
    """One worker place: the process in it and what the supervisor knows of it."""

    index: int
    process: multiprocessing.Process = None
    frozen: bool = False        # killed frozen (holding the write lock): its jobs go back for free
    name: str = ""
    recycle_asked_at: float = None
    started_at: float = 0.0
    beat: object = None         # a shared double the worker sets to its monotonic time every worker.JOIN_S


@dataclasses.dataclass
class Retired:
    """A worker replaced because it stopped beating while stopped by a signal (SIGSTOP, Ctrl-Z of it alone):
    told to stop (SIGTERM, delivered when it wakes), its jobs already back; `woke_at`: when it ran again."""

    process: multiprocessing.Process
    name: str
    woke_at: float = None


class Supervisor:
    def __init__(self, settings, out=sys.stderr, clock=SYSTEM, browserless=()):
        self.s = settings
        self.per_job = sites.requests_per_job(settings)    # requests a job sends to its domain (the ETA's floor)
        self.browserless = browserless  # sources left out of this run: they need a browser none can start
        self.out = out
        self.clock = clock
        self.signals = []
        self.slots = [Slot(i) for i in range(settings.workers)]
        self.retired = []           # frozen workers replaced, until they end (`_check_beats`)
        self.ctx = multiprocessing.get_context("fork")   # fast start; each child opens its own resources
        self.tty = hasattr(out, "isatty") and out.isatty()
        self.recycles = 0
        self.restarts = 0
        self.quick_deaths = 0
        self.started_at = None      # wall clock, for the rate window
        self.errors_seen = {}       # error counters at the last summary
        self.run_id = None          # our row of `runs`; the workers record what they finish under it
        self.pool_mb = None         # the pool's PSS in MB as last sampled (None before the first sample)
        self.calm_until = 0.0       # after the database's outage: workers renew or hand back before one counts as stuck
        self.outage_s = 0.0         # the outages lived through and not yet counted (`status` shows them)
        self.losses_seen = 0
        self.disk_full = None       # why the run stops for want of disk space (one sentence), once it must
        self.wal_warned = False     # the WAL's growth past WAL_WARN_MB said, until it shrinks back
        self.wakeup = None          # rung by a worker whose claims start finding nothing (`pool.wakeup`)

    # --- the run ---------------------------------------------------------------------

    def run(self):
        """Work until no job is running and no pending one belongs to a domain still tried (`Queue.work_left`),
        or a signal stops us; returns the exit code.

        On SQLite a run holds the database alone (the run lock). On PostgreSQL many runs, on many machines,
        work it together: each has its `runs` row and heartbeat, and the clock is the database's."""
        lock = None if self.s.postgres else runstate.RunLock(self.s.lock_path).acquire()
        try:
            # SQLite: a short busy timeout: while one of our writes waits for the lock, `_free_the_lock` runs each
            # second; PostgreSQL: held as a run's (`store.run_link`)
            conn = store.open_db(self.s.db_path, store.run_link(self.s), lock_report_s=self.s.lock_report_after_s,
                                 busy_s=SAMPLE_EVERY_S)
        except DatabaseUnavailable as e:    # at the start, as any command: one sentence, exit 2
            if lock is not None:
                lock.release()
            raise ConfigError(str(e)) from None
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        self.queue = Queue(conn)
        if not self.s.postgres:
            conn.while_locked = self._free_the_lock
        self.known = orphans.children()     # not ours to reap: children the caller had before the run
        orphans.subreaper(True)
        self.conn = conn
        if self.s.postgres:
            self.clock = DatabaseClock(conn.clock)
            skew = conn.skew()
            if abs(skew) >= 1.0:
                log.warning("this machine's clock is %.1f s %s the database's; the run decides on the database's "
                            "(leases, pauses, rate slots)", abs(skew), "ahead of" if skew > 0 else "behind")
        elif self.clock is SYSTEM:
            self.clock = SteadyClock()      # the run's one timeline, whatever the wall clock does meanwhile
        try:
            if not self.s.postgres:
                disk.reserve(self.s.reserve_path)       # the space of this run's last writes, should the disk fill
            self._note_unfinished_run(conn)
            if self.s.postgres:
                # other runs may hold running rows: only expired leases are orphans (a dead run's come back
                # as their leases run out)
                taken = self.queue.requeue(self.clock(), expired=True)
            else:
                taken = self.queue.requeue(self.clock())    # we hold the lock: every running row is an orphan
            if taken:
                log.info("took back %d jobs of workers that no longer run", taken)
            # the remote browser sessions dead workers left open (SQLite: every one, we hold the lock)
            live = {r["id"] for r in runrecord.live_runs(conn, self.clock())} if self.s.postgres else set()
            deadsessions.sweep(self.s, conn, self.clock(), lambda r: r["run_id"] not in live)
            self._resume_sites(conn)
            for domain in self.queue.new_run(self.clock()):
                log.info("trying %s again: a previous run gave it up", domain)
            proxypool.check_all(self.s, conn, self.clock)      # with proxy_check_url: each proxy, once
            if not sum(self.queue.counts().values()):
                log.warning("the database has no jobs; run `scraper seed` first")
            self.errors_seen = self._errors()
            self.run_id = self._start_run(conn)
            self.pacing = pacing.Pacing(self.s, conn, self.clock, self.started_at)
            self.pacing.start()
            code = self._loop()
            if code != exitcodes.DB_DOWN:
                try:
                    self._count_outages()
                    # this run's workers that died with a session open (a crash, a kill -9 of one of them)
                    deadsessions.sweep(self.s, conn, self.clock(), self._gone)
                    self._finish_run(conn, self.run_id, code)
                except DatabaseUnavailable as e:    # stopped while the database was away: its row stays open
                    log.warning("the run's end could not be recorded (%s); the next run notes it", e)
                except DiskFull:
                    log.warning("the run's end could not be recorded: the disk under the database is full")
            return code
        except DiskFull as e:       # the run's own first writes (the loop says its own): no job was taken
            log.error("stopping: %s; no job was taken", self._full_disk(e))
            disk.let_go(self.s.reserve_path)
            return exitcodes.DISK_FULL
        finally:
            self._kill_all()
            orphans.kill(self.known)        # what dead workers left (a browser whose watchdog failed)
            orphans.subreaper(False)
            conn.close()
            if lock is not None:
                lock.release()

    def _loop(self):
        prev_handlers = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        self.wakeup = Wakeup()
        # what exists now lives to the end: out of the collector's sight, no collection here or in a forked
        # worker walks it again (fewer pages copied on write; the CPython docs' advice for fork), and the
        # interpreter's last collections at the exit skip it
        gc.freeze()
        try:
            return self._work()
        except DiskFull as e:    # one of our own writes (a heartbeat, a hand-back) met the full disk
            self.disk_full = self.disk_full or self._full_disk(e)
            return self._stop_for_disk()
        finally:
            # after a stop, ours stay: a second Ctrl-C that comes once the workers are gone (the run stops
            # faster than a person presses twice) would otherwise interrupt the run's last writes and turn
            # exit 130 into click's "Aborted!" and 1
            if not self.signals:
                for sig, handler in prev_handlers.items():
                    signal.signal(sig, handler)
            self.wakeup.close()     # a worker still ringing meets a closed pipe: `Wakeup.ring` lets it be

    def _on_signal(self, signum, frame):
        self.signals.append(signum)       # only a flag: the loop acts on it

    def _work(self):
        """The loop, lived through the database's outages: each is waited out (`pool.outage`) while the
        workers wait out their own; one past db_down_after ends the run with exit 69."""
        while True:
            try:
                return self._work_until_outage()
            except DatabaseUnavailable as e:
                code = self._outage(e)
                if code is not None:
                    return code

    def _outage(self, error):
        """Wait for the database; None when it answers again, else the run's exit code."""
        outage = Outage(self.s, "the supervisor", lambda: store.ping(self.conn), lambda: bool(self.signals))
        try:
            if not self.signals and outage.wait(error):
                # leases ran out meanwhile: the workers hand back or renew before any counts as stuck
                self.calm_until = self.clock.monotonic() + self.s.lease_s
                self.outage_s += outage.last_s
                return None
        except DatabaseDown as down:
            log.error("%s", down)
            self._signal_all(signal.SIGTERM)
            self._join_all(self.s.stop_grace_s)
            return exitcodes.DB_DOWN
        log.info("stopping while the database is unreachable: the unfinished jobs come back as their leases expire")
        self._signal_all(signal.SIGTERM)
        self._join_all(self.s.stop_grace_s)
        return exitcodes.SIGINT if self.signals[0] == signal.SIGINT else exitcodes.SIGTERM

    def _count_outages(self):
        """The database's outages the supervisor's session lived through since the last count (one each time
        it was made again, waited for or not), into the counters `status` reads."""
        lost = getattr(self.conn, "losses", 0) - self.losses_seen
        if lost:
            with store.transaction(self.conn) as c:
                counters.bump(c, "db_outages", lost)
                counters.bump(c, "db_outage_s", round(self.outage_s))
            self.losses_seen += lost
            self.outage_s = 0.0

    def _work_until_outage(self):
        self.disk_full = self._under_floor()
        if self.disk_full:
            return self._stop_for_disk()
        for slot in self.slots:
            if slot.process is None:
                self._start(slot)
        next_sample = next_show = next_beat = 0.0
        next_progress = self.clock.monotonic() + runrecord.PROGRESS_EVENT_S     # `run.started` said the rest
        next_summary = self.clock.monotonic() + PROGRESS_EVERY_S
        stop_deadline = None
        while True:
            sentinels = [s.process.sentinel for s in self.slots if s.process is not None]
            if sentinels:
                multiprocessing.connection.wait([*sentinels, self.wakeup], timeout=TICK_S)
                self.wakeup.drain()
            else:
                self.clock.sleep(TICK_S)
            mono = self.clock.monotonic()
            if self.signals and stop_deadline is None:
                log.info("stopping: workers finish or hand back their jobs (again to stop at once)")
                self._signal_all(signal.SIGTERM)
                stop_deadline = mono + self.s.stop_grace_s
            if len(self.signals) > 1 or (stop_deadline is not None and mono > stop_deadline):
                self._kill_all()
            self._reap(restart=stop_deadline is None)
            self.disk_full = self.disk_full or self._under_floor()     # 4 us a tick: `db/disk`
            if self.disk_full:
                return self._stop_for_disk()
            if self.quick_deaths >= MAX_QUICK_DEATHS:
                log.error("workers keep dying right after they start (see the errors above); giving up")
                self._kill_all()
                return exitcodes.CRASHING
            if stop_deadline is not None:
                if all(s.process is None for s in self.slots):
                    if not self.s.postgres:     # other runs' rows are theirs on PostgreSQL
                        self.queue.requeue(self.clock())
                    self._show(final=True)
                    return exitcodes.SIGINT if self.signals[0] == signal.SIGINT else exitcodes.SIGTERM
                continue
            if mono >= next_beat:
                next_beat = mono + runrecord.RUN_HEARTBEAT_S
                runrecord.heartbeat_run(self.conn, self.run_id, self.clock(), self.pool_mb, self.s.memory_limit_mb)
            if mono >= next_progress:
                next_progress = mono + runrecord.PROGRESS_EVENT_S
                with store.transaction(self.conn) as c:
                    runrecord.progress(c, self.run_id, self.clock())
            if mono >= next_sample:
                next_sample = mono + SAMPLE_EVERY_S
                orphans.reap(self.known | {s.process.pid for s in self.slots if s.process is not None}
                             | {r.process.pid for r in self.retired})
                self._check_memory()
                self._count_outages()
                self._check_beats()
                self._kill_stuck()
                self._watch_wal()
                n = self.queue.requeue(self.clock(), expired=True)
                if n:
                    log.warning("took back %d jobs whose lease expired", n)
                self.pacing.adapt(mono)
            if not self._work_left():
                self._signal_all(signal.SIGTERM)
                self._join_all(self.s.stop_grace_s)
                self._summarise_errors()
                self._show(final=True)
                return self._end_code()
            if mono >= next_show:
                next_show = mono + (TTY_REFRESH_S if self.tty else PROGRESS_EVERY_S)
                self._show()
            if mono >= next_summary:
                next_summary = mono + PROGRESS_EVERY_S
                self._summarise_errors()

    def _work_left(self):
        # a disabled or removed source's pending jobs are not waited for (as youtube's with --no-transcripts)
        return self.queue.work_left(sites.enabled(self.s), sources=[src.name for src in self.s.working_sources])

    def _end_code(self):
        self.pacing.robots_summary()
        left = {d: n for d, n in self.queue.given_up().items() if n}
        reasons = self.pacing.gave_up_reasons()
        for domain, n in left.items():
            if domain in reasons:
                log.error("%s; %d job(s) of %s left pending for the next run", reasons[domain], n, domain)
                continue
            log.error("gave up on %s: its breaker stayed open through %d probes in a row; %d job(s) left pending "
                      "for the next run", domain, self.s.max_open_cycles, n)
        # a source that needs a browser none can start is left out of claims and of `_work_left`, as a
        # given-up domain is: its pending jobs wait for the next run, which is what exit 3 says
        waiting = self.browserless and self.queue.work_left(None, sources=list(self.browserless))
        if waiting:
            log.error("left the pending jobs of %s: %s needs a browser and none could be started",
                      ", ".join(self.browserless), "it" if len(self.browserless) == 1 else "each")
        if left or waiting:
            return exitcodes.GAVE_UP
        return exitcodes.FAILED if self.queue.counts()["failed"] else exitcodes.OK

    # --- workers -------------------------------------------------------------------------

    def _start(self, slot):
        # on SQLite the workers keep the run's clock (on PostgreSQL each measures the database's)
        steady = None if self.s.postgres else self.clock
        slot.beat = self.ctx.Value("d", time.monotonic(), lock=False)   # one writer: no lock needed
        p = self.ctx.Process(target=worker.main,
                             args=(self.s, slot.index, os.getpid(), self.run_id, steady, slot.beat, self.wakeup),
                             name=f"worker-{slot.index}")
        # a signal that came between fork and the child's handlers would kill the child or be lost:
        # blocked here, it waits (in both processes) until each has its handler
        old = signal.pthread_sigmask(signal.SIG_BLOCK, worker.FORK_BLOCKED)
        try:
            p.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        slot.process, slot.name, slot.recycle_asked_at = p, worker.worker_name(slot.index, p.pid, self.s), None
        slot.started_at = self.clock.monotonic()

    def _reap(self, restart):
        """Hand back the jobs of workers that ended, and put a fresh worker in their place."""
        for slot in self.slots:
            p = slot.process
            if p is None or p.is_alive():
                continue
            p.join()
            code = p.exitcode
            if slot.frozen:     # killed frozen, holding the write lock: not the job's fault
                slot.frozen = False
                code = exitcodes.WORKER_STOPPED
            if code == exitcodes.WORKER_DISK_FULL:
                # SQLite said the disk is full: its job goes back for free, and the run stops (no restart)
                self.disk_full = self.disk_full or self._full_disk("database or disk is full")
                slot.process = None
                self.queue.requeue(self.clock(), workers=[slot.name])
                continue
            if code in (exitcodes.WORKER_RECYCLE, exitcodes.WORKER_STOPPED, exitcodes.WORKER_DB_DOWN):
                self.queue.requeue(self.clock(), workers=[slot.name])    # a clean hand-back is free
                self.recycles += code == exitcodes.WORKER_RECYCLE
            else:
                # it died holding a job: that attempt counts, so one poisoned job cannot kill workers forever
                again, failed = self.queue.abandon(self.clock(), [slot.name], self.s.max_attempts)
                self.restarts += 1
                log.warning("worker %s died (exit code %s); %d job(s) it held retried later, %d failed as abandoned",
                            slot.name, code, again, failed)
                # only a worker that dies before it holds a job tells of a crash loop
                quick = self.clock.monotonic() - slot.started_at < QUICK_DEATH_S and not (again or failed)
                self.quick_deaths = self.quick_deaths + 1 if quick else 0
            slot.process = None
            if restart and self._work_left():
                self._start(slot)
                log.info("started %s in place of %s", slot.name, worker.worker_name(slot.index, p.pid, self.s))

    def _signal_all(self, sig):
        for slot in self.slots:
            if slot.process is not None and slot.process.is_alive():
                try:
                    os.kill(slot.process.pid, sig)
                except ProcessLookupError:
                    pass

    def _join_all(self, timeout_s):
        # real processes end on the system's time, whatever clock the run reads
        deadline = time.monotonic() + timeout_s
        for slot in self.slots:
            if slot.process is not None:
                slot.process.join(max(0.0, deadline - time.monotonic()))
        self._kill_all()

    def _kill_all(self):
        killed = []
        for r in self.retired:
            if r.process.is_alive():
                r.process.kill()        # a stopped process dies of SIGKILL too
                log.info("%s, replaced while frozen, killed at the run's end", r.name)
            else:
                log.info("%s, replaced while frozen, woke and stopped (exit code %s)", r.name, r.process.exitcode)
            r.process.join()
            killed.append(r.name)
        self.retired = []
        for slot in self.slots:
            if slot.process is not None:
                if slot.process.is_alive():
                    slot.process.kill()
                slot.process.join()
                killed.append(slot.name)
                slot.process = None
        if killed and getattr(self, "queue", None) is not None:
            try:
                self.queue.requeue(self.clock(), workers=killed)
            except DatabaseUnavailable:     # their leases run out instead
                pass
            except DatabaseError as e:     # a full disk: the next run takes every running row back at its start
                log.warning("the jobs of %s stay running until the next run takes them back: %s",
                            ", ".join(killed), e)

    # --- the disk under the database (SQLite) -----------------------------------------------

    def _under_floor(self):
        """The sentence saying the disk under the database is below `min_free_mb`, else None (PostgreSQL's disk
        is its server's)."""
        return None if self.s.postgres else disk.under_floor(self.s.db_path, self.s.min_free_mb)

    def _full_disk(self, error):
        return (f"SQLite says the disk under {disk.folder(self.s.db_path)} is full ({error}; "
                f"{disk.free_mb(self.s.db_path):.0f} MB free)")

    def _watch_wal(self):
        """Say once when the WAL has grown past WAL_WARN_MB, and who keeps checkpoints from resetting it."""
        if self.s.postgres:
            return
        try:
            mb = os.stat(self.s.db_path + "-wal").st_size / 2**20
        except OSError:
            return
        if mb < store.WAL_KEPT_MB:
            self.wal_warned = False
        elif mb > WAL_WARN_MB and not self.wal_warned:
            self.wal_warned = True
            own = {os.getpid()} | {s.process.pid for s in self.slots if s.process is not None}
            log.warning("the database's WAL has grown to %.0f MB: a checkpoint cannot pass a reader's transaction "
                        "(held%s); the run goes on at its rate, and the WAL shrinks back once the reader lets go",
                        mb, holders.described(self.s.db_path, own) or " by a process this machine cannot see")

    def _stop_for_disk(self):
        """Stop for want of space: no job is taken any more, the workers finish or hand back theirs, every
        running row goes back to pending (when even that cannot be written, the next run's start does it);
        exit 74."""
        log.error("stopping: %s; the jobs in flight finish or go back to pending", self.disk_full)
        self._signal_all(signal.SIGTERM)
        self._join_all(self.s.stop_grace_s)
        disk.let_go(self.s.reserve_path)       # the room of the hand-back below and of the run's end
        try:
            self.queue.requeue(self.clock())
            self._show(final=True)
        except DatabaseError as e:
            log.warning("the jobs still running go back to pending at the next run's start: %s", e)
        return exitcodes.DISK_FULL

    def _kill_stuck(self):
        """Kill a live worker whose job's lease ran out: it renews the lease before every request and
        while it waits, and a request ends within --timeout, so it hangs somewhere no deadline reaches
        (a server trickling its headers, a stuck C call). The reaper then charges the job (abandoned)."""
        if self.clock.monotonic() < self.calm_until:
            return
        # a worker stopped by a signal is frozen, not stuck: its job goes back with the lease sweep, and
        # `_check_beats` replaces it once it has been silent for a lease
        live = {s.name: s for s in self.slots
                if s.process is not None and s.process.is_alive() and not _stopped(s.process.pid)}
        stuck = [live[name] for name in self.queue.expired_holders(self.clock()) if name in live]
        for slot in stuck:
            log.warning("%s held its job past the lease: stuck; killed", slot.name)
            slot.process.kill()
            slot.process.join()
        if stuck:
            self._reap(restart=True)    # before the lease sweep, which would hand the job back for free

    def _check_beats(self):
        """Replace a worker that stopped beating (`worker.main` beats every JOIN_S) for longer than a lease.
        Stopped by a signal (SIGSTOP; state T), it is frozen: its jobs go back for free, SIGTERM waits for it
        to wake (it then finishes what it was doing, its late write refused by the fence of every job write:
        the row is no longer its), and a new worker takes its slot at once. One silent but not stopped (a C
        call holding the GIL, swapped out) is left to `_kill_stuck`, as before: killed once its lease runs out."""
        now = time.monotonic()     # the workers beat on the system's clock, whatever clock the run reads
        for slot in self.slots:
            p = slot.process
            if p is None or slot.beat is None or not p.is_alive():
                continue
            silent = now - slot.beat.value
            if silent <= self.s.lease_s:
                continue
            if not _stopped(p.pid):
                continue        # busy or swapped out, not frozen: `_kill_stuck` kills it if its lease runs out
            back = self.queue.requeue(self.clock(), workers=[slot.name])
            os.kill(p.pid, signal.SIGTERM)      # delivered when it wakes: it stops after its current attempt
            self.retired.append(Retired(p, slot.name))
            self.restarts += 1
            old, slot.process = slot.name, None
            if self._work_left():
                self._start(slot)
            log.warning("%s stopped beating %.0f s ago (stopped by a signal, or its machine paused): %d job(s) "
                        "it held went back, %s takes its place; told to stop when it wakes", old, silent, back,
                        slot.name if slot.process is not None else "no worker")
        for r in list(self.retired):
            if not r.process.is_alive():
                r.process.join()
                self.retired.remove(r)
                self.queue.requeue(self.clock(), workers=[r.name])   # what it may have claimed as it woke
                log.info("%s, replaced while frozen, woke and stopped (exit code %s)", r.name, r.process.exitcode)
            elif not _stopped(r.process.pid):
                r.woke_at = r.woke_at or now
                if now - r.woke_at > self.s.stop_grace_s + max(self.s.timeout_s, self.s.browser_deadline_s):
                    log.warning("%s, replaced while frozen, did not stop after it woke; killed", r.name)
                    r.process.kill()

    def _free_the_lock(self, waited):
        """Called while one of our writes waits for the database's write lock (each `SAMPLE_EVERY_S`): a worker
        of ours frozen (stopped by a signal) for a lease while it holds that lock would hold it, and stall the
        run, for as long as it stays frozen. It is killed (its transaction rolls back, the kernel drops its
        lock); `_reap` then hands its jobs back for free and starts a new worker. No write here: we are waiting
        for the lock."""
        now = time.monotonic()
        frozen = {s.process.pid: s for s in self.slots if s.process is not None and s.beat is not None
                  and now - s.beat.value > self.s.lease_s and _stopped(s.process.pid)}
        if not frozen:
            return
        for h in holders.holders(self.s.db_path):
            slot = frozen.get(h.pid)
            if slot is not None and h.holds in (holders.WRITER, holders.EXCLUSIVE):
                log.warning("%s is frozen (stopped by a signal) holding the database's write lock, which every "
                            "writer has waited on for %.0f s: killed, its jobs go back", slot.name, waited)
                slot.frozen = True
                slot.process.kill()

    def _check_memory(self):
        """Keep the pool under --memory-limit, measured as PSS of the whole process tree (`pool.memory`:
        shared pages split, not counted twice; a worker's tree includes the browser it drives). When the pool
        is over, the worker with the largest tree is asked to finish its job and make room (one at a time):
        workers' trees differ (a browser is about BROWSER_MB), so an equal share per worker would not do."""
        me = memory.own_pss(os.getpid())
        used = {s.index: memory.tree_pss(s.process.pid)
                for s in self.slots if s.process is not None and s.process.is_alive()}
        total, limit = me + sum(used.values()), self.s.memory_limit_mb * 2**20
        self.pool_mb = total / 2**20            # written with the heartbeat: status and the dashboard show it
        log.debug("memory (PSS): pool %.0f MB, supervisor %.0f MB, workers %s MB", total / 2**20, me / 2**20,
                  [round(v / 2**20) for v in used.values()])
        now = self.clock.monotonic()
        waiting = [s for s in self.slots if s.recycle_asked_at is not None and s.process is not None]
        for slot in waiting:
            if now - slot.recycle_asked_at > max(self.s.timeout_s, self.s.browser_deadline_s) + self.s.stop_grace_s:
                log.warning("%s did not recycle in time; killed", slot.name)
                slot.process.kill()
        if total <= limit or waiting or not used:
            return
        index = max(used, key=used.get)
        slot = self.slots[index]
        log.info("recycling %s: the pool holds %.0f MB (PSS), over --memory-limit %.0f MB; its processes hold "
                 "%.0f MB, the most", slot.name, total / 2**20, limit / 2**20, used[index] / 2**20)
        slot.recycle_asked_at = now
        os.kill(slot.process.pid, signal.SIGUSR1)

    # --- bookkeeping ------------------------------------------------------------------

    def _gone(self, row):
        """Whether a `browser_sessions` row is this run's and its worker no longer runs."""
        return row["run_id"] == self.run_id and deadsessions.worker_gone(row)

    def _note_unfinished_run(self, conn):
        """A run killed with -9 (or by a reboot) could not say so: say it now, in the log it left."""
        if self.s.postgres:
            for dead in runrecord.dead_runs(conn, self.clock()):
                log.warning("the run pid %d on %s (started %s) stopped without finishing; its jobs come back as "
                            "their leases expire", dead["pid"], dead["host"] or "?",
                            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(dead["started_at"])))
            return
        last = runrecord.last_run(conn)
        if last is not None and last["finished_at"] is None:
            log.warning("the previous run (pid %d, started %s) ended without finishing (killed or crashed); "
                        "resuming where it stopped", last["pid"],
                        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last["started_at"])))

    def _errors(self):
        return {name: n for name, n in self.queue.counters().items() if name.startswith("error:")}

    def _summarise_errors(self):
        """Transient failures are logged at DEBUG by the workers; this is their one INFO line per interval."""
        now = self._errors()
        line = progress.failures_summary(self.errors_seen, now)
        self.errors_seen = now
        if line:
            log.info("%s", line)

    def _eta_floor(self):
        """The least time the jobs left need at their domains' rates (the ETA is never below it)."""
        from scraper.db import sources_report
        conn = self.queue.conn
        rates = {d: self.s.rate_for(d)[0] for d in sites.domains(self.s)}
        rates.update(sources_report.rates_by_domain(conn))
        return progress.eta_floor_s(sources_report.remaining_by_domain(conn), rates, self.per_job)

    def _resume_sites(self, conn):
        """Let each site queue what earlier runs left out (videos of templates stored with transcripts off)."""
        source.own_n8n_jobs(conn, self.s)
        n = record.resume(conn, self.s, self.clock())
        if n:
            log.info("queued %d youtube job(s) that earlier runs left out", n)
        self._requeue_robots(conn)

    def _requeue_robots(self, conn):
        """Jobs that ended `invalid` (robots) on a domain whose robots.txt this run ignores go back to pending
        (youtube.com's only when transcripts are on: nothing else works them)."""
        from scraper.base.settings import YOUTUBE_DOMAIN
        from scraper.db import requeue
        every = self.s.robots == "ignore"
        domains = [d for d in self.s.robots_ignore if d != YOUTUBE_DOMAIN or self.s.transcripts]
        if not (every or domains):
            return
        moved = requeue.robots_invalid(conn, domains, self.clock(), every_domain=every)
        for domain, n in sorted(moved.items()):
            log.info("re-queued %d job(s) of %s that ended invalid (robots): its robots.txt is ignored in this run",
                     n, domain)

    def _start_run(self, conn):
        self.started_at = self.clock()
        # a ping URL's path is its secret: kept out of the runs row, like the contact in the user agent and the keys
        settings = {k: v for k, v in dataclasses.asdict(self.s).items()
                    if k not in ("user_agent", "ping_url", "notify_url", "webhooks", "etl_key", "browserbase_key")}
        settings["db_path"] = self.s.db_shown     # never a password
        return runrecord.start_run(conn, os.getpid(), self.started_at, self.s.workers, json.dumps(settings),
                                   runstate.host(), [src.name for src in self.s.working_sources])

    def _finish_run(self, conn, run_id, code):
        counts, own = self.queue.counts(), self.queue.run_counts(run_id)
        runrecord.finish_run(conn, run_id, self.clock(), counts, code)
        # what this run did (as `report` shows it), then what the database holds
        log.info("run finished: %d done in this run (%d failed, %d invalid); the database holds %d done, "
                 "%d failed, %d invalid, %d pending; %d recycles, %d restarts; exit %d",
                 own["done"], own["failed"], own["invalid"], counts["done"], counts["failed"], counts["invalid"],
                 counts["pending"], self.recycles, self.restarts, code)

    def _left(self):
        """{status: jobs} of the sources this run works (the others' pending jobs are not its work)."""
        from scraper.db import sources_report
        mine = {src.name for src in self.s.working_sources}
        left = {}
        for name, counts in sources_report.jobs_by_source(self.queue.conn).items():
            if name in mine:
                for status, n in counts.items():
                    left[status] = left.get(status, 0) + n
        return left

    def _show(self, final=False):
        now = self.clock()
        window = progress.rate_window_s(now, self.started_at)
        p = progress.of_run(self.queue.run_counts(self.run_id), self._left(), self.queue.finished_since(now - window),
                            window, self._eta_floor())
        note = progress.domains_note(self.queue.domains(), now)
        note = f" | {note}" if note else ""
        if self.tty:
            end = "\n" if final else ""
            self.out.write("\r" + progress.line(p) + note + end)
            self.out.flush()
        else:
            log.info("progress %s%s", progress.line(p, width=0), note)


def _stopped(pid):
    """Whether the process is stopped by a signal (SIGSTOP, SIGTSTP) or traced: frozen, not stuck."""
    try:
        return psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
    except psutil.Error:
        return False


def run(settings, browserless=()):
    """`scraper run`: the exit code (RunLocked propagates, for the CLI to turn into 75); `browserless`: the
    sources left out of `settings.run_sources` because they need a browser none can start (exit 3)."""
    return Supervisor(settings, browserless=browserless).run()
