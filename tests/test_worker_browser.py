"""The worker's browser (Context.render): every request a script-rendered page sends takes the domain's
rate slot in the shared limiter, against the catalogue stand-in's strict bucket; the browser is closed with
the worker. Real Chromium, real SQLite, the stand-in on 127.0.0.2."""

import pytest

from scraper.base import settings
from scraper.db import store
from scraper.db.queue import Queue
from scraper.net import browser, http
from scraper.politeness.limiter import DomainLimiter
from scraper.pool import worker
from scripts.standin import client
from tests import warm
from tests.helpers import wait_gone

pytestmark = [pytest.mark.timing, pytest.mark.chromium, pytest.mark.skipif(browser.problem("chromium") is not None,
                                reason="no Chromium on PATH (apt-get install chromium) or no Playwright")]


@pytest.fixture
def catalogue():
    site = client.start(catalogue=True, events=12, seed=3, rate=2, burst=2)
    try:
        yield site
    finally:
        site.proc.terminate()
        site.proc.wait()


@pytest.mark.slow
def test_script_rendered_pages_take_a_rate_slot_for_every_request(catalogue, tmp_path):
    live = [e["url"] for e in catalogue.truth()["events"] if "/live/" in e["url"]][:2]
    assert live
    s = settings.build(db_path=str(tmp_path / "jobs.db"), rate_per_s=2, burst=2, timeout_s=20, workers=1)
    conn = store.open_db(s.db_path)
    queue = Queue(conn)
    queue.seed([(f"events:{url.split(':', 2)[2]}", "catalogue", url, "127.0.0.2") for url in live], now=1.0)
    limiter = DomainLimiter(s.limiter_path, s.rate_per_s, s.burst, rate_of=s.rate_for)
    session = http.make_session(s.user_agent)      # the page's robots.txt comes through the worker's own GET
    w = worker.Worker(s, "w0-1", queue, limiter, session=session)
    pids = []
    try:
        for _ in live:
            job = queue.claim(w.name, 2.0, s.lease_s, sites=["catalogue"])
            final_url, html = w.context(job).render(job.url)
            assert final_url == job.url and "application/ld+json" in html    # the script built the record
            pids = set(w.browser.pids()) - {catalogue.proc.pid} - warm.family()    # the browser's alone
    finally:
        w.close()
        session.close()
        limiter.close()
        conn.close()
    stats = catalogue.stats()
    assert stats["robots"] == 1                         # read once, before the first page, then kept
    assert stats["by_kind"].get("live_page") == len(live) and stats["by_kind"].get("live_json") == len(live)
    assert stats["http_429"] == 0                       # the page and its script's request, each within the rate
    assert wait_gone(pids, -1) == []                    # the worker's close closed its browser
