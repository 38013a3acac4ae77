"""The browser fetcher on the system's Chromium: routing, gate, bounds, and no Chromium left behind.

Real Chromium, real processes, real signals; pages from a tiny local server on 127.0.0.1 (and 127.0.0.2
as another domain). Few and small: one browser for the in-process tests, two short-lived children."""

import http.server
import json
import os
import signal
import subprocess
import sys
import threading

import psutil
import pytest

from scraper.base.errors import ConfigError, FetchError, JobInvalid
from scraper.net import browser, chromium
from tests import warm
from tests.helpers import ROOT, answer, assert_page_bounds, wait_gone

# Chromium: run after the parallel phase, one at a time on its CPU (`make test`)
pytestmark = [pytest.mark.timing, pytest.mark.chromium]

EXECUTABLE = browser.find_browser("chromium")
needs_chromium = pytest.mark.skipif(
    EXECUTABLE is None or browser.problem("chromium") is not None,
    reason="no Chromium on PATH (apt-get install chromium) or no Playwright (pip install 'scraper[browser]')")

PAGE = b"""<!DOCTYPE html><html><head><title>t</title>
<link rel="stylesheet" href="http://127.0.0.2:{port}/other.css">
<style>@font-face {{ font-family: f; src: url(/font.woff2); }} body {{ font-family: f; }}</style></head>
<body><img src="/img.png"><div id="app"></div><script>
fetch("/api.json").then(r => r.json()).then(d => {{ document.getElementById("app").textContent = d.name; }})
  .catch(() => {{ document.getElementById("app").textContent = "refused"; }});
</script></body></html>"""
NEVER_SETTLES = (b"<html><body><script>setInterval(() => fetch('/api.json?' + Math.random()), 100);"
                 b"</script></body></html>")


class _Handler(http.server.BaseHTTPRequestHandler):
    seen = []

    def do_GET(self):
        self.seen.append((self.server.server_address[0], self.path))
        port = self.server.server_address[1]
        path = self.path.split("?")[0]
        if path.startswith("/to-"):     # /to-1/page: a redirect to 127.0.0.1:PORT/page, /to-2/...: another domain
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.{path[4]}:{port}{path[5:]}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body, kind = {
            "/page": (PAGE.replace(b"{port}", str(port).encode()).replace(b"{{", b"{").replace(b"}}", b"}"),
                      "text/html"),
            "/api.json": (b'{"name": "Jazz night"}', "application/json"),
            "/never": (NEVER_SETTLES, "text/html"),
            "/big": (b"<html><body>" + b"x" * 300_000 + b"</body></html>", "text/html"),
        }.get(path, (b"nothing", "text/plain"))
        answer(self, body, kind, 200 if path != "/missing" else 404)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def pages():
    """Two servers on one port number: 127.0.0.1 (the page's domain) and 127.0.0.2 (another domain)."""
    one = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    two = http.server.ThreadingHTTPServer(("127.0.0.2", one.server_address[1]), _Handler)
    for server in (one, two):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{one.server_address[1]}"
    for server in (one, two):
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def fetcher():
    f = browser.BrowserFetcher(EXECUTABLE, pages_per_browser=3)
    try:
        yield f
    finally:
        pids = f.pids()
        f.close()
        assert wait_gone(set(pids) - {os.getpid()} - warm.family(), -1) == []


@needs_chromium
def test_routing_gates_own_domain_and_refuses_the_rest(pages, fetcher):
    _Handler.seen.clear()
    gated = []
    status, final_url, html = fetcher.render(pages + "/page", gated.append, 20, 2**20)
    assert status == 200 and final_url == pages + "/page"
    assert "Jazz night" in html                                  # the script ran and its XHR was gated
    assert gated == [pages + "/page", pages + "/api.json"]       # every request sent took the gate first
    paths = {p for _, p in _Handler.seen}
    assert "/img.png" not in paths and "/font.woff2" not in paths    # images and fonts are never fetched
    assert all(host == "127.0.0.1" for host, _ in _Handler.seen)    # the other domain was refused
    # a source's allow_domains lets that domain's requests through the routing, gated like the rest
    gated.clear()
    fetcher.render(pages + "/page", gated.append, 20, 2**20, allow_domains=["127.0.0.2"])
    assert sorted(gated) == sorted([pages + "/page", pages.replace("127.0.0.1", "127.0.0.2") + "/other.css",
                                    pages + "/api.json"])


@needs_chromium
def test_redirects_are_gated_and_kept_within_the_domain(pages, fetcher):
    _Handler.seen.clear()
    gated = []
    status, final_url, html = fetcher.render(pages + "/to-1/page", gated.append, 20, 2**20)
    assert (status, final_url) == (200, pages + "/page") and "Jazz night" in html
    assert gated[:2] == [pages + "/to-1/page", pages + "/page"]     # the redirect's target took the gate too
    with pytest.raises(FetchError) as e:
        fetcher.render(pages + "/to-2/page", gated.append, 20, 2**20)
    assert e.value.kind == "http_4xx" and "another domain" in str(e.value)
    assert all(host == "127.0.0.1" for host, _ in _Handler.seen)    # nothing was sent to the other domain


@needs_chromium
def test_gate_refusals_and_bounds(pages, fetcher):
    def robots(url):
        if url.endswith("/api.json"):
            raise JobInvalid("robots", "disallowed by robots.txt")

    # a refused script request (robots) aborts that request only; the page still renders
    status, _, html = fetcher.render(pages + "/page", robots, 20, 2**20)
    assert status == 200 and "refused" in html

    assert_page_bounds(fetcher, pages, 3)
    assert fetcher.launches >= 2        # retired after 3 pages: a fresh browser for the next ones


@needs_chromium
def test_missing_browser_is_one_sentence(tmp_path):
    sentence = browser.problem(str(tmp_path / "no-chromium"))
    assert sentence.endswith("install Debian's chromium or set --browser-path.")
    with pytest.raises(ConfigError):
        browser.require("no-such-chromium-anywhere")


@needs_chromium
@pytest.mark.slow
@pytest.mark.parametrize("whole_group", [False, True], ids=["worker", "group"])
def test_no_chromium_outlives_a_killed_worker(pages, whole_group):
    """kill -9 of the worker alone, or of its whole process group (Playwright's driver included)."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; from tests.helpers import browser_child; browser_child(*sys.argv[1:])",
         EXECUTABLE, pages + "/page"], cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True)
    info = None
    try:
        info = json.loads(child.stdout.readline())
        assert info["status"] == 200 and info["browser"]
        if whole_group:
            os.killpg(child.pid, signal.SIGKILL)
        else:
            os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert wait_gone(set(info["pids"]), info["browser"]) == []
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        if info and info.get("browser"):
            try:
                os.killpg(info["browser"], signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_sources_that_need_a_browser_are_named(tmp_path):
    from types import SimpleNamespace

    from scraper.base import settings

    def source(name, fetcher):
        return SimpleNamespace(name=name, opt=lambda key, default=None: fetcher if key == "fetcher" else default)
    s = settings.build(db_path=str(tmp_path / "jobs.db"), browser_path=str(tmp_path / "none"))
    sentence, names = browser.sources_without_browser(s, [source("n8n", "http"), source("events", "auto")])
    assert names == ("events",) and "install Debian's chromium or set --browser-path" in sentence
    assert browser.sources_without_browser(s, [source("n8n", "http")]) == (None, ())
    assert settings.build(db_path=str(tmp_path / "jobs.db"), timeout_s=12).browser_deadline_s == 12
    assert settings.build(db_path=str(tmp_path / "jobs.db"), browser_timeout_s=20).browser_deadline_s == 20
    with pytest.raises(ConfigError):
        settings.build(db_path=str(tmp_path / "jobs.db"), browser_timeout_s=0)


def test_browser_slots_bound_the_browsers_across_processes(tmp_path):
    from scraper.base import settings
    assert chromium.slots_for(settings.MEMORY_LIMIT_MB, settings.WORKERS) == 1     # 4 workers under 1 GB
    assert chromium.slots_for(2048, 4) == 4
    assert chromium.slots_for(300, 2) == 1
    path = str(tmp_path / "jobs.db-browser.lock")
    mine = browser.BrowserSlots(path, 1)
    probe = [sys.executable, "-c", "import sys; from scraper.net.browser import BrowserSlots; "
             "sys.exit(0 if BrowserSlots(sys.argv[1], 1).try_acquire() else 1)", path]
    assert mine.try_acquire()
    assert subprocess.run(probe, cwd=ROOT).returncode == 1          # the one slot is taken
    mine.release()
    assert subprocess.run(probe, cwd=ROOT).returncode == 0
    mine.close()


def test_a_worker_waiting_with_a_fetched_page_is_seen_by_the_slot_holder(tmp_path):
    """`want` (a waiter that cannot give its job back) is seen by the holder's `wanted` in another process,
    and ends with the waiter's `unwant` or its death."""
    path = str(tmp_path / "jobs.db-browser.lock")
    holder = browser.BrowserSlots(path, 1)
    assert holder.try_acquire() and not holder.wanted()
    waiter = subprocess.Popen(
        [sys.executable, "-c", "import sys; from scraper.net.browser import BrowserSlots; s = BrowserSlots("
         "sys.argv[1], 1); assert not s.try_acquire(); s.want(); print('w', flush=True); sys.stdin.readline(); "
         "assert s.try_acquire(); s.unwant(); s.release(); print('u', flush=True); sys.stdin.readline()", path],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert waiter.stdout.readline() == "w\n"
        assert holder.wanted() and holder.wanted()          # looking does not take the wish away
        # the holder closes its browser for the waiter: it may not take the freed slot back before the
        # waiter, which looks only every SLOT_WAIT_S (it did, and launched a browser for every page)
        holder.release()
        assert not holder.try_acquire()
        waiter.stdin.write("\n")
        waiter.stdin.flush()
        assert waiter.stdout.readline() == "u\n"           # the waiter took the slot, then let it go
        assert not holder.wanted() and holder.try_acquire()
    finally:
        waiter.kill()
        waiter.wait()
    holder.close()


@needs_chromium
def test_a_browser_that_cannot_start_ends_the_attempt(tmp_path, fetcher):
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    fetcher.retire()
    real, fetcher.executable = fetcher.executable, str(fake)     # one Playwright per process: the same fetcher
    try:
        with pytest.raises(FetchError) as e:
            fetcher.render("http://127.0.0.1:9/", lambda u: None, 5, 2**20)
        assert e.value.kind == "internal" and "did not start" in str(e.value)
    finally:
        fetcher.executable = real


@needs_chromium
def test_a_retired_browser_takes_its_driver_along_and_the_next_page_starts_both_again(pages, fetcher):
    fetcher.retire()
    before = set(fetcher.pids())
    status, _, html = fetcher.render(pages + "/page", lambda u: None, 20, 2**20)
    assert status == 200 and "Jazz night" in html
    started = set(fetcher.pids()) - before - warm.family()
    names = set()
    for pid in started:         # a helper Chromium starts and ends at once may be gone already
        try:
            names.add(psutil.Process(pid).name())
        except psutil.NoSuchProcess:
            pass
    assert any(n.startswith("node") for n in names) and any("chrom" in n for n in names), names
    fetcher.retire()    # what a handed-over slot or a recycle does: nothing of this browser stays, its driver neither
    assert wait_gone(started, -1) == []
    launches = fetcher.launches
    status, _, html = fetcher.render(pages + "/page", lambda u: None, 20, 2**20)
    assert status == 200 and "Jazz night" in html and fetcher.launches == launches + 1


def test_the_driver_starts_with_small_young_generation_semi_spaces(monkeypatch):
    """An idle Playwright driver held 122 MB of PSS, 71 MB with 1 MB semi-spaces: the driver a worker starts
    gets the flag through NODE_OPTIONS; a user's own options are kept, and their own semi-space size wins."""
    monkeypatch.setenv("NODE_OPTIONS", "--max-old-space-size=512")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    seen = {}

    def in_a_thread_of_its_own():     # as a lane: no event loop of another test's in this thread
        driver = browser.Driver()
        pw = driver.take("test")
        try:
            seen["env"] = [p.environ().get("NODE_OPTIONS") for p in psutil.Process().children(recursive=True)
                           if p.pid not in before and "node" in p.name()]
            seen["shared"] = pw is driver.take("another")      # one driver for the thread's fetchers
        finally:
            driver.give("test")
            driver.give("another")

    t = threading.Thread(target=in_a_thread_of_its_own)
    t.start()
    t.join(60)
    assert seen["env"] == [f"--max-old-space-size=512 {browser.NODE_YOUNG}"] and seen["shared"]
    monkeypatch.setenv("NODE_OPTIONS", "--max-semi-space-size=4")
    browser._small_young_generation()
    assert os.environ["NODE_OPTIONS"] == "--max-semi-space-size=4"
