"""Fixtures shared by the test files: a safe environment, the stand-ins as real processes, the worker on a
real queue with the network faked. Plain helpers live in tests/helpers.py."""

import gc
import os
import random
import re
import sys

import pytest
import responses

from scraper.base import settings
from scraper.base.clock import FakeClock
from scraper.db import politeness as politeness_rows
from scraper.db import store
from scraper.db.queue import Queue
from scraper.net import browser, http
from scraper.politeness import limiter, robots
from scraper.pool import worker
from scraper.sites import n8n
from scripts.standin import cdp, client
from tests import proxies, warm
from tests.helpers import API, NOW, SAFE_ENV, SITE, TID
from tests.pg import pg_migrated_url, pg_server, pg_url  # noqa: F401 - fixtures, registered by being here

# pytest keeps a test module with its assertions rewritten only where bytecode may be written: where
# PYTHONDONTWRITEBYTECODE is set (our CI machines), every test process rewrote all 59 test modules again
# (8.8 s of CPU to collect, against 2.5 s with them kept). The test modules are imported after this file; this
# process only: what it starts keeps the setting.
sys.dont_write_bytecode = False

BACKENDS = ["sqlite", "postgres"]


def pytest_addoption(parser):
    parser.addoption("--pin-lanes", action="store_true",
                     help="pin each test process (pytest-xdist's gw0, gw1, ...) to a CPU of its own: the serial "
                          "phase of `make test`, one timing test at a time on each core")
    parser.addoption("--cold", action="store_true",
                     help="start every command and stand-in in a new interpreter; by default the tests not "
                          "marked `cold` fork theirs from a warm starter (tests/warm.py)")


def pytest_configure(config):
    """The stand-ins start through the warm starter where it is on (tests/warm.py). With --pin-lanes, this
    test process and all it starts (the scraper, the stand-ins, Chromium) run on one CPU of their own. CPU
    affinity is inherited across fork, exec and new sessions, unlike `nice`, which only weighs within a
    session's autogroup (the scraper's runs and Chromium start sessions of their own), so a rate window or a
    deadline in one lane never waits for the other lane's work."""
    client.popen = warm.Popen
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not config.getoption("pin_lanes") or not worker.startswith("gw") or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[int(worker[2:]) % len(cpus)]})


def pytest_unconfigure(config):
    warm.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """The commands and stand-ins of a test (its fixtures' included) start warm (tests/warm.py), but for the
    tests marked `cold`, which measure what a new interpreter holds (PSS, RSS) or run as a user would."""
    warm.enabled = (warm.REFUSED is None and not item.config.getoption("cold")
                    and item.get_closest_marker("cold") is None)


def pytest_report_header(config):
    """Said once, at the top: why the commands start cold where the warm starter refuses this interpreter."""
    if warm.REFUSED is not None:
        return f"warm starter: off, every command starts in a new interpreter ({warm.REFUSED})"
    return None


def pytest_collection_finish(session):
    """What collection built (the test modules, their fixtures' data, hypothesis) lives until the end: kept out
    of the cyclic garbage collector's full passes, which walked it again and again (sampled with perf over the
    parallel phase: the collector was about 7 % of the test processes' CPU)."""
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    """With --pin-lanes, the longest tests first (the slow ones, Chromium's first among them and among the
    rest), so the lanes end together rather than one lane starting a long test when the other is nearly
    done (the three longest, 16-23 s, are the acceptance, hostile and PostgreSQL run-group tests)."""
    if config.getoption("pin_lanes"):
        items.sort(key=lambda item: (item.get_closest_marker("slow") is None,
                                     item.get_closest_marker("chromium") is None))


@pytest.fixture(autouse=True)
def safe_env(monkeypatch, tmp_path):
    for name, value in SAFE_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SCRAPER_DB", str(tmp_path / "jobs.db"))
    monkeypatch.delenv("SCRAPER_SOURCES", raising=False)     # the built-in n8n source unless a test gives a file


def _factory(youtube):
    started = []

    def start(**options):
        site = client.start(youtube=youtube, **options)
        started.append(site)
        return site

    return start, started


@pytest.fixture
def standin():
    """A factory: standin(templates=60, rate=20, burst=5, latency_ms=0, faults="", ...) -> client.Standin."""
    start, started = _factory(youtube=False)
    yield start
    for site in started:
        site.stop()


@pytest.fixture
def proxy_servers(tmp_path):
    """A factory: proxy_servers(bind="127.0.0.2", user=None, password=None, port=None) -> a tinyproxy
    (tests.proxies), or proxy_servers(mode="dead" | "garbage" | "407" | "reset") -> a misbehaving one; every
    one stopped at the end."""
    started = []

    def start(bind="127.0.0.2", user=None, password=None, mode=None, port=None):
        proxy = proxies.ScriptedProxy(mode) if mode else proxies.Tinyproxy(tmp_path, bind, user, password, port)
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


@pytest.fixture
def youtube_standin():
    """A factory: youtube_standin(rate=5, burst=2, latency_ms=0, block_after=N, block_s=S, block_mode=M)."""
    start, started = _factory(youtube=True)
    yield start
    for site in started:
        site.stop()


@pytest.fixture(scope="module")
def cdp_endpoint(tmp_path_factory):
    """Debian's Chromium, headless, as a DevTools endpoint on a free loopback port (`scripts/standin/cdp`): its
    http base URL, one for the module (each test leaves its targets as it found them; the Browserbase stand-in
    stands in front of it); its whole process group stopped at the end."""
    with cdp.endpoint(browser.find_browser("chromium"), str(tmp_path_factory.mktemp("cdp"))) as (url, _):
        yield url


@pytest.fixture
def db(tmp_path):
    return tmp_path / "jobs.db"


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path):
    """The contract tests' database, on each backend: a SQLite path, or the URL of a new PostgreSQL
    database already migrated (skipped with the reason where PostgreSQL is not installed)."""
    if request.param == "postgres":
        return request.getfixturevalue("pg_migrated_url")
    return str(tmp_path / "jobs.db")


ANY_ROBOTS = re.compile(r"https?://[^/]+/robots\.txt$")


@pytest.fixture
def net():
    """The network faked by `responses`; every host's robots.txt answers 404 (no rules) unless a test
    replaces it (`net.replace(responses.GET, ANY_ROBOTS, ...)`)."""
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        rsps.add(responses.GET, ANY_ROBOTS, status=404)
        yield rsps


@pytest.fixture
def make(backend):
    """make(ids=[TID], **settings) -> (worker, queue, clock), the jobs seeded as `scraper seed` would: a
    contract fixture, so the worker's, politeness' and mirror's tests run on SQLite and on PostgreSQL."""
    opened = []

    def build(ids=(TID,), limiter_kind="none", **options):
        s = settings.build(db_path=backend, api_url=API, site_url=SITE, **options)
        conn = store.open_db(s.db_path)
        q = Queue(conn)
        q.seed([(n8n.job_key(i), n8n.SITE, n8n.page_url(SITE, i), s.domain) for i in ids], now=NOW - 100)
        for url in (API, SITE):     # robots.txt known (404: no rules), so the tests count only their own requests
            politeness_rows.save_robots(conn, robots.host_of(url), NOW, 404, b"", None, None, ())
        lim = limiter.open_limiter(s) if limiter_kind == "domain" else limiter.NoLimiter()
        session = http.make_session(s.user_agent)
        clock = FakeClock(NOW)
        w = worker.Worker(s, "w1", q, lim, session, clock=clock, rng=random.Random(7))
        opened.append((conn, lim, session))
        return w, q, clock

    yield build
    for conn, lim, session in opened:
        session.close()
        lim.close()
        conn.close()
