"""The polite client bound to one job: what a site may ask of the worker during the job (`sites.Context`).

Every request goes through the worker's `politeness.client.Client`; what the binding adds is the job's:
its lease renewed while a request waits (for a rate slot, a 429 pause, a robots.txt retry, a browser slot),
the job handed back (released, uncharged) when a stop comes first or the domain's breaker opened after the
job was taken, and the domain given up for the run when its robots.txt or every proxy stays unusable."""

import datetime
import logging

from scraper.base.errors import FetchError, HandedBack
from scraper.db import fetchlearn, requestlog
from scraper.policy import retry
from scraper.politeness import domain as politeness

log = logging.getLogger("scraper.pool.worker")     # the worker's lines, as they always read

FOREVER_S = 10 * 365 * 86400.0   # "for this run": a new run clears it (Queue.new_run, breaker.on_new_run)
NAP_S = 1.0                  # a nap between robots.txt tries wakes this often (stop requests, the lease)
RENEW_SHARE = 0.25           # a lease renewed (or taken) within this share of --lease is not renewed again: it
                             # cannot have run out, and only a run-out lease is taken back from a live worker


class JobClient:
    """One job's errand through the worker's client (`Errand`), and the job's `sites.Context`.

    `browser` (a `pool.browserslot.BrowserSlot`) renders its pages; `stopping()` is the worker's."""

    def __init__(self, client, job, queue, settings, name, stopping, browser=None):
        self.client, self.job, self.queue, self.s, self.name = client, job, queue, settings, name
        self.clock = client.clock
        self.stopping = stopping
        self.browser = browser
        self.source = job.source
        self.probe = job.probe
        self.sent = 0       # requests this attempt has sent (a job that sent none may go back for free)
        self.renewed_at = self.clock.monotonic()    # bound right after the claim, which set the lease

    # --- sites.Context ---------------------------------------------------------------

    def get(self, url):
        """One polite request: robots.txt first, renew the lease, wait for the slot (and any 429 pause),
        fetch. HandedBack when a stop came first."""
        return self.client.get(self, url)

    def render(self, url, allow_domains=(), settle=None):
        return self.browser.render(self, url, allow_domains, settle)

    def browser_ready(self):
        self.browser.ready(self)

    def verdict(self, pattern):
        return fetchlearn.verdict(self.queue.conn, self.source, pattern)

    def gate(self, url=None):
        """The job's domain's turn for a request a library sends itself (robots.txt of `url` first)."""
        if url is not None:
            self.client.check_robots(self, url)
        self.turn(self.polite(), url)

    def answered(self):
        self.polite().answered()

    def failed(self, error):
        self.polite().failed(error)

    def fetched_at(self):
        return iso(self.clock())

    def logged(self, kind, status, ms):
        requestlog.record(self.queue.conn, self.clock(), self.job.domain, kind, status, ms, self.queue.run_id,
                          self.polite().take_waited())

    # --- the errand -------------------------------------------------------------------

    def polite(self):
        return self.client.politeness_of(self.job.domain)

    def domain(self, url):
        return self.job.domain      # every request of the job counts against its domain

    def renew(self):
        """Renew the job's lease (for the waits: a rate slot, a browser slot, a page); False: no longer ours.

        A lease taken or renewed moments ago is left as it is (one write less per request at 100/s)."""
        mono = self.clock.monotonic()
        if mono - self.renewed_at < self.s.lease_s * RENEW_SHARE:
            return True
        if not self.queue.heartbeat(self.job, self.name, self.clock(), self.s.lease_s):
            return False
        self.renewed_at = mono
        return True

    def release(self):
        """Give the job back to the queue, uncharged (its attempt is not counted)."""
        self.queue.release(self.job, self.name, self.clock())

    def hand_back(self):
        """Release the job and say so: HandedBack."""
        self.release()
        raise HandedBack(self.job.key)

    def turn(self, polite, url=None):
        """Ask the job's domain for its turn (lease renewed while waiting); HandedBack, the job released,
        when a stop came first or the domain's breaker opened after the job was taken."""
        verdict = polite.before(self.probe, self.renew, url)
        if verdict == politeness.GO:
            return
        if not self.queue.release(self.job, self.name, self.clock()):
            # frozen past its lease, the job went back and is another's now: the fence refused the hand-back
            log.warning("%s lost the lease of %s; it was not handed back (no longer its)", self.name, self.job.key)
        elif verdict == politeness.OPENED:
            # the breaker opened (a block, failures) after we took the job: send nothing, hand it back
            log.info("%s handed back %s: the breaker of %s is open", self.name, self.job.key, self.job.domain)
        else:
            if self.probe:
                polite.probe_abandoned()
            log.info("%s handed back %s", self.name, self.job.key)
        raise HandedBack(self.job.key)

    def page_gate(self, request_url):
        """The turn of a request a page of the browser sends: the job's domain's (its robots.txt too), or,
        for another domain's, that domain's rate slot and breaker."""
        from scraper.base.urls import domain_of
        domain = domain_of(request_url)
        if domain == self.job.domain:
            self.client.check_robots(self, request_url)     # the page's own requests obey its robots.txt too
            return self.turn(self.polite(), request_url)
        verdict = self.client.politeness_of(domain).before(False, self.renew, request_url)
        if verdict == politeness.OPENED:
            raise FetchError(retry.NETWORK, f"the breaker of {domain} is open", request_url)
        if verdict != politeness.GO:
            self.hand_back()

    def nap(self, seconds):
        """Wait between tries of a robots.txt, the lease renewed; on a stop the job is given back."""
        end = self.clock.monotonic() + seconds
        while (left := end - self.clock.monotonic()) > 0:
            if self.stopping():
                self.hand_back()
            self.renew()
            self.clock.sleep(min(NAP_S, left))

    def robots_unavailable(self, polite, e):
        """While robots.txt cannot be fetched the job goes back pending, uncharged, and the domain waits like
        a down site (`Politeness.robots_unavailable`; a probe tries robots.txt once); one over the size cap
        will not shrink by waiting: the domain is given up for the run at once."""
        now = self.clock()
        b = None if e.why == retry.TOO_LARGE else polite.robots_unavailable()
        if b is None or b.gave_up:
            polite.give_up(str(e), now + FOREVER_S)
            log.error("%s %s; its jobs stay pending", self.name, e)
        else:
            log.warning("%s %s; its jobs wait %.0f s, then robots.txt is fetched again", self.name, e,
                        b.open_until - now)
        self.queue.release(self.job, self.name, now)
        raise HandedBack(self.job.key) from e

    def no_proxy(self, polite, pool, avoid, url):
        """No proxy of `pool` can carry the job's request: the job waits for one (FetchError `proxy`,
        uncounted, until the next quarantine or ban ends), or, when every proxy has been unusable for
        --give-up-after, the domain is given up for the run (exit 3), as a down site. Raises, always."""
        proxies, job = self.client.proxies, self.job
        now = self.clock()
        if self.probe:   # the probe learnt nothing of the site: another job may probe as soon as a proxy is back
            polite.probe_abandoned()
        if proxies.gives_up(job.domain, pool):
            reason = (f"no proxy could carry a request to {job.domain} for {self.s.give_up_after_s:g} s "
                      f"(--give-up-after): {', '.join(map(str, pool))}")
            polite.give_up(reason, now + FOREVER_S)
            log.error("%s gave up on %s: %s; its jobs stay pending", self.name, job.domain, reason)
            self.queue.release(job, self.name, now)
            raise HandedBack(job.key)
        wait = proxies.wait_until(job.domain, pool) - now
        raise FetchError(retry.PROXY, f"no proxy of the pool is usable for {job.domain} "
                                      f"({len(avoid)} failed on this request); next one in {wait:.0f} s",
                         job.url, retry_after=max(wait, 0.0))


def iso(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(timespec="seconds")
