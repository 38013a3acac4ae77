"""Remote browsers by provider (issue 42): a Playwright server (`playwright:WS-URL`), Browserbase's session API
(`browserbase`), the sessions' figures and their end after a kill -9."""

import json

import pytest
import responses
from responses import matchers

from scraper.base import endpoints
from scraper.base import settings as settings_mod
from scraper.base.errors import FetchError, HandedBack
from scraper.base.webhooks import Secret
from scraper.db import store
from scraper.db.queue import Queue
from scraper.net import browser, browserbase, http
from scraper.politeness.limiter import NoLimiter
from scraper.pool import worker
from scripts.standin import browsers
from scripts.standin.browserbase import HOSTILE
from tests.helpers import invoke, rows, script_page

needs_chromium = pytest.mark.skipif(browser.problem("chromium") is not None,
                                    reason="no Chromium on PATH (apt-get install chromium) or no Playwright")


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
    assert s.browser.endpoint.kind == "playwright" and s.browser.endpoint.remote
    assert str(s.browser.endpoint) == "playwright:ws://127.0.0.1:3000/chromium/playwright?token=***"


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


@pytest.mark.chromium
@pytest.mark.slow
@needs_chromium
def test_a_playwright_server_that_is_not_there_is_a_capacity_wait(page_url):
    gated = []

    def wait():         # the worker's capacity wait hands the job back, uncharged
        raise HandedBack("events:/page")

    fetcher = browser.BrowserFetcher(None, endpoint=endpoints.parse("playwright:ws://127.0.0.1:9/x"))
    try:
        with pytest.raises(HandedBack):
            fetcher.render(page_url, gated.append, 10.0, 2**20, wait=wait)
    finally:
        fetcher.close()
    assert gated == [] and fetcher.launches == 0


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
@pytest.mark.parametrize(("answer", "outcome"), [({"status": 429}, HandedBack),
                                                 ({"status": 201, "body": HOSTILE["wrong-type"]}, FetchError)],
                         ids=["at-capacity", "hostile"])
def test_browserbase_at_capacity_hands_the_job_back_and_a_hostile_answer_ends_the_attempt(tmp_path, answer, outcome):
    cfg = settings_mod.build(db_path=str(tmp_path / "jobs.db"), workers=1, no_limit=True, robots="ignore",
                             browser_endpoint="browserbase", browserbase_url=API_URL, browserbase_key=KEY)
    conn = store.open_db(cfg.db_path)
    queue = Queue(conn)
    queue.seed([("events:/live/x-1", "catalogue", "http://127.0.0.2:9/live/x-1", "127.0.0.2")], now=1.0)
    session = http.make_session(cfg.user_agent)
    w = worker.Worker(cfg, "w0-1", queue, NoLimiter(), session=session)
    try:
        job = queue.claim(w.name, 2.0, cfg.lease_s, sites=["catalogue"])
        with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
            rsps.add_passthru("http://127.0.0.1")       # Playwright's driver is not requests, but be sure
            rsps.post(API_URL + "/v1/sessions", **answer)
            with pytest.raises(outcome) as e:
                w.context(job).render(job.url)
    finally:
        w.close()
        session.close()
        conn.close()
    logged = [r["kind"] for r in rows(cfg.db_path, "SELECT kind FROM requests")]
    if outcome is FetchError:       # the attempt ends with the reason, not the site's fault; the worker goes on
        assert e.value.kind == "internal" and "Browserbase's answer is no session" in str(e.value)
        assert KEY not in str(e.value) and logged == ["internal"]
    else:
        (row,) = rows(cfg.db_path, "SELECT status, attempts FROM jobs")
        assert (row["status"], row["attempts"]) == ("pending", 0)    # back in the queue, no attempt spent
        assert logged == []     # nothing reached (or was charged to) the site
    assert not rows(cfg.db_path, "SELECT * FROM domains WHERE failures > 0")     # the site's breaker untouched
    assert not rows(cfg.db_path, "SELECT * FROM browser_sessions")     # no session was ever opened
