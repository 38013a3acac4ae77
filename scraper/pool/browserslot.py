"""A worker's browsers: at most one local and one remote, each made on the first page a job of a source
rendered there asks for (the job's own source's plan, `Settings.browser_of`). A local browser takes one of
the pool's browser slots (`<db>-browser.lock`, `chromium.slots_for`); a remote one a session of the run's
`browser_sessions` (`<db>-sessions.lock`), the local slots left free. Those that use Playwright (the local
one, a `playwright:` one) go through the thread's one Playwright driver (`net.browser.Driver`); a `cdp:` or
`browserbase` one speaks CDP itself (net/cdp), with no driver.

A job that needs a page waits for a slot; when every slot stays held by workers that keep rendering, the
job goes back to the queue for a slot holder rather than keep this worker idle (`slot_wait`), and while it
does, this worker claims no job of a source whose every page renders there (`claim_levels`); a worker that
holds a browser claims the jobs that render in it first (the local one's first: the pool's scarcest). A
remote session that drops mid-page is the provider's doing: the page is tried again on a new session, within
the same attempt (`render`). A worker with nothing to claim closes its browsers after BROWSER_IDLE_S, so
their slots and memory go to one that waits. The pages themselves go through the worker's polite client
(`politeness.client.Client.render`)."""

import logging
import threading

from scraper.base.errors import FetchError, HandedBack, SessionLost
from scraper.net import chromium
from scraper.policy import retry
from scraper.policy import sessions as picker
from scraper.pool import deadsessions

log = logging.getLogger("scraper.pool.worker")     # the worker's lines, as they always read

SLOT_PATIENCE_S = 1.0        # how long a job waits for a browser slot before it goes back for a slot holder
HANDED_BACK_S = 10.0         # a job handed back for want of a slot is left to the others this long
BROWSER_IDLE_S = 1.0         # a worker with nothing to claim for this long closes its browsers (frees their slots)
LOST_TRIES = 3               # sessions lost under one page before its attempt ends `internal` (a page that kills
                             # the remote browser each time would otherwise be tried for ever)
RENDERS = ("browser", "auto")
# A domain's cap of sessions (`policy.sessions.domain_cap`, Little's law) from its rate and these: a page's time in
# its session, rate waits excluded, and the requests it sends once images, fonts and media are refused. Measured
# on the events catalogue through the CDP stand-in (docs/operations.md): 3 sessions rendered 5.9 pages/s with each
# answer after 250 ms, about 0.5 s a page; a real site answers slower, and a provider's browser is farther: 1 s.
# Each such page sends itself and one script's call (scripts/standin/catalogue_pages.py): 2 requests.
PAGE_S = 1.0
REQUESTS_PER_PAGE = 2
# The picker's strategy: a worker holds one session and renders one page at a time, so `pick` answers it its own
# session whenever that may take the page, and any other's is a wait; the strategy only names which other's
# session would take it (logged). Rendezvous hashing names the same one in every worker's view; no setting,
# as no choice of strategy changes what a worker does.
STRATEGY = "domain-affinity"
MINE = "mine"
_PICKING = threading.Lock()     # a process's lanes share its file locks: they decide one at a time here


class BrowserSlot:
    """The worker's browsers and their slots. `fetchers` {remote: `net.browser.BrowserFetcher`}, made on first
    use; `fetcher` the one used last (None before the first page); `handed_back` {key: (monotonic time until
    which this worker leaves the job to a slot holder, whether it waited for a remote session)}."""

    def __init__(self, settings, client, name):
        self.s, self.client, self.name = settings, client, name
        self.clock = client.clock
        self.fetchers = {}
        self.fetcher = None
        self.driver = None
        self.handed_back = {}
        # {source: renders remote} of the sources whose pages render, and those whose every page does
        self.renders = {src.name: settings.browser_of(src).endpoint.remote for src in settings.working_sources
                        if src.opt("fetcher", "http") in RENDERS}
        self.always = {src.name for src in settings.working_sources if src.opt("fetcher", "http") == "browser"}
        self.placed = None      # the key of the job whose page is placed on the remote session (until it ends)

    def skip_keys(self):
        """The keys of the jobs this worker handed back for want of a slot and still leaves to the others."""
        mono = self.clock.monotonic()
        self.handed_back = {key: held for key, held in self.handed_back.items() if held[0] > mono}
        return list(self.handed_back)

    def _waiting(self, remote):
        """Whether this worker handed back a job for want of a slot of that kind, and still leaves it."""
        mono = self.clock.monotonic()
        return any(until > mono and kind == remote for until, kind in self.handed_back.values())

    def claim_levels(self, levels):
        """The claim's source levels (`claims.source_levels`) as this worker's browsers see them: the sources
        that render in a browser it holds first within each level (local before remote), and none whose every
        page renders where it handed a job back for want of a slot (the slot holders take those)."""
        if not self.renders:
            return levels
        held = [remote for remote in (False, True) if self._holds(remote)]
        skipped = {name for name in self.always if self._waiting(self.renders[name])}
        if not held and not skipped:
            return levels
        out = []
        for level in levels:
            names = [n for n in level if n not in skipped]
            for remote in held:
                first = [n for n in names if self.renders.get(n) is remote]
                out.append(first)
                names = [n for n in names if n not in first]
            out.append(names)
        return [level for level in out if level]

    def _holds(self, remote):
        fetcher = self.fetchers.get(remote)
        return fetcher is not None and fetcher.slots is not None and fetcher.slots.held is not None

    def idle_for(self, seconds):
        """Nothing to claim for `seconds`: after BROWSER_IDLE_S the browsers close (their slots and memory go
        to a worker that waits for one with a page to render; an idle browser would hold them to the end)."""
        if seconds >= BROWSER_IDLE_S:
            for fetcher in self.fetchers.values():
                fetcher.retire()

    def close(self):
        """A recycle or the end closes the worker's browsers."""
        for fetcher in self.fetchers.values():
            fetcher.close()
        self.fetchers.clear()
        self.fetcher = None

    def browser(self, jc):
        """The BrowserFetcher of the job's source's plan (one local and one remote per worker), made on first
        use: a local browser within the pool's browser slots, or a session of the remote endpoint within the
        run's `browser_sessions`."""
        from scraper.net import browser
        plan = self.s.browser_of(self.s.source(jc.source))
        remote = plan.endpoint.remote
        fetcher = self.fetchers.get(remote)
        if fetcher is None:
            if remote:
                slots = browser.BrowserSlots(self.s.sessions_lock_path, plan.sessions)
            else:
                slots = browser.BrowserSlots(self.s.browser_lock_path,
                                             chromium.slots_for(self.s.memory_limit_mb, self.s.workers))
            if self.driver is None:
                self.driver = browser.Driver()
            fetcher = self.fetchers[remote] = self.client.open_browser(slots, plan, self.driver)
        self.fetcher = fetcher
        return fetcher

    def slot_wait(self, jc, fetcher):
        """What runs between looks for a slot of `fetcher` while the job of `jc` (a `pool.jobclient.JobClient`)
        waits for one.

        Every slot is held by workers that keep rendering: waiting on would keep this worker idle, holding its
        job, for as long as they do. So after SLOT_PATIENCE_S (at once while this worker has handed another
        job back for a slot of the same kind: those slots are busy) a job that has sent nothing yet goes back,
        claimable at once by a slot holder and left alone by this worker for HANDED_BACK_S, which works what
        needs no such slot meanwhile; a job whose page was already fetched by plain HTTP (it would be fetched
        twice) asks a holder to close its browser after its current page instead."""
        job, remote = jc.job, fetcher.remote
        slot_wait_from = self.clock.monotonic()

        def wait_for_slot():
            jc.renew()
            mono = self.clock.monotonic()
            patience = 0.0 if self._waiting(remote) else SLOT_PATIENCE_S
            if mono - slot_wait_from < patience:
                return
            if jc.sent:
                fetcher.slots.want()
                return
            jc.release()
            self.handed_back[job.key] = (mono + HANDED_BACK_S, remote)
            if job.probe:
                jc.polite().probe_abandoned()
            log.debug("%s handed back %s: no %s is free", self.name, job.key,
                      "remote browser session" if remote else "browser slot")
            raise HandedBack(job.key)

        return wait_for_slot

    def ready(self, jc):
        """The job's browser launched (or connected) before the job's page sends anything (after a wait for a
        slot); FetchError `browser_unavailable` when a remote endpoint stayed down for browser_wait, or its
        provider refused the key. A remote page goes where `policy.sessions.pick` says (`place`): on this
        worker's session, on a new one, or nowhere yet (a capacity wait, as for a slot: the job may go back)."""
        fetcher = self.browser(jc)
        wait = self.slot_wait(jc, fetcher)
        if fetcher.sessions is None:
            fetcher.ready(wait)
            return
        fetcher.usable()
        if self.placed == jc.job.key and fetcher.connected:
            return      # placed already (before the job's plain HTTP, `browser_ready`)
        try:
            waited = False
            while (answer := self.place(jc, fetcher)) not in (MINE, picker.NEW):
                if not waited:
                    waited = True
                    log.debug("%s %s waits for a remote session (%s)", self.name, jc.job.key,
                              "all busy, or its domain's at its cap" if answer == picker.WAIT
                              else f"session {answer}, another worker's, is free")
                wait()
                self.clock.sleep(chromium.SLOT_WAIT_S)
        finally:
            fetcher.slots.unwant()      # a job that could not go back asked holders to close (`slot_wait`): no more
        self.placed = jc.job.key
        if answer == picker.NEW:
            try:
                fetcher.ready(wait)
            except BaseException:
                self.placed = None
                fetcher.sessions.unreserve()
                raise
            # busy with the page's domain: the reserved row, or the one a session re-created meanwhile made
            fetcher.sessions.placed(jc.job.domain)

    def place(self, jc, fetcher):
        """Where the page of `jc`'s job goes, decided on the run's open sessions (those of live workers) while no
        other worker decides: MINE (this worker's session, marked busy with the job's domain), NEW (a row is
        reserved for the session this worker opens now) or the picker's WAIT or another worker's session id.
        Every session in the view is healthy: one that fails is retired by its own worker at once, and a dead
        worker's holds no connection (left out, so it blocks no new session)."""
        plan = self.s.browser_of(self.s.source(jc.source))
        domain = jc.job.domain
        if not fetcher.connected:
            fetcher.retire()        # a session that died between pages: closed, its slot free
        recorder = fetcher.sessions
        own = str(recorder.row) if fetcher.connected and recorder.row is not None else None
        if fetcher.connected and own is None:
            return MINE     # its figures could not be written: the session serves on regardless
        with _PICKING, fetcher.slots.picking():
            view = [picker.Session(str(r["id"]), active=0 if str(r["id"]) == own else r["active"],
                                   pages=r["pages"], domains=frozenset([r["domain"]] if r["active"] and r["domain"]
                                                                       and str(r["id"]) != own else []))
                    for r in recorder.run_sessions() if not deadsessions.worker_gone(r)]
            answer = picker.pick(domain, view, max_sessions=plan.sessions, session_pages=plan.session_pages,
                                 strategy=STRATEGY, cap=self.cap(domain, plan), own=own)
            if answer == own:
                recorder.placed(domain)
                return MINE
            if answer == picker.NEW:
                recorder.reserve(fetcher.endpoint.kind, str(fetcher.endpoint), domain)
        return answer

    def cap(self, domain, plan):
        """The sessions `domain` may keep busy at once: what its rate feeds (`domain_cap`), all without a limit."""
        if self.s.no_limit:
            return plan.sessions
        return picker.domain_cap(self.client.politeness_of(domain).rate()[0], PAGE_S, REQUESTS_PER_PAGE)

    def job_ended(self):
        """The job is over: a page placed on the session that never began leaves it idle."""
        if self.placed is not None:
            self.placed = None
            fetcher = self.fetchers.get(True)
            if fetcher is not None and fetcher.sessions is not None:
                fetcher.sessions.idle()

    def render(self, jc, url, allow_domains=(), settle=None):
        """One page in the job's browser: every request it sends takes its turn (`JobClient.page_gate`);
        (final_url, html), FetchError by the page's status, HandedBack on a stop. The browser is made ready
        before the page (a remote endpoint's refusals are no request to the site); a remote session lost under
        the page is logged and the page tried again on a new one, uncharged, up to LOST_TRIES times."""
        lost = 0
        while True:
            self.ready(jc)
            try:
                out = self.client.render(jc, self.fetcher, url, jc.page_gate, self.slot_wait(jc, self.fetcher),
                                         allow_domains, settle)
                self.placed = None      # the page ended: its session is idle again (`paged`)
                return out
            except SessionLost as e:
                lost += 1
                if lost == LOST_TRIES:
                    raise FetchError(retry.INTERNAL, f"{e} ({LOST_TRIES} sessions in a row)", url) from None
                log.info("%s %s: %s; the page is tried again on a new session, uncharged", self.name,
                         jc.job.key, e)
