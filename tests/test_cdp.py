"""The driverless renderer of `cdp:` and `browserbase` endpoints (net/cdp, net/cdppage): the client against a
hostile "browser" (a websocket server on 127.0.0.1 that answers garbage, too much, nothing, or hangs up), and
against Debian's Chromium as the endpoint: the page rules of net/pagerules hold as they do for the local
browser, and no Playwright driver runs in the worker."""

import contextlib
import json
import os
import threading

import psutil
import pytest

from scraper.base import endpoints, proxies
from scraper.base.errors import FetchError, JobInvalid, SessionLost
from scraper.db import browsersessions, store
from scraper.net import browser, cdp
from scraper.products import status
from tests.helpers import assert_page_bounds, wait_until
from tests.test_browser import _Handler, pages  # noqa: F401 - `pages`: the fixture, registered by being here
from tests.test_remote_browser import needs_chromium

CAP = 4096      # the hostile tests' message cap


@contextlib.contextmanager
def hostile(answer):
    """A websocket server on 127.0.0.1 whose every command is answered by `answer(ws, message)` (it may send
    anything, or close); yields its ws URL."""
    from websockets.sync.server import serve

    def handler(ws):
        with contextlib.suppress(Exception):
            for raw in ws:
                answer(ws, json.loads(raw))

    with serve(handler, "127.0.0.1", 0, compression=None) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"ws://127.0.0.1:{server.socket.getsockname()[1]}/devtools/browser/x"
        finally:
            server.shutdown()
            thread.join(5)


def reply(ws, message, **fields):
    ws.send(json.dumps({"id": message["id"], **fields}))


@pytest.mark.parametrize(("answer", "said", "error"), [
    (lambda ws, m: ws.send("{not json"), "a message that is not JSON", cdp.ProtocolError),
    (lambda ws, m: ws.send("[1, 2]"), "a JSON list, not an object", cdp.ProtocolError),
    (lambda ws, m: ws.send(b"\x00\x01"), "a binary message", cdp.ProtocolError),
    (lambda ws, m: ws.send('{"method": 5}'), "neither an answer nor an event", cdp.ProtocolError),
    (lambda ws, m: reply(ws, {"id": m["id"] + 7}, result={}), "an answer to no command of ours", cdp.ProtocolError),
    (lambda ws, m: reply(ws, m, result=[]), "with no result object", cdp.ProtocolError),
    (lambda ws, m: reply(ws, m, result={"x": "y" * CAP}), "a message larger than", cdp.ProtocolError),
    (lambda ws, m: ws.close(), "Connection closed", cdp.Closed),
    (lambda ws, m: reply(ws, m, error={"message": "no " * 500}), "Target.createTarget: no no", cdp.CommandFailed),
], ids=["not-json", "array", "binary", "bad-event", "stranger", "no-result", "oversized", "hang-up", "error"])
def test_a_hostile_browser_ends_the_command_with_a_reason_and_a_broken_connection_stays_broken(answer, said, error):
    with hostile(answer) as url:
        conn = cdp.Connection.open(url, 5, CAP)
        try:
            with pytest.raises(error) as e:
                conn.send("Target.createTarget", {"url": "about:blank"}, deadline=_soon())
            assert said in str(e.value) and url not in str(e.value) and len(str(e.value)) < 300
            if error is not cdp.CommandFailed:     # the connection cannot be trusted any more: every call says so
                assert not conn.is_connected()
                with pytest.raises(error):
                    conn.post("Target.getTargets")
            else:
                assert conn.is_connected()
        finally:
            conn.close()


def test_an_answer_after_its_deadline_is_dropped_and_events_reach_the_listener():
    late = threading.Event()

    def answer(ws, message):
        if message["method"] == "Slow.command":
            late.wait(5)        # answered only once the client gave up on it
        ws.send(json.dumps({"method": "Some.event", "params": {"n": message["id"]}}))
        reply(ws, message, result={"n": message["id"]})

    with hostile(answer) as url:
        conn = cdp.Connection.open(url, 5, CAP)
        seen = []
        conn.listener = lambda session, method, params: seen.append((method, params["n"]))
        try:
            with pytest.raises(cdp.Timeout):
                conn.send("Slow.command", deadline=_soon(0.05))
            late.set()
            assert conn.send("Quick.command", deadline=_soon()) == {"n": 2}     # the late answer came first
            assert seen == [("Some.event", 1), ("Some.event", 2)] and conn.is_connected()
        finally:
            conn.close()


def test_an_endpoint_that_refuses_the_upgrade_or_is_not_there_is_refused_naming_no_secret():
    from websockets.sync.server import serve

    def full(connection, request):     # a provider at capacity answers the upgrade with 429
        return connection.respond(429, "full\n")

    with serve(lambda ws: None, "127.0.0.1", 0, process_request=full) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.socket.getsockname()[1]
        with pytest.raises(cdp.Refused) as e:
            cdp.Connection.open(f"ws://127.0.0.1:{port}/?token=tok-5f3a9c", 5, CAP)
        server.shutdown()
    assert str(e.value) == "the websocket upgrade was answered HTTP 429"
    with pytest.raises(cdp.Refused) as e:
        cdp.Connection.open(f"ws://127.0.0.1:{port}/?token=tok-5f3a9c", 5, CAP)
    assert "tok-5f3a9c" not in str(e.value)


@pytest.fixture
def recorded(tmp_path):
    """A real SQLite database and the Recorder a worker's remote browser writes its sessions through."""
    conn = store.open_db(str(tmp_path / "jobs.db"))
    yield conn, browsersessions.Recorder(conn, 1, "w0-1", "here", os.getpid(), lambda: 100.0)
    conn.close()


@pytest.mark.parametrize(("answer", "kind", "error"), [
    (lambda ws, m: ws.send("{not json"), "protocol", FetchError),
    (lambda ws, m: reply(ws, m, result={"browserContextId": "x" * 2**21}), "protocol", FetchError),
    (lambda ws, m: ws.close(), "disconnect", SessionLost),
], ids=["garbage", "oversized", "hang-up"])
def test_a_hostile_browser_ends_the_pages_attempt_not_the_worker(recorded, answer, kind, error):
    conn, recorder = recorded
    with hostile(answer) as url:
        fetcher = browser.BrowserFetcher(None, endpoint=endpoints.parse("cdp:" + url), sessions=recorder,
                                         max_bytes=100)     # a message cap of 6 x 100 bytes + 1 MB
        try:
            for _ in range(2):      # and again: the fetcher retired the session and opens a new one
                with pytest.raises(error) as e:
                    fetcher.render("http://127.0.0.1:9/page", lambda u: None, 5, 100)
                assert isinstance(e.value, SessionLost) or e.value.kind == "network"
                assert "the browser" in str(e.value) and fetcher._browser is None
        finally:
            fetcher.close()
    shown = status.browser_sessions(conn, 1, 200.0)
    assert [(s["provider"], s["open"], s["errors_by_kind"][kind]) for s in shown] == [("cdp", False, 1)] * 2


def test_a_session_the_browser_closed_between_pages_is_opened_again_not_lost(recorded):
    """A provider that ends an idle session (its timeout): the next page opens a new one; nothing is lost."""
    from websockets.sync.server import serve
    conn, recorder = recorded
    timed_out, sessions = threading.Event(), []

    def session(ws):
        sessions.append(ws)
        if len(sessions) == 1:      # the first session ends when the test says; the next stays open
            timed_out.wait(5)
            ws.close()
        with contextlib.suppress(Exception):
            for _ in ws:
                pass

    with serve(session, "127.0.0.1", 0, compression=None) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"ws://127.0.0.1:{server.socket.getsockname()[1]}/devtools/browser/x"
        fetcher = browser.BrowserFetcher(None, endpoint=endpoints.parse("cdp:" + url), sessions=recorder)
        try:
            fetcher.ready()
            first = fetcher._browser
            timed_out.set()
            assert wait_until(lambda: not first.is_connected(), timeout=5, every=0.01)
            fetcher.ready()
            assert fetcher.launches == 2 and fetcher._browser.is_connected()
        finally:
            fetcher.close()
            server.shutdown()
    shown = status.browser_sessions(conn, 1, 200.0)
    assert [(s["open"], s["errors"]) for s in shown] == [(False, 0)] * 2


# --- Debian's Chromium as the endpoint -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def remote(cdp_endpoint):
    f = browser.BrowserFetcher(None, endpoint=endpoints.parse("cdp:" + cdp_endpoint), pages_per_browser=50)
    yield f
    f.close()


@pytest.mark.chromium
@needs_chromium
def test_a_page_over_cdp_runs_no_driver_in_the_worker(pages, remote):  # noqa: F811 - the fixture
    """While the page renders (its gate runs mid-page), nothing new runs under this process but what the
    endpoint's Chromium (started by the fixture) starts under itself: no Playwright driver (node)."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    mid_page = []

    def gate(url):
        for p in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if p.pid not in before and not before & {parent.pid for parent in p.parents()}:
                    mid_page.append(p.name())

    status_, _, html = remote.render(pages + "/page", gate, 20, 2**20)
    assert mid_page == [] and status_ == 200 and "Jazz night" in html


@pytest.mark.chromium
@needs_chromium
def test_the_page_rules_hold_over_cdp_as_in_the_local_browser(pages, remote):  # noqa: F811 - the fixture
    """test_browser's routing, redirects, gate refusals and bounds, on the driverless renderer."""
    _Handler.seen.clear()
    gated = []
    status_, final_url, html = remote.render(pages + "/page", gated.append, 20, 2**20)
    assert (status_, final_url) == (200, pages + "/page") and "Jazz night" in html and html.startswith("<!DOCTYPE")
    assert gated == [pages + "/page", pages + "/api.json"]
    paths = {p for _, p in _Handler.seen}
    assert "/img.png" not in paths and "/font.woff2" not in paths
    assert all(host == "127.0.0.1" for host, _ in _Handler.seen)     # the other domain refused
    gated.clear()
    remote.render(pages + "/page", gated.append, 20, 2**20, allow_domains=["127.0.0.2"])
    assert sorted(gated) == sorted([pages + "/page", pages.replace("127.0.0.1", "127.0.0.2") + "/other.css",
                                    pages + "/api.json"])
    # a redirect's next hop takes the gate; one to another domain fails the page, nothing sent there
    gated.clear()
    status_, final_url, html = remote.render(pages + "/to-1/page", gated.append, 20, 2**20)
    assert (status_, final_url) == (200, pages + "/page") and gated[:2] == [pages + "/to-1/page", pages + "/page"]
    assert remote.render(pages + "/to-1" * 5 + "/page", lambda u: None, 20, 2**20)[1] == pages + "/page"
    with pytest.raises(FetchError) as e:
        remote.render(pages + "/to-1" * 6 + "/page", lambda u: None, 20, 2**20)
    assert e.value.kind == "http_4xx" and "more than 5 redirects" in str(e.value)
    _Handler.seen.clear()
    with pytest.raises(FetchError) as e:
        remote.render(pages + "/to-2/page", gated.append, 20, 2**20)
    assert e.value.kind == "http_4xx" and "another domain" in str(e.value)
    assert all(host == "127.0.0.1" for host, _ in _Handler.seen)

    def robots(url):
        if url.endswith("/api.json"):
            raise JobInvalid("robots", "disallowed by robots.txt")

    assert "refused" in remote.render(pages + "/page", robots, 20, 2**20)[2]    # that request alone refused

    assert_page_bounds(remote, pages, 1.5)
    assert remote.render(pages + "/missing", lambda u: None, 20, 2**20, settle="body")[0] == 404
    assert remote.launches == 1     # none of these cost the session


@pytest.mark.chromium
@needs_chromium
@pytest.mark.parametrize("mode", ["dead", "reset"])
def test_a_proxy_that_fails_under_a_remote_page_is_the_proxys_failure(pages, remote, proxy_servers, mode):  # noqa: F811
    """A proxy that resets the connection, or resets it mid-body (Chromium would show what came): the page
    fails, in words that say the proxy did (the caller quarantines it and tries another), as Playwright's do."""
    proxy = proxies.parse(proxy_servers(mode=mode).url)
    with pytest.raises(FetchError) as e:
        remote.render(pages.replace("127.0.0.1", "127.0.0.2") + "/page", lambda u: None, 8, 2**20, proxy=proxy)
    assert e.value.kind == "network" and browser.is_proxy_failure(e.value), str(e.value)


def _soon(s=5.0):
    import time
    return time.monotonic() + s
