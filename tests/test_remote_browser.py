"""Remote browsers (issue 42): the browser_* keys, run-wide and per source, and what they refuse."""

import contextlib
import http.server as http_server
import json
import os
import socket
import textwrap
import threading
import time
import types
import urllib.request

import psutil
import pytest

from scraper.base import endpoints, exitcodes, sources
from scraper.base import settings as settings_mod
from scraper.base.errors import ConfigError, FetchError, HandedBack
from scraper.db import browsersessions, runstate, store
from scraper.db.queue import Queue
from scraper.net import browser, http
from scraper.politeness.limiter import NoLimiter
from scraper.pool import browserslot, worker
from scraper.products import status
from scripts.standin import client
from tests import test_fetcher_auto as auto
from tests.helpers import count, invoke, rows, script_page, wait_gone, wait_until

TOKEN = "tok-5f3a9c"


@pytest.mark.parametrize(("value", "said"), [
    ("playwright:http://127.0.0.1:3000/", "playwright: must be followed by a ws(s) URL."),
    ("cdp:ftp://127.0.0.1/?token=" + TOKEN, "cdp: must be followed by an http(s) or ws(s) URL."),
    ("chrome", "it must be local, cdp:URL"),
])
def test_an_endpoint_that_is_none_of_the_kinds_is_one_sentence_naming_no_secret(value, said):
    with pytest.raises(ConfigError) as e:
        settings_mod.build(browser_endpoint=value)
    assert said in str(e.value) and TOKEN not in str(e.value) and "\n" not in str(e.value)


def test_a_cdp_endpoint_is_shown_without_its_token_and_connects_with_it(tmp_path, monkeypatch):
    db = str(tmp_path / "jobs.db")
    store.open_db(db).close()
    url = f"http://user:pw@127.0.0.1:9222/?token={TOKEN}"
    monkeypatch.setenv("SCRAPER_BROWSER_ENDPOINT", "cdp:" + url)
    monkeypatch.setenv("SCRAPER_BROWSER_SESSIONS", "3")
    shown = invoke("config", "--json", db=db)
    assert shown.exit_code == 0, shown.output
    assert TOKEN not in shown.output and "pw@" not in shown.output and "token=***" in shown.output
    s = settings_mod.load()[0]
    assert s.browser_endpoint.url == url and s.browser_endpoint.remote and s.browser_sessions == 3
    assert TOKEN not in repr(s) and TOKEN not in str(s.browser_endpoint)


def test_the_browserbase_key_from_the_environment_is_never_shown(tmp_path, monkeypatch):
    db = str(tmp_path / "jobs.db")
    store.open_db(db).close()
    monkeypatch.setenv("SCRAPER_BROWSERBASE_KEY", TOKEN)
    monkeypatch.setenv("SCRAPER_BROWSER_ENDPOINT", "browserbase")
    said = invoke("config", "--json", db=db)
    assert said.exit_code == 0 and TOKEN not in said.output and '"browser_endpoint"' in said.output


def write_sources(tmp_path, extra):
    path = tmp_path / "sources.toml"
    path.write_text(textwrap.dedent("""
        [[source]]
        name = "events"
        kind = "catalogue"
        site = "http://127.0.0.1:1/"
        fetcher = "browser"
    """) + textwrap.dedent(extra))
    return str(path)


@pytest.mark.parametrize(("extra", "said"), [
    ('browser_endpoint = "browserless"', "key 'browser_endpoint' is 'browserless'; it must be local, cdp:URL"),
    (f'browser_endpoint = "cdp:nothing?token={TOKEN}"', "cdp: must be followed by an http(s) or ws(s) URL."),
    ("browser_sessions = 0", "key 'browser_sessions' is 0; it must be a whole number, 1 or more."),
    ("browser_session_pages = true", "key 'browser_session_pages' is True; it must be a whole number"),
    ("browser_session_timeout = -1", "key 'browser_session_timeout' is -1; it must be a number of seconds"),
    ('browserbase_url = "ftp://127.0.0.1:9/"', "key 'browserbase_url' is 'ftp://127.0.0.1:9/'; it must be an http(s) "
                                              "URL"),
])
def test_a_sources_bad_browser_key_is_one_sentence_naming_the_file_and_source(tmp_path, extra, said):
    path = write_sources(tmp_path, extra)
    with pytest.raises(ConfigError) as e:
        sources.load(path)
    assert said in str(e.value) and path in str(e.value) and "'events'" in str(e.value)
    assert TOKEN not in str(e.value)


def test_a_sources_own_browser_keys_win_over_the_runs(tmp_path):
    path = write_sources(tmp_path, """
        browser_endpoint = "cdp:http://127.0.0.1:9222"
        browser_session_pages = 7
        browser_session_timeout = 30
    """)
    s = settings_mod.build(sources=sources.load(path), sources_path=path, browser_sessions=4)
    plan = s.browsers[True]
    assert plan.endpoint.kind == "cdp" and plan.endpoint.url == "http://127.0.0.1:9222"
    assert (plan.sessions, plan.session_pages, plan.session_timeout_s) == (4, 7, 30.0)
    # a remote source needs no Chromium here: none is looked for
    from scraper.net import chromium
    assert chromium.sources_without_browser(
        settings_mod.build(sources=s.sources, browser_path="/nonexistent/chromium"), s.sources) == (None, ())


def test_a_local_and_a_remote_source_run_together_but_two_remote_browsers_are_refused_before_any_work(tmp_path):
    path = write_sources(tmp_path, """
        browser_endpoint = "cdp:http://127.0.0.1:9222"

        [[source]]
        name = "shop"
        kind = "catalogue"
        site = "http://127.0.0.2:1/"
        fetcher = "auto"

        [[source]]
        name = "fair"
        kind = "catalogue"
        site = "http://127.0.0.2:2/"
        fetcher = "browser"
        browser_endpoint = "cdp:http://127.0.0.1:9333"
    """)
    s = settings_mod.build(sources=sources.load(path), sources_path=path, run_sources=("events", "shop"))
    assert {remote: plan.endpoint for remote, plan in s.browsers.items()} == {
        True: endpoints.parse("cdp:http://127.0.0.1:9222"), False: endpoints.Endpoint("local")}
    db = str(tmp_path / "jobs.db")
    store.open_db(db).close()
    said = invoke("--sources", path, "run", db=db)
    assert said.exit_code == 2
    assert "source events renders with cdp:http://127.0.0.1:9222 and source fair with cdp:http://127.0.0.1:9333" \
        in said.output
    assert "one local and one remote browser" in said.output and "run them apart with --source" in said.output


# --- a Chromium elsewhere, over CDP (Debian's, started here as the endpoint) --------------------------------

needs_chromium = pytest.mark.skipif(browser.problem("chromium") is not None,
                                    reason="no Chromium on PATH (apt-get install chromium) or no Playwright")


def targets(base):
    """The endpoint's open targets (pages, workers): what a client that cleaned up leaves as it found it."""
    with urllib.request.urlopen(base + "/json/list", timeout=5) as answer:
        return sorted(t["type"] for t in json.loads(answer.read()))


@pytest.fixture
def impatient(monkeypatch):
    """A job whose endpoint refused goes back after 50 ms, not a second (and the next try comes after 50 ms):
    what these tests check is that it goes back, uncharged, not when."""
    monkeypatch.setattr(browserslot, "SLOT_PATIENCE_S", 0.05)
    monkeypatch.setattr(browser, "CONNECT_RETRY_S", 0.05)


@contextlib.contextmanager
def worker_with_a_job(cfg):
    """A worker on `cfg`'s new database with one catalogue job claimed (on 127.0.0.2:9, where nothing answers):
    (worker, job); the worker, its session and its connection closed at the end."""
    conn = store.open_db(cfg.db_path)
    queue = Queue(conn)
    queue.seed([("events:/live/x-1", "catalogue", "http://127.0.0.2:9/live/x-1", "127.0.0.2")], now=1.0)
    session = http.make_session(cfg.user_agent)
    w = worker.Worker(cfg, "w0-1", queue, NoLimiter(), session=session)
    try:
        yield w, queue.claim(w.name, 2.0, cfg.lease_s, sites=["catalogue"])
    finally:
        w.close()
        session.close()
        conn.close()


@pytest.mark.timing      # Chromium and rate windows: after the parallel phase (`make test`)
@pytest.mark.chromium
@pytest.mark.slow
@needs_chromium
def test_a_cdp_endpoint_renders_every_event_within_the_rate_and_no_chromium_runs_here(cdp_endpoint, tmp_path):
    with client.start(catalogue=True, events=8, seed=3, rate=auto.RATE, burst=auto.BURST) as calendar:
        # 2 pages a session: sessions are retired and opened again during the run, the endpoint kept running
        extra = f'browser_endpoint = "cdp:{cdp_endpoint}"\nbrowser_sessions = 2\nbrowser_session_pages = 2\n' \
                'settle = ".organizer"'
        e = auto.env(tmp_path, auto.sources(calendar.url, "browser", extra=extra))
        before = targets(cdp_endpoint)
        assert auto.scraper(e, "seed").returncode == 0
        code, err, watch = auto.run_watched(e, "--workers", "2")
        assert code == exitcodes.OK, err[-3000:]
        truth = calendar.truth()["events"]
        got = auto.stored(tmp_path / "jobs.db")
        assert set(got) == {t["url"] for t in truth}
        assert all(got[t["url"]]["organizer"] == t["organizer"] for t in truth)
        stats = calendar.stats()
    assert not watch.chromium                           # every page rendered elsewhere: no Chromium in the run's tree
    assert stats["http_429"] == 0 and stats["max_in_1s"] <= auto.RATE + auto.BURST
    # the scripts' calls reached the site through the worker's gate, counted
    assert stats["by_kind"].get("live_json", 0) >= sum(t["script_rendered"] for t in truth)
    assert wait_until(lambda: targets(cdp_endpoint) == before, timeout=5, every=0.1)
    assert "Traceback" not in err


@pytest.mark.chromium
@pytest.mark.slow
@needs_chromium
def test_an_endpoint_that_refuses_hands_the_job_back_uncharged(tmp_path, impatient):
    with socket.socket() as s:      # a port nothing listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = settings_mod.build(db_path=str(tmp_path / "jobs.db"), workers=1, no_limit=True, robots="ignore",
                             browser_endpoint=f"cdp:http://127.0.0.1:{port}")
    others = {p.pid for p in psutil.Process().children(recursive=True)}     # the module's CDP endpoint, say
    with worker_with_a_job(cfg) as (w, job):
        with pytest.raises(HandedBack):
            w.context(job).render(job.url)
        # the run's remote sessions bound it, not the local browser slots
        assert (w.browser.slots.path, w.browser.slots.n) == (cfg.sessions_lock_path, cfg.browser_sessions)
        # nothing runs here for a CDP endpoint: no Chromium, and no Playwright driver either (net/cdp speaks CDP)
        assert set(w.browser.pids()) - others == set()
    (row,) = rows(cfg.db_path, "SELECT status, attempts FROM jobs")
    assert (row["status"], row["attempts"]) == ("pending", 0)       # back in the queue, no attempt spent
    assert not rows(cfg.db_path, "SELECT * FROM requests")          # nothing reached (or was charged to) the site
    assert not rows(cfg.db_path, "SELECT * FROM browser_sessions")  # a refused connection is no session


@pytest.mark.chromium
@pytest.mark.slow
@needs_chromium
def test_a_remote_session_gates_every_request_is_retired_by_pages_and_age_and_leaves_the_browser_running(cdp_endpoint):
    server = script_page()
    url = f"http://127.0.0.1:{server.server_address[1]}/page"
    before = targets(cdp_endpoint)
    gated = []
    fetcher = browser.BrowserFetcher(None, endpoint=endpoints.parse("cdp:" + cdp_endpoint), pages_per_browser=2)
    try:
        for _ in range(3):
            status, final_url, html = fetcher.render(url, gated.append, 10.0, 2**20, settle="#app:not(:empty)")
            assert (status, final_url) == (200, url) and "Jazz night" in html
        assert gated == [url, url.replace("/page", "/api.json")] * 3     # the page and its script's call, each gated
        assert fetcher.launches == 2            # retired after 2 pages: a second session for the third
        # by age alone: any age is too old now, so the session of the third page goes after the fourth
        fetcher.pages_per_browser, fetcher.session_timeout_s = 100, 0.001
        fetcher.render(url, gated.append, 10.0, 2**20, settle="#app:not(:empty)")
        fetcher.render(url, gated.append, 10.0, 2**20, settle="#app:not(:empty)")
        assert fetcher.launches == 3
    finally:
        fetcher.close()
        server.shutdown()
        server.server_close()
    # each session's close dropped the connection, not the browser: it still answers, its targets as before
    assert wait_until(lambda: targets(cdp_endpoint) == before, timeout=5, every=0.1)


class _Hostile(http_server.BaseHTTPRequestHandler):
    """A "browser endpoint" whose /json/version (where Playwright asks for the browser's websocket) is hostile."""

    answer = b""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.answer)))
        self.end_headers()
        self.wfile.write(self.answer)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("answer", [b"{not json", b"\xff\xfe\x00garbage", b'{"webSocketDebuggerUrl": 5}',
                                    b'{"webSocketDebuggerUrl": "ws://127.0.0.1:9/x' + b"y" * 3_000_000 + b'"}'],
                         ids=["malformed", "not-utf8", "wrong-type", "huge"])
def test_a_hostile_endpoint_hands_the_job_back_uncharged_and_the_worker_goes_on(tmp_path, answer, caplog, impatient):
    handler = type("Answer", (_Hostile,), {"answer": answer})
    server = http_server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()   # its shutdown: 50 ms, not 0.5 s
    cfg = settings_mod.build(db_path=str(tmp_path / "jobs.db"), workers=1, no_limit=True, robots="ignore",
                             browser_endpoint=f"cdp:http://127.0.0.1:{server.server_address[1]}")
    try:
        with worker_with_a_job(cfg) as (w, job), caplog.at_level("INFO"), pytest.raises(HandedBack):
            w.context(job).render(job.url)
    finally:
        server.shutdown()
    (row,) = rows(cfg.db_path, "SELECT status, attempts FROM jobs")
    assert (row["status"], row["attempts"]) == ("pending", 0)
    assert any("refused a session" in r.getMessage() for r in caplog.records)     # the reason, in one line


# --- a local and a remote browser side by side; a provider at capacity, and one that drops sessions ----------

@pytest.fixture
def relay(cdp_endpoint):
    """The CDP relay in front of the endpoint, admitting 2 sessions at once (429 beyond)."""
    with client.start(kind="relay", upstream=cdp_endpoint, max_sessions=2) as at_capacity:
        yield at_capacity


def domains_untouched(db):
    """Every domain's breaker closed without a failure, no 429 pause, no adaptive slow-down."""
    return [dict(r) for r in rows(db, "SELECT domain, state, failures, paused_until, adaptive_rate_per_s FROM domains")
            if (r["state"], r["failures"], r["paused_until"], r["adaptive_rate_per_s"]) != ("closed", 0, 0, None)]


@pytest.mark.timing      # Chromium, a PSS peak, rate windows: after the parallel phase (`make test`)
@pytest.mark.chromium
@pytest.mark.cold         # a PSS peak of new interpreters
@pytest.mark.slow
@needs_chromium
def test_a_local_and_a_remote_source_render_side_by_side_with_one_local_chromium_under_1_gb(cdp_endpoint, tmp_path):
    settle = 'settle = ".organizer"'
    with client.start(catalogue=True, events=6, seed=3, rate=auto.RATE, burst=auto.BURST) as here, \
            client.start(catalogue=True, events=6, seed=5, rate=auto.RATE, burst=auto.BURST, host="127.0.0.1") as there:
        text = auto.sources(here.url, "browser", extra=settle) + auto.sources(
            there.url, "browser", name="fair", extra=f'{settle}\nbrowser_endpoint = "cdp:{cdp_endpoint}"')
        e = auto.env(tmp_path, text)
        before = targets(cdp_endpoint)
        assert auto.scraper(e, "seed").returncode == 0
        code, err, watch = auto.run_watched(e, "--workers", "4")
        assert code == exitcodes.OK, err[-3000:]
        got = auto.stored(tmp_path / "jobs.db")
        for site in (here, there):
            truth = site.truth()["events"]
            assert {t["url"] for t in truth} <= set(got)
            assert all(got[t["url"]]["organizer"] == t["organizer"] for t in truth)
            stats = site.stats()
            assert stats["http_429"] == 0 and stats["max_in_1s"] <= auto.RATE + auto.BURST
        scripted = sum(t["script_rendered"] for t in there.truth()["events"])
        assert there.stats()["by_kind"].get("live_json", 0) >= scripted    # the remote pages' script calls, gated
    # the local source had its one Chromium here (never two at once), the remote one none; within the ceiling
    assert watch.browsers == 1 and 0 < watch.peak < auto.GB, (watch.browsers, watch.peak, watch.at_peak)
    assert wait_gone(watch.chromium, -1) == []
    assert wait_until(lambda: targets(cdp_endpoint) == before, timeout=5, every=0.1)
    assert "Traceback" not in err


@pytest.mark.timing      # Chromium and rate windows: after the parallel phase (`make test`)
@pytest.mark.chromium
@pytest.mark.slow
@needs_chromium
def test_a_provider_at_capacity_that_drops_sessions_mid_page_costs_no_attempt_and_no_breaker(relay, tmp_path):
    with client.start(catalogue=True, events=8, seed=3, rate=auto.RATE, burst=auto.BURST) as calendar:
        # the source asks for 4 sessions, the provider gives 2 (429 beyond), and drops the session of two pages
        # under way (the browser's first paused request of a page)
        extra = f'browser_endpoint = "cdp:{relay.url}"\nbrowser_sessions = 4\nsettle = ".organizer"'
        e = auto.env(tmp_path, auto.sources(calendar.url, "browser", extra=extra), SCRAPER_LOG_LEVEL="INFO")
        assert auto.scraper(e, "seed").returncode == 0
        relay.cut(on="Fetch.requestPaused", times=2)
        code, err, _ = auto.run_watched(e, "--workers", "4")
        assert code == exitcodes.OK, err[-3000:]
        stats = calendar.stats()
    db = tmp_path / "jobs.db"
    jobs = rows(db, "SELECT status, attempts FROM jobs WHERE source = 'events'")
    assert jobs and {(j["status"], j["attempts"]) for j in jobs} == {("done", 1)}    # nothing charged
    seen = relay.relay_stats()
    assert seen["max_open"] <= 2 and seen["refused"] > 0 and seen["cut"] == 2, seen
    lost = [line for line in err.splitlines() if "was lost mid-page" in line]
    assert len(lost) == 2 and all("tried again on a new session, uncharged" in line for line in lost), lost
    assert domains_untouched(db) == [] and stats["http_429"] == 0
    # every session recorded and closed, each lost one with its disconnect (the retry opened a new one), and
    # their pages as `status` shows them add up to the pages the run rendered
    conn = store.connect(str(db))
    try:
        shown = status.browser_sessions(conn, count(db, "SELECT MAX(id) FROM runs"), time.time())
    finally:
        conn.close()
    assert sorted(s["errors_by_kind"]["disconnect"] for s in shown)[-3:] == [0, 1, 1], shown
    assert sum(s["errors"] for s in shown) == 2 and not any(s["open"] for s in shown), shown
    assert sum(s["pages"] for s in shown) == count(db, "SELECT COUNT(*) FROM run_jobs WHERE status = 'done'"), shown
    assert "breaker" not in err and "Traceback" not in err


@pytest.mark.chromium     # Playwright's driver (no browser)
@pytest.mark.slow
@needs_chromium
def test_an_endpoint_that_keeps_refusing_ends_its_jobs_after_browser_wait_said_once(tmp_path):
    with socket.socket() as s:      # a port nothing listens on: every session refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with client.start(catalogue=True, events=3, seed=3) as calendar:
        extra = f'browser_endpoint = "cdp:http://127.0.0.1:{port}/?token={TOKEN}"'
        e = auto.env(tmp_path, auto.sources(calendar.url, "browser", extra=extra), SCRAPER_BROWSER_WAIT="0.5")
        assert auto.scraper(e, "seed").returncode == 0
        done = auto.scraper(e, "run", "--workers", "2")
        stats = calendar.stats()
    assert done.returncode == exitcodes.FAILED, done.stderr[-3000:]
    said = f"the browser endpoint cdp:http://127.0.0.1:{port}/?token=*** refused every session for 0.5 s"
    assert done.stderr.count(said) == 1, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert said in last and "job(s) failed browser_unavailable" in last and "retry --failed" in last
    assert TOKEN not in done.stderr
    db = tmp_path / "jobs.db"
    jobs = rows(db, "SELECT status, error_kind, attempts FROM jobs WHERE source = 'events'")
    assert jobs and {(j["status"], j["error_kind"], j["attempts"]) for j in jobs} == \
        {("failed", "browser_unavailable", 0)}      # the endpoint's, not the jobs': no attempt spent
    assert domains_untouched(db) == [] and stats["by_kind"].get("live_page", 0) == 0


@needs_chromium
def test_a_worker_claims_first_what_renders_in_the_browser_it_holds_and_leaves_what_it_cannot_render(tmp_path):
    path = write_sources(tmp_path, """
        [[source]]
        name = "fair"
        kind = "catalogue"
        site = "http://127.0.0.2:2/"
        fetcher = "browser"
        browser_endpoint = "cdp:http://127.0.0.1:9"

        [[source]]
        name = "shop"
        kind = "catalogue"
        site = "http://127.0.0.2:3/"
        fetcher = "auto"

        [[source]]
        name = "news"
        kind = "catalogue"
        site = "http://127.0.0.2:4/"
    """)
    cfg = settings_mod.build(db_path=str(tmp_path / "jobs.db"), sources=sources.load(path), sources_path=path)
    conn = store.open_db(cfg.db_path)
    session = http.make_session(cfg.user_agent)
    w = worker.Worker(cfg, "w0-1", Queue(conn), NoLimiter(), session=session)
    slot, levels = w.browser_slot, [["events", "fair", "news"], ["shop"]]
    try:
        assert slot.claim_levels(levels) == levels      # no browser held, nothing handed back
        local = slot.browser(types.SimpleNamespace(source="events"))
        assert local.slots.try_acquire() and not local.remote       # the local slot, held (nothing launched)
        assert slot.claim_levels(levels) == [["events"], ["fair", "news"], ["shop"]]
        remote = slot.browser(types.SimpleNamespace(source="fair"))
        assert remote.remote and remote.driverless      # over CDP by net/cdp: it never takes the local's driver
        assert remote.slots.try_acquire()
        assert slot.claim_levels(levels) == [["events"], ["fair"], ["news"], ["shop"]]
        local.slots.release()
        # a job handed back for want of a local slot: the sources whose every page renders locally are left
        slot.handed_back["events:/x"] = (slot.clock.monotonic() + 10, False)
        assert slot.claim_levels(levels) == [["fair"], ["news"], ["shop"]]
    finally:
        w.close()
        session.close()
        conn.close()


def test_refusals_end_in_browser_unavailable_only_while_no_session_of_the_pool_serves(tmp_path):
    slots = browser.BrowserSlots(str(tmp_path / "jobs.db-sessions.lock"), 2)
    fetcher = browser.BrowserFetcher(None, endpoint=endpoints.parse("cdp:http://127.0.0.1:9"), slots=slots,
                                     wait_s=5.0)
    try:
        assert slots.try_acquire()
        slots.release()
        fetcher.refused_since = time.time() - 60      # refusing for a minute
        slots.served()                                  # but another worker's session rendered a page just now
        fetcher.refused()                               # full, not down: the job keeps waiting
        os.utime(slots.path, (time.time() - 30, time.time() - 30))     # nobody served for 30 s
        with pytest.raises(FetchError) as e:
            fetcher.refused()
        assert e.value.kind == "browser_unavailable"
        assert str(e.value) == ("the browser endpoint cdp:http://127.0.0.1:9 refused every session for 5 s "
                                "(browser_wait)")
    finally:
        fetcher.close()


# --- where a remote page goes: policy/sessions.pick, as the workers ask it (pool/browserslot) -------------------

@contextlib.contextmanager
def workers_on_one_domain(tmp_path, rate, n):
    """`n` workers of one run (one process, as lanes of it would be) on a new database, each with a job of one
    catalogue domain (127.0.0.2) claimed, whose pages render on a cdp: endpoint with browser_sessions = 4 (never
    dialled here) and whose rate is `rate`: (settings, [(worker, its job's JobClient)])."""
    tmp_path.mkdir()
    path = tmp_path / "sources.toml"
    path.write_text(textwrap.dedent(f"""
        [[source]]
        name = "events"
        kind = "catalogue"
        site = "http://127.0.0.2:1/"
        fetcher = "browser"
        browser_endpoint = "cdp:http://127.0.0.1:9"
        browser_sessions = 4
        rate = {rate}
    """))
    cfg = settings_mod.build(db_path=str(tmp_path / "jobs.db"), sources=sources.load(str(path)),
                             sources_path=str(path), robots="ignore")
    store.open_db(cfg.db_path).close()
    opened, ws = [], []
    try:
        for i in range(n):
            conn = store.connect(cfg.db_path)
            queue = Queue(conn, 1)
            queue.seed([(f"events:/live/x-{i}", "catalogue", f"http://127.0.0.2:1/live/x-{i}", "127.0.0.2",
                         "events")], now=1.0)
            session = http.make_session(cfg.user_agent)
            w = worker.Worker(cfg, f"w{i}-{os.getpid()}", queue, NoLimiter(), session=session)
            opened.append((w, session, conn))
            job = queue.claim(w.name, 2.0, cfg.lease_s, sites=["catalogue"])
            assert job is not None
            ws.append((w, w.context(job)))
        yield cfg, ws
    finally:
        for w, session, conn in opened:
            w.close()
            session.close()
            conn.close()


def place(w, jc):
    return w.browser_slot.place(jc, w.browser_slot.browser(jc))


def test_a_slow_domain_gets_no_more_remote_sessions_than_its_rate_feeds_and_a_fast_one_all(tmp_path, impatient):
    # 0.5 requests/s, 2 requests a page, 1 s a page: the rate feeds one session (Little's law)
    with workers_on_one_domain(tmp_path / "slow", 0.5, 4) as (cfg, ws):
        # a worker that died (kill -9) left its session open and busy with the domain: it holds no connection
        dead = browsersessions.Recorder(ws[0][0].queue.conn, 1, "w9-1", runstate.host(), 2**22 + 1, time.time)
        dead.opened("cdp", "cdp:http://127.0.0.1:9", None)
        dead.placed("127.0.0.2")
        assert [place(w, jc) for w, jc in ws] == ["new", "wait", "wait", "wait"]
        (first,) = rows(cfg.db_path, "SELECT id, active, domain, closed_at FROM browser_sessions WHERE pid = ?",
                        os.getpid())
        assert (first["active"], first["domain"], first["closed_at"]) == (1, "127.0.0.2", None)   # busy, reserved
        # the first session opened and rendered its page: free now, the others' jobs still wait for it
        w0, jc0 = ws[0]
        w0.browser_slot.fetchers[True].sessions.opened("cdp", "cdp:http://127.0.0.1:9", None)
        w0.browser_slot.fetchers[True].sessions.paged(True)
        assert [place(w, jc) for w, jc in ws[1:]] == [str(first["id"])] * 3     # that session's, not a new one
        # its own worker's next page goes on it (the connection faked: nothing listens on the endpoint), busy again
        # with the domain, which is then at its cap: the others wait
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(browser.BrowserFetcher, "connected", property(lambda f: f.sessions.attached))
            assert place(w0, jc0) == "mine"
            assert [place(w, jc) for w, jc in ws[1:]] == ["wait"] * 3
            w0.browser_slot.fetchers[True].sessions.paged(True)
        # the wait is a capacity wait: the job goes back, uncharged, nothing sent
        w1, jc1 = ws[1]
        with pytest.raises(HandedBack):
            w1.browser_slot.ready(jc1)
        assert count(cfg.db_path, "SELECT COUNT(*) FROM browser_sessions WHERE pid = ?", os.getpid()) == 1
        assert rows(cfg.db_path, "SELECT status, attempts FROM jobs WHERE key = ?", jc1.job.key) == [
            {"status": "pending", "attempts": 0}]
    # 20 requests/s feeds 10 sessions: all 4 of browser_sessions open, none past them
    with workers_on_one_domain(tmp_path / "fast", 20, 5) as (cfg, ws):
        assert [place(w, jc) for w, jc in ws] == ["new"] * 4 + ["wait"]
        assert count(cfg.db_path, "SELECT COUNT(DISTINCT id) FROM browser_sessions WHERE active = 1") == 4
        # a session given up before it opened (refused, handed back) was no session: its row goes
        w0, _ = ws[0]
        w0.browser_slot.fetchers[True].sessions.unreserve()
        assert count(cfg.db_path, "SELECT COUNT(*) FROM browser_sessions") == 3
