"""Remote browsers by provider (issue 42): a Playwright server (`playwright:WS-URL`), Browserbase's session API
(`browserbase`), the sessions' figures and their end after a kill -9."""

import json

import pytest
import responses
from responses import matchers

from scraper.base import endpoints, exitcodes
from scraper.base import settings as settings_mod
from scraper.base.errors import FetchError, HandedBack
from scraper.base.webhooks import Secret
from scraper.db import browsersessions, store
from scraper.net import browser, browserbase
from scraper.pool import deadsessions
from scraper.products import status
from scripts.standin import browsers, client
from scripts.standin.browserbase import HOSTILE, BrowserbaseStandin
from tests import test_fetcher_auto as auto
from tests.helpers import count, invoke, rows, script_page, wait_until
from tests.test_remote_browser import needs_chromium, targets, worker_with_a_job


@pytest.fixture(scope="module")
def playwright_endpoint(tmp_path_factory):
    """A Playwright server (launch-server) driving Debian's Chromium, one for the module: its ws URL."""
    with browsers.playwright_server(str(tmp_path_factory.mktemp("pw"))) as ws_url:
        yield ws_url


@pytest.fixture
def page_url():
    server = script_page()
    yield f"http://127.0.0.1:{server.server_address[1]}/page"
    server.shutdown()
    server.server_close()


def test_a_playwright_endpoint_is_accepted_and_shown_without_its_token():
    s = settings_mod.build(browser_endpoint="playwright:ws://127.0.0.1:3000/chromium/playwright?token=tok-5f3a9c")
    plan = s.browser_of(None)     # the run's (no source of the default catalogue renders)
    assert plan.endpoint.kind == "playwright" and plan.endpoint.remote
    assert str(plan.endpoint) == "playwright:ws://127.0.0.1:3000/chromium/playwright?token=***"


@pytest.mark.chromium
@pytest.mark.slow
@needs_chromium
def test_a_playwright_server_renders_through_the_gate_and_its_sessions_are_retired(playwright_endpoint, page_url):
    gated = []
    fetcher = browser.BrowserFetcher(None, endpoint=endpoints.parse("playwright:" + playwright_endpoint),
                                     pages_per_browser=2)
    try:
        for _ in range(3):
            status, final_url, html = fetcher.render(page_url, gated.append, 10.0, 2**20, settle="#app:not(:empty)")
            assert (status, final_url) == (200, page_url) and "Jazz night" in html
        # the page and its script's call, each through the gate, on the same path as cdp:
        assert gated == [page_url, page_url.replace("/page", "/api.json")] * 3
        assert fetcher.launches == 2        # retired after 2 pages: a second connection for the third
        assert fetcher.browser_pid is None      # nothing launched here: the browser is the server's
    finally:
        fetcher.close()


# --- Browserbase: its session API ---------------------------------------------------------------------------

KEY = "bb-key-7c1d0e"
API_URL = "http://bb.test"


def api():
    return browserbase.Api(API_URL, Secret(KEY), "proj-1", 120)


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_session_answer_is_an_api_error_with_a_reason_and_no_secret(kind):
    with responses.RequestsMock() as rsps:
        rsps.post(API_URL + "/v1/sessions", body=HOSTILE[kind], status=201)
        if kind == "no-connect-url":        # a session was made all the same: released, not left to bill
            rsps.post(API_URL + "/v1/sessions/hostile-1", json={"status": "COMPLETED"},
                      match=[matchers.json_params_matcher({"status": "REQUEST_RELEASE", "projectId": "proj-1"})])
        with pytest.raises(browserbase.ApiError) as e:
            api().create()
        sent, headers = json.loads(rsps.calls[0].request.body), rsps.calls[0].request.headers
    assert sent == {"keepAlive": False, "projectId": "proj-1", "timeout": 120} and headers["X-BB-API-Key"] == KEY
    said = str(e.value)
    assert said.startswith("POST /v1/sessions: ") and "\n" not in said and len(said) < 200
    assert KEY not in said and "ws://" not in said and "x" * 50 not in said


@pytest.mark.parametrize(("status", "error"), [(429, browserbase.Busy), (503, browserbase.Busy),
                                               (401, browserbase.ApiError), (404, browserbase.ApiError)])
def test_a_refusal_is_busy_when_a_wait_cures_it(status, error):
    with responses.RequestsMock() as rsps:
        rsps.post(API_URL + "/v1/sessions", json={"error": f"no, {KEY}"}, status=status)
        with pytest.raises(error) as e:
            api().create()
    assert str(e.value).startswith(f"POST /v1/sessions: HTTP {status}") and KEY not in str(e.value)


def test_an_api_that_cannot_be_reached_is_busy_and_a_failed_release_is_logged_not_raised(caplog):
    unreachable = browserbase.Api("http://127.0.0.1:9", Secret(KEY))
    with pytest.raises(browserbase.Busy):
        unreachable.create()
    with caplog.at_level("WARNING"):
        assert unreachable.release("sess-1") is False
    assert "sess-1 was not released" in caplog.text and KEY not in caplog.text


def test_the_session_timeout_asked_is_within_what_the_api_takes():
    assert browserbase.session_timeout(None, 30) is None
    assert browserbase.session_timeout(10, 30) == 60
    assert browserbase.session_timeout(300, 30) == 330
    assert browserbase.session_timeout(10**6, 30) == 21600


def test_a_run_with_browserbase_and_no_key_is_one_sentence(tmp_path, monkeypatch):
    db = str(tmp_path / "jobs.db")
    store.open_db(db).close()
    monkeypatch.setenv("SCRAPER_BROWSER_ENDPOINT", "browserbase")
    monkeypatch.delenv("SCRAPER_BROWSERBASE_KEY", raising=False)
    said = invoke("run", db=db)
    assert said.exit_code == 2
    assert "browser_endpoint browserbase needs Browserbase's API key: set SCRAPER_BROWSERBASE_KEY" in said.output
    assert "Traceback" not in said.output


@pytest.mark.chromium
@pytest.mark.slow
@needs_chromium
@pytest.mark.parametrize("endpoint", ["playwright:ws://127.0.0.1:9/x", "browserbase"])
def test_a_playwright_server_not_there_or_browserbase_at_capacity_is_a_capacity_wait(page_url, endpoint):
    gated = []

    def wait():         # the worker's capacity wait hands the job back, uncharged
        raise HandedBack("events:/page")

    fetcher = browser.BrowserFetcher(None, endpoint=endpoints.parse(endpoint), provider=api())
    try:
        with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
            rsps.post(API_URL + "/v1/sessions", status=429)     # Browserbase's answer at its plan's concurrency
            with pytest.raises(HandedBack):
                fetcher.render(page_url, gated.append, 10.0, 2**20, wait=wait)
            assert len(rsps.calls) == (endpoint == "browserbase")
    finally:
        fetcher.close()
    assert gated == [] and fetcher.launches == 0


@pytest.mark.chromium
@pytest.mark.slow
@needs_chromium
def test_a_hostile_browserbase_answer_ends_the_attempt_with_its_reason_not_the_worker(tmp_path):
    cfg = settings_mod.build(db_path=str(tmp_path / "jobs.db"), workers=1, no_limit=True, robots="ignore",
                             browser_endpoint="browserbase", browserbase_url=API_URL, browserbase_key=KEY)
    with worker_with_a_job(cfg) as (w, job), responses.RequestsMock() as rsps, pytest.raises(FetchError) as e:
        rsps.post(API_URL + "/v1/sessions", body=HOSTILE["wrong-type"], status=201)
        w.context(job).render(job.url)
    # the attempt's reason, not the site's fault (the breaker untouched), naming no secret
    assert e.value.kind == "internal" and KEY not in str(e.value)
    assert str(e.value) == ("Browserbase's answer is no session: POST /v1/sessions: the answer has no usable "
                            "session id")
    # the browser is made ready before the page: the provider's answer is no request of the site's
    assert not rows(cfg.db_path, "SELECT kind FROM requests")
    assert not rows(cfg.db_path, "SELECT * FROM domains WHERE failures > 0")
    assert not rows(cfg.db_path, "SELECT * FROM browser_sessions")     # no session was ever opened


def test_the_next_start_closes_what_dead_workers_left_open_releasing_browserbase_sessions(backend, caplog):
    conn = store.open_db(backend)
    opened = [("cdp", "cdp:http://127.0.0.1:9222/?token=***", None), ("browserbase", "browserbase", "sess-1"),
              ("browserbase", "browserbase", "sess-2")]
    for provider, endpoint, provider_session in opened:
        recorder = browsersessions.Recorder(conn, 7, "w0-1", "here", 2**22 + 1, lambda: 100.0)
        recorder.opened(provider, endpoint, provider_session)
        recorder.page_started()
        recorder.paged(True)
    recorder.page_started()
    recorder.paged(False, "disconnect")
    recorder.closed()       # sess-2 ended as it should; the others were open when their worker died
    s = settings_mod.build(db_path=backend, browserbase_url=API_URL, browserbase_key=KEY)
    with responses.RequestsMock() as rsps:
        rsps.post(API_URL + "/v1/sessions/sess-1", json={"status": "COMPLETED"},
                  match=[matchers.json_params_matcher({"status": "REQUEST_RELEASE"})])
        assert deadsessions.sweep(s, conn, 130.0, lambda row: True) == 2     # cdp's closed, sess-1 released
    assert not browsersessions.left_open(conn)
    shown = status.browser_sessions(conn, 7, 500.0)
    assert [(b["provider"], b["session"], b["open"], b["uptime_s"], b["pages"], b["errors_by_kind"]["disconnect"])
            for b in shown] == [("cdp", None, False, 30.0, 1, 0), ("browserbase", "sess-1", False, 30.0, 1, 0),
                                ("browserbase", "sess-2", False, 0.0, 1, 1)]
    # without the key it cannot be released: closed all the same (it ends at its timeout), and said
    recorder.opened("browserbase", "browserbase", "sess-3")
    with caplog.at_level("WARNING"):
        deadsessions.sweep(settings_mod.build(db_path=backend), conn, 140.0, lambda row: True)
    assert not browsersessions.left_open(conn) and "(no SCRAPER_BROWSERBASE_KEY)" in caplog.text
    conn.close()


# --- Browserbase's stand-in, a whole run killed with -9 and resumed ---------------------------------------------

@pytest.fixture(scope="module")
def bb(cdp_endpoint):
    """The Browserbase-like stand-in in front of the module's CDP endpoint, 2 sessions running at most."""
    with BrowserbaseStandin(KEY, max_sessions=2, upstream=cdp_endpoint) as site:
        yield site


@pytest.mark.timing      # Chromium and rate windows: after the parallel phase (`make test`)
@pytest.mark.chromium
@pytest.mark.slow
@needs_chromium
def test_remote_sessions_end_after_a_kill_9_browserbase_ones_released_once_and_the_key_shows_nowhere(bb, tmp_path):
    db = tmp_path / "jobs.db"
    with client.start(catalogue=True, events=10, seed=3, rate=auto.RATE, burst=auto.BURST) as calendar:
        extra = 'browser_sessions = 2\nbrowser_session_pages = 2\nsettle = ".organizer"'
        e = auto.env(tmp_path, auto.sources(calendar.url, "browser", extra=extra), SCRAPER_BROWSERBASE_URL=bb.url,
                     SCRAPER_BROWSERBASE_KEY=KEY)
        before = targets(bb.cdp_base)
        assert auto.scraper(e, "seed").returncode == 0

        def midway(items):      # pages stored, and a session in the middle of a page (not about to be released)
            return lambda _: count(db, "SELECT COUNT(*) FROM items") >= items and count(
                db, "SELECT COUNT(*) FROM browser_sessions WHERE active = 1 AND closed_at IS NULL")

        # the stand-in's Chromium as a plain CDP endpoint first, then Browserbase's sessions; each run killed
        code, cdp_err, cdp_watch = auto.run_watched({**e, "SCRAPER_BROWSER_ENDPOINT": "cdp:" + bb.cdp_base},
                                                    "--workers", "2", kill_when=midway(1))
        assert code == -9
        # the contexts of the dead workers' sessions went with their connections
        assert wait_until(lambda: targets(bb.cdp_base) == before, timeout=10, every=0.1)
        e["SCRAPER_BROWSER_ENDPOINT"] = "browserbase"
        code, killed_err, watch = auto.run_watched(e, "--workers", "2",
                                                   kill_when=midway(count(db, "SELECT COUNT(*) FROM items") + 1))
        assert code == -9
        assert wait_until(lambda: targets(bb.cdp_base) == before, timeout=10, every=0.1)
        killed = bb.snapshot()
        left = rows(db, "SELECT provider_session FROM browser_sessions WHERE closed_at IS NULL")
        # what the dead workers held: the cdp run's sessions closed by the second run's start
        assert left and all(r["provider_session"] for r in left) and killed["created"] > killed["released"]
        second = auto.scraper(e, "run", "--workers", "2")
        assert second.returncode == 0, second.stderr[-3000:]
        truth = calendar.truth()["events"]
        got = auto.stored(db)
        shown = auto.scraper(e, "config")
        status = json.loads(auto.scraper(e, "status", "--json").stdout)
        text = auto.scraper(e, "status").stdout
    assert not watch.chromium and not cdp_watch.chromium     # every page rendered elsewhere
    assert rows(db, "SELECT DISTINCT provider FROM browser_sessions ORDER BY provider") == [
        {"provider": "browserbase"}, {"provider": "cdp"}]
    # nothing lost, nothing doubled
    assert set(got) == {t["url"] for t in truth} and count(db, "SELECT COUNT(*) FROM items") == len(truth)
    assert count(db, "SELECT COUNT(*) FROM jobs WHERE status != 'done'") == 0
    after = bb.snapshot()
    assert after["created"] == after["released"] > killed["created"]
    assert after["unknown_releases"] == after["double_releases"] == after["keep_alive_asked"] == after["bad_key"] == 0
    assert after["sessions"] and all(s["pages"] <= 2 for s in after["sessions"])
    # the key and every session's signing key (its connectUrl's): in no output, log or table
    secrets = [KEY] + [s["signing"] for s in bb.sessions.values()]
    said = "".join((cdp_err, killed_err, second.stdout, second.stderr, shown.stdout, shown.stderr, json.dumps(status),
                    text))
    kept = b"".join(p.read_bytes() for p in tmp_path.glob("jobs.db*") if p.is_file())
    assert not [s for s in secrets if s in said or s.encode() in kept]
    # no session left open; the last run's, as status shows them, add up to the pages it rendered
    assert not rows(db, "SELECT id FROM browser_sessions WHERE closed_at IS NULL")
    last = status["browser_sessions"]
    rendered = count(db, "SELECT COUNT(*) FROM run_jobs WHERE status = 'done' AND run_id = (SELECT MAX(id) FROM runs)")
    errors = sum(s["errors"] for s in last)     # a session's own (none expected; a loaded machine may see one)
    assert last and sum(s["pages"] for s in last) == rendered, (last, second.stderr[-3000:])
    assert f"browser   {len(last)} remote session(s) of the run on browserbase: 0 open, {rendered} page(s), " \
           f"{errors} session error(s)" in text
    assert all(s["provider"] == s["endpoint"] == "browserbase" and not s["open"] and s["load"] == 0 for s in last)
    theirs = {s["id"]: s["pages"] for s in after["sessions"]}
    # the stand-in counted the same pages (it counts those a session lost too)
    assert all(s["pages"] <= theirs[s["session"]] <= s["pages"] + s["errors"] for s in last), (theirs, last)
    assert "Traceback" not in cdp_err + killed_err + second.stderr


@pytest.mark.chromium       # the stand-in stands in front of a Chromium (never reached: the key is refused)
@pytest.mark.slow
@needs_chromium
def test_a_wrong_browserbase_key_ends_the_runs_browser_work_said_once_uncharged_and_shown_nowhere(bb, tmp_path):
    db = tmp_path / "jobs.db"
    wrong = "bb-wrong-3e9a71"
    before = bb.snapshot()
    with client.start(catalogue=True, events=6, seed=3, rate=auto.RATE, burst=auto.BURST) as calendar:
        e = auto.env(tmp_path, auto.sources(calendar.url, "browser"), SCRAPER_BROWSER_ENDPOINT="browserbase",
                     SCRAPER_BROWSERBASE_URL=bb.url, SCRAPER_BROWSERBASE_KEY=wrong)
        assert auto.scraper(e, "seed").returncode == 0
        run = auto.scraper(e, "run", "--workers", "2")
        shown = [auto.scraper(e, *args) for args in (("status",), ("status", "--json"), ("config",))]
        stats = calendar.stats()
    assert run.returncode == exitcodes.FAILED, run.stderr[-3000:]
    # every job ended at once, failed for a later run with its attempt given back: none lost, none charged
    jobs = rows(db, "SELECT status, error_kind, attempts, last_error FROM jobs")
    assert len(jobs) >= 6 and {(j["status"], j["error_kind"], j["attempts"]) for j in jobs} == \
        {("failed", "browser_unavailable", 0)}
    reason = "Browserbase refused the key in SCRAPER_BROWSERBASE_KEY (HTTP 401)"
    assert {j["last_error"] for j in jobs} == {reason}
    # said once, in the run's last line, with the cure
    assert run.stderr.count(reason) == 1 and "Traceback" not in run.stderr
    assert (f"next: {reason}, so {len(jobs)} job(s) failed browser_unavailable; set SCRAPER_BROWSERBASE_KEY to a "
            f"key Browserbase accepts, then `scraper retry --failed`") in run.stderr
    # the key was tried once a worker, not once a job; no session was made, nothing reached the site's pages
    after = bb.snapshot()
    assert 1 <= after["bad_key"] - before["bad_key"] <= 2 and after["created"] == before["created"]
    assert stats["by_kind"].get("live_page", 0) == 0 and not rows(db, "SELECT id FROM browser_sessions")
    said = run.stdout + run.stderr + "".join(r.stdout + r.stderr for r in shown)
    kept = b"".join(p.read_bytes() for p in tmp_path.glob("jobs.db*") if p.is_file())
    assert wrong not in said and wrong.encode() not in kept
