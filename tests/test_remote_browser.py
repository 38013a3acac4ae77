"""Remote browsers (issue 42): the browser_* keys, run-wide and per source, and what they refuse."""

import http.server as http_server
import json
import os
import re
import signal
import socket
import subprocess
import textwrap
import threading
import urllib.request

import psutil
import pytest

from scraper.base import endpoints, exitcodes, sources
from scraper.base import settings as settings_mod
from scraper.base.errors import ConfigError, HandedBack
from scraper.db import store
from scraper.db.queue import Queue
from scraper.net import browser, http
from scraper.politeness.limiter import NoLimiter
from scraper.pool import worker
from scripts.standin import client
from tests import test_fetcher_auto as auto
from tests.helpers import invoke, rows, script_page, wait_until

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
    plan = s.browser
    assert plan.endpoint.kind == "cdp" and plan.endpoint.url == "http://127.0.0.1:9222"
    assert (plan.sessions, plan.session_pages, plan.session_timeout_s) == (4, 7, 30.0)
    # a remote source needs no Chromium here: none is looked for
    from scraper.net import chromium
    assert chromium.sources_without_browser(
        settings_mod.build(sources=s.sources, browser_path="/nonexistent/chromium"), s.sources) == (None, ())


def test_two_sources_asking_for_different_browsers_are_refused_before_any_work(tmp_path):
    path = write_sources(tmp_path, """
        browser_endpoint = "cdp:http://127.0.0.1:9222"

        [[source]]
        name = "shop"
        kind = "catalogue"
        site = "http://127.0.0.2:1/"
        fetcher = "auto"
    """)
    db = str(tmp_path / "jobs.db")
    store.open_db(db).close()
    said = invoke("--sources", path, "run", db=db)
    assert said.exit_code == 2
    assert "source events renders with cdp:http://127.0.0.1:9222 and source shop with local" in said.output
    assert "run them apart with --source" in said.output
    s = settings_mod.build(sources=sources.load(path), sources_path=path, run_sources=("shop",))
    assert s.browser.endpoint == endpoints.Endpoint("local")


# --- a Chromium elsewhere, over CDP (Debian's, started here as the endpoint) --------------------------------

needs_chromium = pytest.mark.skipif(browser.problem("chromium") is not None,
                                    reason="no Chromium on PATH (apt-get install chromium) or no Playwright")


@pytest.fixture
def cdp_endpoint(tmp_path):
    """Debian's Chromium, headless, as a DevTools endpoint on a free loopback port: its http base URL."""
    profile, log_path = tmp_path / "cdp-profile", tmp_path / "cdp.log"
    profile.mkdir()
    with open(log_path, "w") as err:
        proc = subprocess.Popen([browser.find_browser("chromium"), "--headless", "--remote-debugging-port=0",
                                 f"--user-data-dir={profile}", "--no-first-run", "--disable-background-networking",
                                 "--disable-component-update", "--disable-sync", "about:blank",
                                 *(["--no-sandbox"] if os.geteuid() == 0 else [])],    # as net/browser launches it
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        found = wait_until(lambda: re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", log_path.read_text()),
                           timeout=15, every=0.05)
        yield f"http://127.0.0.1:{found.group(1)}"
    finally:
        # the whole group: Debian's `chromium-headless-shell` is a shell script that runs the browser without
        # exec, so ending the script alone left the browser running, orphaned
        stop_group(proc)


def stop_group(proc):
    """SIGTERM to `proc`'s process group, SIGKILL to whatever of it is left after 10 s."""
    def gone():
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return True
        return False
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait()
    try:
        wait_until(gone, timeout=10, every=0.05)
    except AssertionError:
        os.killpg(proc.pid, signal.SIGKILL)


def targets(base):
    """The endpoint's open targets (pages, workers): what a client that cleaned up leaves as it found it."""
    with urllib.request.urlopen(base + "/json/list", timeout=5) as answer:
        return sorted(t["type"] for t in json.loads(answer.read()))


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
def test_an_endpoint_that_refuses_hands_the_job_back_uncharged(tmp_path):
    with socket.socket() as s:      # a port nothing listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = settings_mod.build(db_path=str(tmp_path / "jobs.db"), workers=1, no_limit=True, robots="ignore",
                             browser_endpoint=f"cdp:http://127.0.0.1:{port}")
    conn = store.open_db(cfg.db_path)
    queue = Queue(conn)
    url = "http://127.0.0.2:9/live/x-1"
    queue.seed([("events:/live/x-1", "catalogue", url, "127.0.0.2")], now=1.0)
    session = http.make_session(cfg.user_agent)
    w = worker.Worker(cfg, "w0-1", queue, NoLimiter(), session=session)
    try:
        job = queue.claim(w.name, 2.0, cfg.lease_s, sites=["catalogue"])
        with pytest.raises(HandedBack):
            w.context(job).render(job.url)
        # the run's remote sessions bound it, not the local browser slots
        assert (w.browser.slots.path, w.browser.slots.n) == (cfg.sessions_lock_path, cfg.browser_sessions)
        assert w.browser.pids() and not any("chrom" in psutil.Process(p).name().lower() for p in w.browser.pids())
    finally:
        w.close()
        session.close()
    (row,) = rows(cfg.db_path, "SELECT status, attempts FROM jobs")
    assert (row["status"], row["attempts"]) == ("pending", 0)       # back in the queue, no attempt spent
    assert not rows(cfg.db_path, "SELECT * FROM requests")          # nothing reached (or was charged to) the site
    conn.close()


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
def test_a_hostile_endpoint_hands_the_job_back_uncharged_and_the_worker_goes_on(tmp_path, answer, caplog):
    handler = type("Answer", (_Hostile,), {"answer": answer})
    server = http_server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    cfg = settings_mod.build(db_path=str(tmp_path / "jobs.db"), workers=1, no_limit=True, robots="ignore",
                             browser_endpoint=f"cdp:http://127.0.0.1:{server.server_address[1]}")
    conn = store.open_db(cfg.db_path)
    queue = Queue(conn)
    queue.seed([("events:/live/x-1", "catalogue", "http://127.0.0.2:9/live/x-1", "127.0.0.2")], now=1.0)
    session = http.make_session(cfg.user_agent)
    w = worker.Worker(cfg, "w0-1", queue, NoLimiter(), session=session)
    try:
        job = queue.claim(w.name, 2.0, cfg.lease_s, sites=["catalogue"])
        with caplog.at_level("INFO"), pytest.raises(HandedBack):
            w.context(job).render(job.url)
    finally:
        w.close()
        session.close()
        server.shutdown()
    (row,) = rows(cfg.db_path, "SELECT status, attempts FROM jobs")
    assert (row["status"], row["attempts"]) == ("pending", 0)
    assert any("refused a session" in r.getMessage() for r in caplog.records)     # the reason, in one line
    conn.close()
