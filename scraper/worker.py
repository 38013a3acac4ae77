"""The worker: claim a job, wait for the domain's rate slot, fetch, extract, record. One job a step."""

import datetime
import logging
import os
import random
import signal
import sqlite3
import sys
import time

from . import answers, breaker, http, retry, store
from .errors import FetchError, ParseError
from .limiter import DomainLimiter, NoLimiter
from .queue import Queue
from .sites import n8n

log = logging.getLogger(__name__)

IDLE_S = 0.05                # nap when nothing is runnable; short, so the end of a backoff is not missed
ACQUIRE_SLICE_S = 5.0        # a wait for a rate slot is cut in slices, the lease is renewed between them

# worker exit codes the supervisor tells apart
EXIT_STOPPED = 0             # asked to stop (signal, or the supervisor went away)
EXIT_RECYCLE = 3             # finished its quota of jobs or was over its memory share: start a fresh one


class Flags:
    """Set by signal handlers, read by the loop (handlers do nothing else)."""

    stop = False
    recycle = False


class Worker:
    """One worker's loop over an open queue, limiter and HTTP session."""

    def __init__(self, settings, name, queue, limiter, session, flags=None, clock=time.time, rng=random,
                 parent_pid=None):
        self.s = settings
        self.parent_pid = parent_pid
        self.name = name
        self.queue = queue
        self.limiter = limiter
        self.session = session
        self.flags = flags or Flags()
        self.clock = clock
        self.rng = rng
        self.jobs_done = 0

    def stopping(self):
        """Asked to stop, or the supervisor is gone (then nobody would watch us)."""
        return self.flags.stop or (self.parent_pid is not None and os.getppid() != self.parent_pid)

    def run(self):
        """Loop until asked to stop or to recycle; returns the exit code."""
        while True:
            if self.stopping():
                return EXIT_STOPPED
            if self.flags.recycle or self.jobs_done >= self.s.max_jobs_per_worker:
                log.info("%s recycling after %d jobs", self.name, self.jobs_done)
                return EXIT_RECYCLE
            if not self.step():
                time.sleep(IDLE_S)

    def step(self, now=None):
        """Claim and process one job; False when no job was runnable."""
        now = self.clock() if now is None else now
        job = self.queue.claim(self.name, now, self.s.lease_s)
        if job is None:
            return False
        self.process(job)
        self.jobs_done += 1
        return True

    def process(self, job):
        started = time.monotonic()
        template_id = int(job.key.split(":", 1)[1])
        try:
            body = self._get(job, n8n.detail_url(self.s.api_url, template_id))
            if body is None:
                return
            fetched_at = _iso(self.clock())
            row = n8n.extract(body, fetched_at)
            if row["id"] != template_id:
                raise ParseError(f"answer is for template {row['id']}, not {template_id}")
            raw = {answers.API: body}
            if self.s.with_page and not self._add_page(job, template_id, row, raw):
                return
        except FetchError as e:
            self._failed(job, e.kind, str(e), e.status, e.retry_after, started)
        except ParseError as e:
            self._failed(job, retry.PARSE, str(e), 200, None, started)
        else:
            ms = _ms_since(started)
            ok = self.queue.complete(
                job, self.name, self.clock(), ms, write=lambda c: answers.store(c, row, raw, fetched_at)
            )
            if not ok:
                log.warning("%s lost the lease of %s; its result was not written", self.name, job.key)
            else:
                log.debug("%s done %s in %d ms", self.name, job.key, ms)

    def _add_page(self, job, template_id, row, raw):
        """Add the page's title and tags to `row` and the page to `raw`; a page that is gone leaves them
        empty (the API answer is the template). False when a stop came first."""
        try:
            page = self._get(job, n8n.page_url(self.s.site_url, template_id))
        except FetchError as e:
            if e.status not in retry.GONE:
                raise
            log.info("%s %s: no page (%s); stored without it", self.name, job.key, e)
            return True
        if page is None:
            return False
        row.update(n8n.extract_page(page.decode("utf-8", "replace")))
        raw[answers.PAGE] = page
        return True

    def _get(self, job, url):
        """One polite request: renew the lease, wait for the slot (and any 429 pause), fetch.
        None when a stop came first (the job is handed back).

        Nothing that can wait on a lock sits between the slot and the request: a request that left
        late would arrive bunched with the next ones and eat the burst margin."""
        while True:
            if not self.queue.heartbeat(job, self.name, self.clock(), self.s.lease_s):
                raise FetchError(retry.NETWORK, "lease lost before the request", url=url)
            if not self._wait_for_slot(job):
                self.queue.release(job, self.name, self.clock())
                if job.probe:
                    self.queue.update_domain(job.domain, breaker.on_probe_abandoned, self.clock())
                log.info("%s handed back %s", self.name, job.key)
                return None
            paused_until = self.queue.domains().get(job.domain, breaker.Breaker()).paused_until
            if paused_until <= self.clock():
                break
            # the domain was paused (429) after we took the job: wait it out, then take a new slot
            while paused_until > self.clock() and not self.stopping():
                time.sleep(min(0.25, paused_until - self.clock()))
                if not self.queue.heartbeat(job, self.name, self.clock(), self.s.lease_s):
                    raise FetchError(retry.NETWORK, "lease lost during a 429 pause", url=url)
        try:
            resp = http.fetch(self.session, url, self.s.timeout_s)
        except FetchError as e:
            self._domain_failed(job, e)
            raise
        self._domain_answered(job)
        return resp.content

    def _wait_for_slot(self, job):
        while not self.limiter.acquire(job.domain, ACQUIRE_SLICE_S, self.stopping):
            if self.stopping():
                return False
            if not self.queue.heartbeat(job, self.name, self.clock(), self.s.lease_s):
                return False
        return True

    def _domain_answered(self, job):
        b = self.queue.domains().get(job.domain)
        if b is not None and (b.state != breaker.CLOSED or b.failures or b.pause_s):
            before, _ = self.queue.update_domain(job.domain, breaker.on_success, self.clock())
            if before.state != breaker.CLOSED:
                log.info("%s breaker of %s closed (was %s)", self.name, job.domain, before.state)

    def _domain_failed(self, job, e):
        now = self.clock()
        s = self.s
        if e.kind == retry.HTTP_429:
            _, b = self.queue.update_domain(
                job.domain, lambda b: breaker.on_429(b, now, e.retry_after, s.pause_429_s, s.pause_max_s), now
            )
            log.warning("%s 429 from %s: domain paused for %.1f s", self.name, job.domain, b.paused_until - now)
        elif e.kind in retry.BREAKER_KINDS:
            before, b = self.queue.update_domain(
                job.domain, lambda b: breaker.on_failure(b, now, s.breaker_failures, s.breaker_open_s), now
            )
            if b.state == breaker.OPEN and before.state != breaker.OPEN:
                log.warning("%s breaker of %s open until +%.0f s (%d failures)",
                            self.name, job.domain, b.open_until - now, b.failures)
        else:
            self._domain_answered(job)

    def _failed(self, job, kind, message, status, retry_after, started):
        now = self.clock()
        outcome = retry.decide(
            kind, status, job.attempts, self.s.max_attempts, retry_after, self.s.backoff_base_s, rng=self.rng
        )
        new_status = "pending" if outcome.action == retry.RETRY else outcome.action
        available_at = now + outcome.delay_s if outcome.action == retry.RETRY else None
        write = None
        if new_status == retry.INVALID and status in retry.GONE:
            # gone from n8n.io: a stored template is marked removed (its data kept), in the same transaction
            template_id = int(job.key.split(":", 1)[1])
            write = lambda c: answers.mark_removed(c, template_id, _iso(now))  # noqa: E731 - a one-line callback
        if not self.queue.fail(job, self.name, now, new_status, kind, message, status, available_at,
                               _ms_since(started), counted=outcome.counted, write=write):
            log.warning("%s lost the lease of %s; its failure was not recorded", self.name, job.key)
            return
        # a retry is routine (the supervisor logs one summary per interval); a final failure is news
        level = logging.DEBUG if new_status == "pending" else logging.INFO
        log.log(level, "%s %s attempt %d: %s -> %s%s", self.name, job.key, job.attempts, message, new_status,
                f" in {outcome.delay_s:.1f} s" if available_at else "")


def main(settings, slot, parent_pid):
    """Entry point of a worker process: open everything here, after the fork."""
    flags = Flags()
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C goes to the supervisor, which tells us
    signal.signal(signal.SIGTERM, lambda *_: setattr(flags, "stop", True))
    signal.signal(signal.SIGUSR1, lambda *_: setattr(flags, "recycle", True))
    name = worker_name(slot, os.getpid())
    try:
        conn = store.connect(settings.db_path)
        limiter = (DomainLimiter(settings.limiter_path, settings.rate_per_s, settings.burst)
                   if settings.limiter else NoLimiter())
    except (OSError, sqlite3.Error) as e:
        log.error("%s cannot start: %s", name, e)
        sys.exit(1)
    session = http.make_session(settings.user_agent)
    try:
        code = Worker(settings, name, Queue(conn), limiter, session, flags, parent_pid=parent_pid).run()
    except Exception:
        log.exception("%s crashed", name)
        code = 1
    finally:
        session.close()
        limiter.close()
        conn.close()
    sys.exit(code)


def worker_name(slot, pid):
    return f"w{slot}-{pid}"


def _iso(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(timespec="seconds")


def _ms_since(started):
    return int((time.monotonic() - started) * 1000)
