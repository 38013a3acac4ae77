"""A worker's browser: at most one, made on the first page a job renders, within the pool's browser slots (a
remote endpoint's sessions instead: `browser_sessions` across the pool, and the local slots stay free).

A job that needs a page waits for a slot; when every slot stays held by workers that keep rendering, the
job goes back to the queue for a slot holder rather than keep this worker idle (`slot_wait`). A worker
with nothing to claim closes its browser after BROWSER_IDLE_S, so its slot and memory go to one that waits.
The page itself goes through the worker's polite client (`politeness.client.Client.render`)."""

import logging

from scraper.base.errors import HandedBack
from scraper.net import chromium

log = logging.getLogger("scraper.pool.worker")     # the worker's lines, as they always read

SLOT_PATIENCE_S = 1.0        # how long a job waits for a browser slot before it goes back for a slot holder
HANDED_BACK_S = 10.0         # a job handed back for want of a slot is left to the others this long
BROWSER_IDLE_S = 1.0         # a worker with nothing to claim for this long closes its browser (frees its slot)


class BrowserSlot:
    """The worker's browser and its slot. `fetcher` is the `net.browser.BrowserFetcher` (None until the
    first page); `handed_back` {key: monotonic time until which this worker leaves the job to a slot holder}."""

    def __init__(self, settings, client, name):
        self.s, self.client, self.name = settings, client, name
        self.clock = client.clock
        self.fetcher = None
        self.handed_back = {}

    def skip_keys(self):
        """The keys of the jobs this worker handed back for want of a slot and still leaves to the others."""
        mono = self.clock.monotonic()
        self.handed_back = {key: until for key, until in self.handed_back.items() if until > mono}
        return list(self.handed_back)

    def idle_for(self, seconds):
        """Nothing to claim for `seconds`: after BROWSER_IDLE_S the browser closes (its slot and its memory go
        to a worker that waits for one with a page to render; an idle browser would hold them to the end)."""
        if self.fetcher is not None and seconds >= BROWSER_IDLE_S:
            self.fetcher.retire()

    def close(self):
        """A recycle or the end closes the worker's browser."""
        if self.fetcher is not None:
            self.fetcher.close()
            self.fetcher = None

    def _browser(self):
        """The worker's BrowserFetcher (at most one per worker), made on first use: a local browser within the
        pool's browser slots, or a session of the remote endpoint within the run's `browser_sessions`."""
        from scraper.net import browser
        if self.fetcher is None:
            plan = self.s.browser
            if plan.endpoint.remote:
                slots = browser.BrowserSlots(self.s.sessions_lock_path, plan.sessions)
            else:
                slots = browser.BrowserSlots(self.s.browser_lock_path,
                                             chromium.slots_for(self.s.memory_limit_mb, self.s.workers))
            self.fetcher = self.client.open_browser(slots, plan)
        return self.fetcher

    def slot_wait(self, jc):
        """What runs between looks for a browser slot while the job of `jc` (a `pool.jobclient.JobClient`)
        waits for one.

        Every slot is held by workers that keep rendering: waiting on would keep this worker idle, holding its
        job, for as long as they do. So after SLOT_PATIENCE_S (at once while this worker has handed another
        job back: the slots are busy) a job that has sent nothing yet goes back, claimable at once by a slot
        holder and left alone by this worker for HANDED_BACK_S, which works what needs no browser meanwhile;
        a job whose page was already fetched by plain HTTP (it would be fetched twice) asks a holder to close
        its browser after its current page instead."""
        job = jc.job
        slot_wait_from = self.clock.monotonic()

        def wait_for_slot():
            jc.renew()
            mono = self.clock.monotonic()
            patience = 0.0 if any(until > mono for until in self.handed_back.values()) else SLOT_PATIENCE_S
            if mono - slot_wait_from < patience:
                return
            if jc.sent:
                self.fetcher.slots.want()
                return
            jc.release()
            self.handed_back[job.key] = mono + HANDED_BACK_S
            if job.probe:
                jc.polite().probe_abandoned()
            log.debug("%s handed back %s: no browser slot is free", self.name, job.key)
            raise HandedBack(job.key)

        return wait_for_slot

    def ready(self, jc):
        """The browser launched before the job's page sends anything (after a wait for a slot)."""
        self._browser().ready(self.slot_wait(jc))

    def render(self, jc, url, allow_domains=(), settle=None):
        """One page in the worker's browser: every request it sends takes its turn (`JobClient.page_gate`);
        (final_url, html), FetchError by the page's status, HandedBack on a stop."""
        fetcher = self._browser()
        return self.client.render(jc, fetcher, url, jc.page_gate, self.slot_wait(jc), allow_domains, settle)
