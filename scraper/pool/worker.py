"""The worker: claim a job, wait for the domain's rate slot, fetch, extract, record. One job a step."""

import datetime
import logging
import os
import random
import signal
import sys
from typing import TYPE_CHECKING

from scraper import sites
from scraper.base import exitcodes
from scraper.base.clock import SYSTEM, DatabaseClock
from scraper.base.errors import (
    ConfigError,
    DatabaseError,
    FetchError,
    HandedBack,
    JobInvalid,
    ParseError,
    RobotsUnavailable,
)
from scraper.base.urls import domain_of
from scraper.db import fetchlearn, requestlog, runstate, store
from scraper.db import politeness as politeness_rows
from scraper.db.claims import source_levels
from scraper.db.queue import Queue
from scraper.mirror import record
from scraper.net import chromium, http, proxypool
from scraper.policy import retry
from scraper.politeness import domain as politeness
from scraper.politeness import rates
from scraper.politeness.limiter import open_limiter
from scraper.politeness.robots import Robots

log = logging.getLogger(__name__)

FORK_BLOCKED = {signal.SIGINT, signal.SIGTERM}   # blocked around a fork (supervisor), unblocked in the child
FOREVER_S = 10 * 365 * 86400.0   # "for this run": a new run clears it (politeness_rows.new_run)
NAP_S = 1.0                  # a nap between robots.txt tries wakes this often (stop requests, the lease)
IDLE_S = 0.05                # nap when nothing is runnable; short, so the end of a backoff is not missed
SLOT_PATIENCE_S = 1.0        # how long a job waits for a browser slot before it goes back for a slot holder
HANDED_BACK_S = 10.0         # a job handed back for want of a slot is left to the others this long
BROWSER_IDLE_S = 1.0         # a worker with nothing to claim for this long closes its browser (frees its slot)


class Flags:
    """Set by signal handlers, read by the loop (handlers do nothing else)."""

    stop = False
    recycle = False


class Worker:
    """One worker's loop over an open queue, limiter and HTTP session."""

    def __init__(self, settings, name, queue, limiter, session, flags=None, clock=SYSTEM, rng=random,
                 parent_pid=None, proxies=None):
        self.s = settings
        self.proxies = proxies      # net.proxypool.Pool, or None: no proxies anywhere in the settings
        self.parent_pid = parent_pid
        self.name = name
        self.queue = queue
        self.limiter = limiter
        self.session = session
        self.flags = flags or Flags()
        self.clock = clock
        self.rng = rng
        self.jobs_done = 0
        self.sent = 0           # requests the current attempt has sent
        self.fetchers = {}
        self.browser = None     # net.browser.BrowserFetcher, opened by the first page a site renders
        self.idle_since = None  # when claims started finding nothing
        self.handed_back = {}   # {key: monotonic time until which this worker leaves the job to a slot holder}
        self.sites = sites.enabled(settings)
        self.levels = source_levels(settings.working_sources)   # claims prefer the first priority level
        self.domains = sites.domains(settings)
        self.requests_per_job = sites.requests_per_job(settings)
        self._politeness = {}
        self.robots = Robots(settings, queue.conn, clock, on_rate=getattr(limiter, "refresh", lambda domain: None))

    def stopping(self):
        """Asked to stop, or the supervisor is gone (then nobody would watch us)."""
        return self.flags.stop or (self.parent_pid is not None and os.getppid() != self.parent_pid)

    def run(self):
        """Loop until asked to stop or to recycle; returns the exit code."""
        while True:
            if self.stopping():
                return exitcodes.WORKER_STOPPED
            if self.flags.recycle or self.jobs_done >= self.s.max_jobs_per_worker:
                log.info("%s recycling after %d jobs", self.name, self.jobs_done)
                return exitcodes.WORKER_RECYCLE
            if not self.step():
                self.clock.sleep(IDLE_S)

    def step(self, now=None):
        """Claim and process one job; False when no job was runnable."""
        now = self.clock() if now is None else now
        mono = self.clock.monotonic()
        self.handed_back = {key: until for key, until in self.handed_back.items() if until > mono}
        job = self.queue.claim(self.name, now, self.s.lease_s, sites=self.sites, demands=self._demands(),
                               workers=self.s.workers, sources=self.levels, skip_keys=list(self.handed_back))
        if job is None:
            self._idle(now)
            return False
        self.idle_since = None
        self.process(job)
        self.jobs_done += 1
        return True

    def _idle(self, now):
        """Nothing to claim: after BROWSER_IDLE_S, close the worker's browser. Its slot and its memory go to a
        worker that waits for one with a page to render (an idle browser would hold them until the end)."""
        if self.idle_since is None:
            self.idle_since = now
        elif self.browser is not None and now - self.idle_since >= BROWSER_IDLE_S:
            self.browser.retire()

    def _demands(self):
        """Each domain's rate slot, rate and requests per job, so the claim keeps every worker on a
        domain that can send soon (`fairness.plan`; only worth asking when the run has several domains)."""
        if len(self.domains) < 2:
            return None
        return {d: self.politeness_of(d).demand(self.requests_per_job.get(d, 1)) for d in self.domains}

    def process(self, job):
        """One job, contained: whatever goes wrong ends this attempt with a reason, never the worker."""
        started = self.clock.monotonic()
        self.sent = 0       # requests this attempt has sent (a job that sent none may go back for free)
        try:
            self._process(job, started)
        except Exception as e:
            # fetching, decoding, parsing, extracting, storing: a bug or an answer nobody foresaw
            log.exception("%s %s: unexpected %s while processing it", self.name, job.key, type(e).__name__)
            self._failed(job, retry.INTERNAL, f"{type(e).__name__}: {e}", None, None, started)

    def _process(self, job, started):
        """Run the job's site on it; write its Result in the transaction that marks it done."""
        try:
            site = sites.get(job.site)
            if site is None:
                raise JobInvalid("unknown_site", f"no site {job.site!r} in this version of scraper")
            result = self._fetcher(site).fetch(job, _JobContext(self, job))
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

    def _fetcher(self, site):
        """The site's per-process side, opened on its first job (after the fork)."""
        fetcher = self.fetchers.get(site.name)
        if fetcher is None:
            fetcher = self.fetchers[site.name] = site.open(self.s)
        return fetcher

    def close(self):
        if self.proxies is not None:
            self.proxies.flush(force=True)
        for fetcher in self.fetchers.values():
            fetcher.close()
        self.fetchers.clear()
        if self.browser is not None:
            self.browser.close()    # a recycle or the end closes the worker's browser
            self.browser = None

    def _browser(self):
        """The worker's BrowserFetcher (at most one per worker, within the pool's browser slots), made on first use."""
        from scraper.net import browser
        if self.browser is None:
            self.browser = browser.BrowserFetcher(
                browser.require(self.s.browser_path), user_agent=self.s.user_agent,
                slots=browser.BrowserSlots(self.s.browser_lock_path,
                                           chromium.slots_for(self.s.memory_limit_mb, self.s.workers)))
        return self.browser

    def _slot_wait(self, job):
        """What runs between looks for a browser slot while `job` waits for one.

        Every slot is held by workers that keep rendering: waiting on would keep this worker idle, holding its
        job, for as long as they do. So after SLOT_PATIENCE_S (at once while this worker has handed another
        job back: the slots are busy) a job that has sent nothing yet goes back, claimable at once by a slot
        holder and left alone by this worker for HANDED_BACK_S, which works what needs no browser meanwhile;
        a job whose page was already fetched by plain HTTP (it would be fetched twice) asks a holder to close
        its browser after its current page instead."""
        renew = self._renewer(job)
        slot_wait_from = self.clock.monotonic()

        def wait_for_slot():
            renew()
            mono = self.clock.monotonic()
            patience = 0.0 if any(until > mono for until in self.handed_back.values()) else SLOT_PATIENCE_S
            if mono - slot_wait_from < patience:
                return
            if self.sent:
                self.browser.slots.want()
                return
            now = self.clock()
            self.queue.release(job, self.name, now)
            self.handed_back[job.key] = mono + HANDED_BACK_S
            if job.probe:
                self.politeness_of(job.domain).probe_abandoned()
            log.debug("%s handed back %s: no browser slot is free", self.name, job.key)
            raise HandedBack(job.key)

        return wait_for_slot

    def _renewer(self, job):
        """A callable that renews the job's lease (for the waits: a rate slot, a browser slot, a page)."""
        return lambda: self.queue.heartbeat(job, self.name, self.clock(), self.s.lease_s)

    def _browser_ready(self, job):
        self._browser().ready(self._slot_wait(job))

    def _render(self, job, url, allow_domains=(), settle=None):
        """One page in the worker's browser: every request it sends takes its domain's turn (`_gate` for the
        job's domain); (final_url, html), FetchError by the page's status, HandedBack on a stop."""
        from scraper.net import browser
        fetcher = self._browser()
        wait_for_slot = self._slot_wait(job)
        renew = self._renewer(job)

        def gate(request_url):
            domain = domain_of(request_url)
            if domain == job.domain:
                self._robots(job, request_url)      # the page's own requests obey its robots.txt too
                return self._gate(job, request_url)
            verdict = self.politeness_of(domain).before(False, renew, request_url)
            if verdict == politeness.OPENED:
                raise FetchError(retry.NETWORK, f"the breaker of {domain} is open", request_url)
            if verdict != politeness.GO:
                self.queue.release(job, self.name, self.clock())
                raise HandedBack(job.key)

        polite = self.politeness_of(job.domain)
        proxy = self._page_proxy(job)
        try:
            with requestlog.timed(self.queue.conn, job.domain, self.clock, self.queue.run_id, polite.take_waited()):
                status, final_url, html = fetcher.render(
                    url, gate, self.s.browser_deadline_s, self.s.max_answer_bytes, settle=settle,
                    wait=wait_for_slot, allow_domains=allow_domains, proxy=proxy)
                kind = http.kind_of_status(status)
                if kind is not None:
                    raise FetchError(kind, f"HTTP {status} in the browser", url, status)
        except FetchError as e:
            if proxy is not None and not proxy.direct and browser.is_proxy_failure(e):
                # the proxy's fault: quarantined, and the job tried again at once through another, uncounted
                self.proxies.failed(proxy, str(e))
                raise FetchError(retry.PROXY, f"proxy {proxy}: {e}", url, retry_after=0.0) from None
            if proxy is not None:
                self.proxies.carried(proxy)
            polite.failed(e)
            raise
        if proxy is not None:
            self.proxies.carried(proxy)
        polite.answered()
        return final_url, html

    def _page_proxy(self, job):
        """The proxy of a page's browser context (one per context, by the rules of `_send`), or None."""
        pool = self.proxies.list_for(job.source) if self.proxies is not None else ()
        if not pool:
            return None
        self._proxy_usable(job, pool)
        return self.proxies.choose(job.domain, pool) or self._no_proxy(job, pool)

    def _get(self, job, url, max_bytes=None):
        """One polite request: robots.txt first, renew the lease, wait for the slot (and any 429 pause),
        fetch. HandedBack when a stop came first."""
        self._robots(job, url)
        return self._send(job, url, max_bytes)

    def _robots(self, job, url):
        """The URL's host's robots.txt allows it (RobotsDisallowed: the job ends invalid, kind robots).
        While it cannot be fetched the job goes back pending, uncharged, and the domain waits like a down
        site (`Politeness.robots_unavailable`; a probe tries robots.txt once); one over the size cap will
        not shrink by waiting: the domain is given up for the run at once."""
        def get(robots_url, cap):
            try:
                return self._send(job, robots_url, cap, robots_txt=True)
            except FetchError as e:
                if e.kind == retry.PROXY:   # no proxy usable: the job waits for one, robots.txt is not to blame
                    raise _ProxyTry(None, e) from e
                raise

        try:
            self.robots.check(url, job.domain, get, sleep=lambda seconds: self._nap(job, seconds),
                              tries=1 if job.probe else None)
        except _ProxyTry as e:
            raise e.error from None
        except RobotsUnavailable as e:
            now = self.clock()
            b = None if e.why == retry.TOO_LARGE else self.politeness_of(job.domain).robots_unavailable()
            if b is None or b.gave_up:
                politeness_rows.give_up(self.queue.conn, job.domain, str(e), now, now + FOREVER_S)
                log.error("%s %s; its jobs stay pending", self.name, e)
            else:
                log.warning("%s %s; its jobs wait %.0f s, then robots.txt is fetched again", self.name, e,
                            b.open_until - now)
            self.queue.release(job, self.name, now)
            raise HandedBack(job.key) from e

    def _nap(self, job, seconds):
        """Wait between tries of a robots.txt, the lease renewed; on a stop the job is given back."""
        end = self.clock.monotonic() + seconds
        while (left := end - self.clock.monotonic()) > 0:
            if self.stopping():
                self.queue.release(job, self.name, self.clock())
                raise HandedBack(job.key)
            self.queue.heartbeat(job, self.name, self.clock(), self.s.lease_s)
            self.clock.sleep(min(NAP_S, left))

    def _send(self, job, url, max_bytes=None, robots_txt=False):
        """`robots_txt`: a robots.txt fetch, whose 4xx is an answer (no rules), not a failure, in the log.

        With a proxy pool, each try takes the domain's slot first, then a proxy (`_through`): a proxy's fault
        rotates to the next one and tries again at once, uncounted; a 403 through one proxy while another is
        usable bans it for the domain and tries another. A 403 through every one is the site's answer: the
        bans this request made are lifted and the 403 ends the job as without proxies."""
        pool = self.proxies.list_for(job.source) if self.proxies is not None else ()
        if not pool:
            return self._through(job, url, max_bytes, robots_txt, None)
        tried, banned = set(), []
        while True:
            try:
                return self._through(job, url, max_bytes, robots_txt, pool, frozenset(tried))
            except _Forbidden as forbidden:
                proxy = forbidden.proxy
                if not self.proxies.bans_on_403(job.domain, pool, proxy):
                    for p in banned:    # every proxy got the 403: the site's answer, not a ban
                        self.proxies.unban(p, job.domain)
                    raise forbidden.error from None
                self.proxies.ban(proxy, job.domain)
                banned.append(proxy)
                tried.add(proxy)
            except _ProxyFault as fault:
                self.proxies.failed(fault.proxy, str(fault.error))
                tried.add(fault.proxy)

    def _through(self, job, url, max_bytes, robots_txt, pool, avoid=frozenset()):
        """One try: the domain's slot, then the proxy (of `pool`; None: no pool), then the request."""
        if pool is not None:
            self._proxy_usable(job, pool, avoid)       # before the slot: none usable takes no slot
        self._gate(job, url)
        proxy = None
        if pool is not None:
            proxy = self.proxies.choose(job.domain, pool, avoid)
            if proxy is None:
                self._no_proxy(job, pool, avoid)        # they went while we waited for the slot
        self.sent += 1
        polite = self.politeness_of(job.domain)
        try:
            with requestlog.timed(self.queue.conn, job.domain, self.clock, self.queue.run_id, polite.take_waited(),
                                  answered_4xx=robots_txt):
                body = http.fetch(self.session, url, self.s.timeout_s, max_bytes or self.s.max_answer_bytes,
                                  proxy=proxy)
        except FetchError as e:
            if proxy is not None and e.kind == retry.PROXY:
                raise _ProxyFault(proxy, e) from e      # not the site's: its breaker hears nothing
            if proxy is not None:
                self.proxies.carried(proxy)
            polite.failed(e)
            if proxy is not None and e.status == 403 and not proxy.direct:
                raise _Forbidden(proxy, e) from e
            raise
        if proxy is not None:
            self.proxies.carried(proxy)
        polite.answered()
        return body

    def _proxy_usable(self, job, pool, avoid=frozenset()):
        """Some proxy of `pool` can carry a request to the job's domain; else the job waits for one
        (FetchError `proxy`, uncounted, until the next quarantine or ban ends), or, when every proxy has
        been unusable for --give-up-after, the domain is given up for the run (exit 3), as a down site."""
        if not self.proxies.usable(job.domain, [p for p in pool if p not in avoid]):
            self._no_proxy(job, pool, avoid)

    def _no_proxy(self, job, pool, avoid=frozenset()):
        """No proxy of `pool` can carry the job's request (see `_proxy_usable`): raises, always."""
        now = self.clock()
        if job.probe:   # the probe learnt nothing of the site: another job may probe as soon as a proxy is back
            self.politeness_of(job.domain).probe_abandoned()
        if self.proxies.gives_up(job.domain, pool):
            reason = (f"no proxy could carry a request to {job.domain} for {self.s.give_up_after_s:g} s "
                      f"(--give-up-after): {', '.join(map(str, pool))}")
            politeness_rows.give_up(self.queue.conn, job.domain, reason, now, now + FOREVER_S)
            log.error("%s gave up on %s: %s; its jobs stay pending", self.name, job.domain, reason)
            self.queue.release(job, self.name, now)
            raise HandedBack(job.key)
        wait = self.proxies.wait_until(job.domain, pool) - now
        raise FetchError(retry.PROXY, f"no proxy of the pool is usable for {job.domain} "
                                      f"({len(avoid)} failed on this request); next one in {wait:.0f} s",
                         job.url, retry_after=max(wait, 0.0))

    def _gate(self, job, url=None):
        """Ask the job's domain for its turn (lease renewed while waiting); HandedBack, the job released,
        when a stop came first or the domain's breaker opened after the job was taken."""
        polite = self.politeness_of(job.domain)
        verdict = polite.before(job.probe, self._renewer(job), url)
        if verdict == politeness.GO:
            return
        self.queue.release(job, self.name, self.clock())
        if verdict == politeness.OPENED:
            # the breaker opened (a block, failures) after we took the job: send nothing, hand it back
            log.info("%s handed back %s: the breaker of %s is open", self.name, job.key, job.domain)
        else:
            if job.probe:
                polite.probe_abandoned()
            log.info("%s handed back %s", self.name, job.key)
        raise HandedBack(job.key)

    def politeness_of(self, domain):
        """The domain's Politeness (one per domain in this process)."""
        polite = self._politeness.get(domain)
        if polite is None:
            polite = self._politeness[domain] = politeness.Politeness(
                self.s, domain, self.queue, self.limiter, self.name, self.clock, self.stopping)
        return polite

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
            write = lambda c: record.write(c, gone, now, _iso(now), source=job.source)  # noqa: E731 - a one-line callback
        if not self.queue.fail(job, self.name, now, new_status, kind, message, status, available_at,
                               _ms_since(started, self.clock), counted=outcome.counted, write=write):
            log.warning("%s lost the lease of %s; its failure was not recorded", self.name, job.key)
            return
        # a retry is routine (the supervisor logs one summary per interval); a final failure is news
        level = logging.DEBUG if new_status == "pending" else logging.INFO
        log.log(level, "%s %s attempt %d: %s -> %s%s", self.name, job.key, job.attempts, message, new_status,
                f" in {outcome.delay_s:.1f} s" if available_at else "")


def main(settings, slot, parent_pid, run_id=None):
    """Entry point of a worker process: open everything here, after the fork."""
    flags = Flags()
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C goes to the supervisor, which tells us
    signal.signal(signal.SIGTERM, lambda *_: setattr(flags, "stop", True))
    signal.signal(signal.SIGUSR1, lambda *_: setattr(flags, "recycle", True))
    # the supervisor blocked these around the fork: one that came meanwhile is delivered now, to our handler
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORK_BLOCKED)
    name = worker_name(slot, os.getpid(), settings)
    try:
        conn = store.connect(settings.db_path)
        limiter = open_limiter(settings, rate_of=rates.limiter_rates(conn, settings))
    except (OSError, DatabaseError, ConfigError) as e:
        log.error("%s cannot start: %s", name, e)
        sys.exit(exitcodes.WORKER_CRASHED)
    session = http.make_session(settings.user_agent, trust_env=not settings.uses_proxies)
    clock = DatabaseClock(conn.clock) if store.is_postgres(conn) else SYSTEM   # the database's decides on PostgreSQL
    pool = proxypool.Pool(settings, conn, session, name, clock, start=slot) if settings.uses_proxies else None
    w = Worker(settings, name, Queue(conn, run_id), limiter, session, flags, clock=clock, parent_pid=parent_pid,
               proxies=pool)
    try:
        code = w.run()
    except Exception:
        log.exception("%s crashed", name)
        code = exitcodes.WORKER_CRASHED
    finally:
        w.close()
        session.close()
        limiter.close()
        conn.close()
    sys.exit(code)


class _ProxyTry(Exception):
    """How one try through the pool ended, inside `Worker._send` (never outside it): `error`, the
    FetchError, through `proxy`. As such: no proxy was usable (robots.txt is not to blame)."""

    def __init__(self, proxy, error):
        super().__init__(str(error))
        self.proxy, self.error = proxy, error


class _ProxyFault(_ProxyTry):
    """The try failed through the proxy's fault: quarantine it, try the next one."""


class _Forbidden(_ProxyTry):
    """The site answered 403 through `proxy`: maybe a ban, then another proxy."""


class _JobContext:
    """What a site may ask of the worker during one job (scraper.sites.Context)."""

    def __init__(self, worker, job):
        self.w, self.job = worker, job

    def get(self, url):
        return self.w._get(self.job, url)

    def render(self, url, allow_domains=(), settle=None):
        return self.w._render(self.job, url, allow_domains, settle)

    def browser_ready(self):
        self.w._browser_ready(self.job)

    def verdict(self, pattern):
        return fetchlearn.verdict(self.w.queue.conn, self.job.source, pattern)

    def gate(self, url=None):
        if url is not None:
            self.w._robots(self.job, url)
        self.w._gate(self.job, url)

    def answered(self):
        self.w.politeness_of(self.job.domain).answered()

    def failed(self, error):
        self.w.politeness_of(self.job.domain).failed(error)

    def fetched_at(self):
        return _iso(self.w.clock())

    def logged(self, kind, status, ms):
        requestlog.record(self.w.queue.conn, self.w.clock(), self.job.domain, kind, status, ms, self.w.queue.run_id,
                          self.w.politeness_of(self.job.domain).take_waited())


def _storable_text(text):
    """`text` with anything UTF-8 cannot carry escaped, so a message quoting a hostile answer can be stored."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def worker_name(slot, pid, settings=None):
    """Unique among the workers of one database: on PostgreSQL runs on other machines share it, so the
    host is part of the name."""
    if settings is not None and settings.postgres:
        return f"w{slot}-{pid}@{runstate.host()}"
    return f"w{slot}-{pid}"


def _iso(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(timespec="seconds")


def _ms_since(started, clock):
    return int((clock.monotonic() - started) * 1000)


if TYPE_CHECKING:
    def _conforms(ctx: _JobContext) -> sites.Context:   # mypy: the worker's Context follows the site seam
        return ctx
