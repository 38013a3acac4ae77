"""Issue 17's "done when", with real processes: `scraper seed` then `scraper run --workers 4` against the
events stand-in (static /events/ pages, script-rendered /live/ pages whose script fetches one JSON more),
real SQLite, the system's Chromium. `fetcher = "auto"` stores every event within the rate, rendering each
script-rendered page about once; `fetcher = "http"` ends those pages `incomplete`; a source that needs a
browser none can start is left pending, the others worked, exit 3; no Chromium outlives the run, nor a
kill -9 of the whole process group."""

import json
import os
import signal
import subprocess
import sys
import threading

import psutil
import pytest

from scraper.base import exitcodes
from scraper.net import browser
from scraper.pool import memory
from scripts.standin import client
from tests import warm
from tests.helpers import rows, wait_gone, wait_until, write

RATE, BURST = 12, 4
GB = 2**30
EVENTS = 120                # a quarter script-rendered: enough pages that learning the pattern is amortised

needs_chromium = pytest.mark.skipif(browser.problem("chromium") is not None,
                                    reason="no Chromium on PATH (apt-get install chromium) or no Playwright")


def sources(url, fetcher, include=r"^/(events|live)/", name="events", extra=""):
    return f"""
[[source]]
name = "{name}"
kind = "catalogue"
rate = {RATE}
burst = {BURST}
site = "{url}/"
include = ["{include}"]
type = "Event"
required = ["name", "startDate"]
fields = {{ organizer = "css:.organizer::text", venue = "jsonld:location.name" }}
fetcher = "{fetcher}"
{extra}
"""


def env(tmp_path, text, **extra):
    return {**os.environ, "SCRAPER_DB": str(tmp_path / "jobs.db"), "SCRAPER_SOURCES": write(tmp_path, text),
            "SCRAPER_TRANSCRIPTS": "0", "SCRAPER_API_URL": client.LOOPBACK_URL + "9/api",
            "SCRAPER_SITE_URL": client.LOOPBACK_URL + "9", **extra}


def scraper(e, *args, timeout=300):
    return warm.run([sys.executable, "-m", "scraper", *args], env=e, capture_output=True, text=True,
                    timeout=timeout)


class Watch:
    """Samples the scraper's whole process tree while it runs: the peak PSS, every Chromium pid seen, and the
    most browsers seen at once (Chromium processes whose parent is not one)."""

    def __init__(self, pid):
        self.pid, self.peak, self.chromium, self.at_peak = pid, 0, set(), {}
        self.browsers = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        # twice a second, each process's PSS read once: the kernel walks every page table to answer
        # (smaps_rollup), and at 4 looks a second, a peak read twice, this thread was a sixth of the test's CPU
        while not self.stop.is_set():
            procs = memory.tree(self.pid)
            each = [(p, memory.usage([p])[0]) for p in procs]
            pss = sum(n for _, n in each)
            if pss > self.peak:     # what the peak was made of: python processes, Chromium, Playwright's node
                self.peak, self.at_peak = pss, {}
                for p, n in each:
                    try:
                        kind = p.name().lower()[:12]
                    except psutil.Error:
                        continue
                    self.at_peak[kind] = self.at_peak.get(kind, 0) + n // 2**20
            leaders = 0
            for p in procs:
                try:
                    if "chrom" in p.name().lower():
                        self.chromium.add(p.pid)
                        # a live one (an exited child not yet reaped is no browser)
                        leaders += p.status() != psutil.STATUS_ZOMBIE \
                            and "chrom" not in psutil.Process(p.ppid()).name().lower()
                except psutil.Error:
                    continue
            self.browsers = max(self.browsers, leaders)
            self.stop.wait(0.5)

    def done(self):
        self.stop.set()
        self.thread.join()


def run_watched(e, *args, kill_when=None):
    """`scraper run ARGS` in a session of its own, its tree sampled; with `kill_when(watch)`, kill -9 of
    its whole process group once that is true. Returns (exit code, stderr, Watch)."""
    proc = warm.Popen([sys.executable, "-m", "scraper", "run", *args], env=e, stdout=subprocess.DEVNULL,
                      stderr=subprocess.PIPE, text=True, start_new_session=True)
    watch = Watch(proc.pid)
    try:
        if kill_when is not None:
            wait_until(lambda: kill_when(watch) or proc.poll() is not None, timeout=240, every=0.1)
            os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        watch.done()
    return proc.returncode, err, watch


@pytest.fixture
def calendar():
    # seed 7: 3 of its 30 script-rendered pages are re-checks (fetchmode.is_recheck), the expected tenth
    with client.start(catalogue=True, events=EVENTS, seed=7, rate=RATE, burst=BURST) as site:
        yield site


@pytest.fixture
def small_calendar():
    """A third of the calendar: kill -9 and resume need a few rendered pages before and after, not many."""
    with client.start(catalogue=True, events=EVENTS // 3, seed=7, rate=RATE, burst=BURST) as site:
        yield site


def stored(db):
    return {r["url"]: json.loads(r["record"]) for r in rows(db, "SELECT url, record FROM items")}


def live_page_requests(stats):
    return sum(n for path, n in stats["by_path"].items() if path.startswith("/live/"))


@pytest.mark.timing      # Chromium, a PSS peak, rate windows: after the parallel phase (`make test`)
@pytest.mark.wide        # dozens of pages in Chromium: alone, on every CPU, before the lanes
@pytest.mark.chromium
@pytest.mark.cold         # a PSS peak of new interpreters
@needs_chromium
@pytest.mark.slow
def test_auto_stores_every_event_rendering_each_script_page_about_once_within_rate_and_memory(calendar, tmp_path):
    # `settle`: a page is read once its organizer is there (on a /live/ page the script adds it with the
    # JSON-LD), not after half a second without network; the kill -9 test below keeps the network-idle wait
    e = env(tmp_path, sources(calendar.url, "auto", extra='settle = ".organizer"'))
    seeded = scraper(e, "seed")
    assert seeded.returncode == 0, seeded.stderr[-2000:]
    code, err, watch = run_watched(e, "--workers", "4")
    assert code == exitcodes.OK, err[-3000:]
    truth = calendar.truth()["events"]
    got = stored(tmp_path / "jobs.db")
    assert set(got) == {t["url"] for t in truth}
    for t in truth:
        rec = got[t["url"]]
        assert (rec["name"], rec["startDate"], rec["endDate"], rec["organizer"], rec["venue"]) == \
            (t["name"], t["startDate"], t["endDate"], t["organizer"], t["location_name"]), t["url"]
    stats = calendar.stats()
    live = [t for t in truth if t["script_rendered"]]
    per_page = live_page_requests(stats) / len(live)
    print(f"\n{len(live)} script-rendered pages, {per_page:.2f} requests each; peak PSS "
          f"{watch.peak / 2**20:.0f} MB ({watch.at_peak}); max in 1 s {stats['max_in_1s']}; "
          f"{stats['requests']} requests")
    assert per_page <= 1.3, stats["by_kind"]
    assert stats["by_kind"]["live_json"] >= len(live)           # the browser's XHR reached the site, counted
    assert stats["http_429"] == 0 and stats["max_in_1s"] <= RATE + BURST
    assert 0 < watch.peak < GB
    assert watch.chromium and wait_gone(watch.chromium, -1) == []
    fetch = json.loads(scraper(e, "sources", "--json").stdout)[0]["fetch"]
    verdicts = {p["pattern"]: p["verdict"] for p in fetch["patterns"]}
    assert verdicts == {"/events/{slug}-{n}": "http", "/live/{slug}-{n}": "browser"}
    assert fetch["browser"] >= len(live) and fetch["http"] >= EVENTS - len(live)


@pytest.mark.timing      # Chromium, a PSS peak, rate windows: after the parallel phase (`make test`)
@pytest.mark.wide        # dozens of pages in Chromium: alone, on every CPU, before the lanes
@pytest.mark.chromium
@pytest.mark.cold         # a PSS peak of new interpreters
@needs_chromium
@pytest.mark.slow
def test_no_chromium_is_left_after_kill_9_of_the_group_and_the_resumed_run_completes(small_calendar, tmp_path):
    calendar = small_calendar
    e = env(tmp_path, sources(calendar.url, "auto", include="^/live/"))
    assert scraper(e, "seed").returncode == 0
    db = tmp_path / "jobs.db"

    def some_rendered(watch):
        return len(watch.chromium) > 0 and len(stored(db)) >= 3

    _, _, killed = run_watched(e, "--workers", "4", kill_when=some_rendered)
    assert killed.chromium and wait_gone(killed.chromium, -1) == []
    code, err, resumed = run_watched(e, "--workers", "4")
    assert code == exitcodes.OK, err[-3000:]
    assert len(stored(db)) == sum(1 for t in calendar.truth()["events"] if t["script_rendered"])
    assert wait_gone(resumed.chromium, -1) == [] and resumed.peak < GB
    assert calendar.stats()["http_429"] == 0


@pytest.mark.slow
def test_over_plain_http_script_rendered_pages_end_incomplete_naming_their_missing_fields(calendar, tmp_path):
    e = env(tmp_path, sources(calendar.url, "http", include="^/live/"))
    assert scraper(e, "seed").returncode == 0
    done = scraper(e, "run", "--workers", "4")
    assert done.returncode == exitcodes.FAILED, done.stderr[-2000:]
    jobs = rows(tmp_path / "jobs.db", "SELECT status, error_kind, last_error FROM jobs")
    assert jobs and {(j["status"], j["error_kind"]) for j in jobs} == {("failed", "incomplete")}
    assert all("name, startDate" in j["last_error"] for j in jobs)
    assert not stored(tmp_path / "jobs.db")


@pytest.mark.slow
def test_a_source_that_needs_a_browser_none_can_start_stays_pending_the_others_are_worked_exit_3(calendar, tmp_path):
    text = (sources(calendar.url, "auto", include="^/live/", name="live")
            + sources(calendar.url, "http", include="^/events/"))
    e = env(tmp_path, text, SCRAPER_BROWSER="/nonexistent")
    seeded = scraper(e, "seed")
    assert seeded.returncode == 0, seeded.stderr[-2000:]
    sentence = "install Debian's chromium or set --browser-path"
    assert sentence in seeded.stderr and "live left pending" in seeded.stderr
    done = scraper(e, "run", "--workers", "2")
    assert done.returncode == exitcodes.GAVE_UP, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert sentence in lines[0] and "Traceback" not in done.stderr
    assert "need a browser" in lines[-1] and "--browser-path" in lines[-1]
    by_source = {(r["source"], r["status"]): r["n"] for r in rows(
        tmp_path / "jobs.db", "SELECT source, status, COUNT(*) AS n FROM jobs GROUP BY 1, 2")}
    assert by_source[("live", "pending")] > 0 and ("live", "done") not in by_source
    assert by_source[("events", "done")] > 0 and ("events", "pending") not in by_source
    assert rows(tmp_path / "jobs.db", "SELECT attempts FROM jobs WHERE source = 'live' AND attempts > 0") == []
    assert calendar.stats()["by_kind"].get("live_page", 0) == 0
