"""The worker: claim a job, wait for the domain's rate slot, fetch, extract, record. One job a step."""

import datetime
import logging
import os
import random
import signal
import sqlite3
import sys
import time

from . import breaker, http, retry, store
from .errors import FetchError, ParseError
from .limiter import DomainLimiter, NoLimiter
from .queue import Queue
from .sites import n8n

log = logging.getLogger(__name__)

FORK_BLOCKED = {signal.SIGINT, signal.SIGTERM}   # blocked around a fork (supervisor), unblocked in the child
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
        """One job, contained: whatever goes wrong ends this attempt with a reason, never the worker."""
        started = time.monotonic()
        try:
            self._process(job, started)
        except Exception as e:
            # fetching, decoding, parsing, extracting, storing: a bug or an answer nobody foresaw
            log.exception("%s %s: unexpected %s while processing it", self.name, job.key, type(e).__name__)
            self._failed(job, retry.INTERNAL, f"{type(e).__name__}: {e}", None, None, started)

    def _process(self, job, started):
        template_id = int(job.key.split(":", 1)[1])
        try:
            body = self._get(job, n8n.detail_url(self.s.api_url, template_id))
            if body is None:
                return
            try:
                row = n8n.extract(body, _iso(self.clock()))
            except UnicodeEncodeError as e:
                raise _unstorable("answer", e) from None
            if row["id"] != template_id:
                raise ParseError(f"answer is for template {row['id']}, not {template_id}")
            if self.s.with_page and not self._add_page(job, template_id, row):
                return
            _check_storable(row)
        except FetchError as e:
            self._failed(job, e.kind, str(e), e.status, e.retry_after, started, probe=job.probe)
        except ParseError as e:
            self._failed(job, retry.PARSE, str(e), 200, None, started)
        else:
            ms = _ms_since(started)
            ok = self.queue.complete(
                job, self.name, self.clock(), ms, write=lambda c: store.upsert(c, "workflows", row, "id")
            )
            if not ok:
                log.warning("%s lost the lease of %s; its result was not written", self.name, job.key)
            else:
                log.debug("%s done %s in %d ms", self.name, job.key, ms)

    def _add_page(self, job, template_id, row):
        """Add the page's title and tags to `row`; a page that is gone leaves them empty (the API answer
        is the template). False when a stop came first."""
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
            body = http.fetch(self.session, url, self.s.timeout_s, self.s.max_answer_bytes)
        except FetchError as e:
            self._domain_failed(job, e)
            raise
        self._domain_answered(job)
        return body

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
                job.domain,
                lambda b: breaker.on_failure(b, now, s.breaker_failures, s.breaker_open_s, s.max_open_cycles), now
            )
            if b.gave_up and not before.gave_up:
                log.error("%s gave up on %s: %d probes in a row failed (%s); its breaker stays open and its jobs "
                          "stay pending for the next run", self.name, job.domain, b.open_cycles, e)
            elif b.state == breaker.OPEN and before.state != breaker.OPEN:
                log.warning("%s breaker of %s open until +%.0f s (%d failures)",
                            self.name, job.domain, b.open_until - now, b.failures)
        else:
            self._domain_answered(job)

    def _failed(self, job, kind, message, status, retry_after, started, probe=False):
        now = self.clock()
        message = _storable_text(message)
        outcome = retry.decide(
            kind, status, job.attempts, self.s.max_attempts, retry_after, self.s.backoff_base_s, rng=self.rng,
            probe=probe,
        )
        new_status = "pending" if outcome.action == retry.RETRY else outcome.action
        available_at = now + outcome.delay_s if outcome.action == retry.RETRY else None
        if not self.queue.fail(job, self.name, now, new_status, kind, message, status, available_at,
                               _ms_since(started), counted=outcome.counted):
            log.warning("%s lost the lease of %s; its failure was not recorded", self.name, job.key)
            return
        log.info("%s %s attempt %d: %s -> %s%s", self.name, job.key, job.attempts, message, new_status,
                 f" in {outcome.delay_s:.1f} s" if available_at else "")


def main(settings, slot, parent_pid):
    """Entry point of a worker process: open everything here, after the fork."""
    flags = Flags()
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C goes to the supervisor, which tells us
    signal.signal(signal.SIGTERM, lambda *_: setattr(flags, "stop", True))
    signal.signal(signal.SIGUSR1, lambda *_: setattr(flags, "recycle", True))
    # the supervisor blocked these around the fork: one that came meanwhile is delivered now, to our handler
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORK_BLOCKED)
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


def _check_storable(row):
    """ParseError when a text field cannot be stored as it came (a lone surrogate such as "\\ud800" is
    valid JSON but not valid UTF-8): refused with a reason rather than stored altered."""
    for name, value in row.items():
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as e:
                raise _unstorable(f"answer's {name!r}", e) from None


def _unstorable(what, e):
    return ParseError(f"the {what} holds text that is not valid Unicode ({e.reason}: {e.object[e.start:e.end]!a} "
                      f"at character {e.start}); refused rather than stored altered")


def _storable_text(text):
    """`text` with anything UTF-8 cannot carry escaped, so a message quoting a hostile answer can be stored."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def worker_name(slot, pid):
    return f"w{slot}-{pid}"


def _iso(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(timespec="seconds")


def _ms_since(started):
    return int((time.monotonic() - started) * 1000)
