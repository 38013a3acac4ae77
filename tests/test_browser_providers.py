"""Remote browsers by provider (issue 42): a Playwright server (`playwright:WS-URL`)."""

import pytest

from scraper.base import endpoints
from scraper.base import settings as settings_mod
from scraper.base.errors import HandedBack
from scraper.net import browser
from scripts.standin import browsers
from tests.helpers import script_page

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
