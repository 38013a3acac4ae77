"""Faults of PostgreSQL a run lives through (issue 44), in real processes against a real server of its own
(restarted here, so no other test shares it) and the n8n stand-in: a fast and an immediate restart
mid-run, the database down past `db_down_after` (exit 69), a silent network (tests/faults/relay.py).
Each test prints what it measured. Skipped with the reason where PostgreSQL is not installed."""

import subprocess
import sys
import time

import pytest

from tests import warm
from tests.faults.relay import SilentRelay
from tests.helpers import check_every_row, in_process, rows, scraper_env, wait_until
from tests.pg import Server, why_not

pytestmark = [pytest.mark.faults, pytest.mark.slow]

RATE, BURST = 60, 5


@pytest.fixture(scope="module")
def own_server():
    """A server only these tests use: they stop and restart it."""
    reason = why_not()
    if reason:
        pytest.skip(reason)
    server = Server(durable=True)
    try:
        server.start()
    except subprocess.CalledProcessError as e:
        server.stop()
        pytest.skip(f"PostgreSQL did not start: {(e.stderr or e.stdout or '').strip()[:300]}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_url(own_server):
    return own_server.migrated_url()


def start_run(site, url, *extra, env=None):
    return warm.Popen([sys.executable, "-m", "scraper", "run", "--workers", "2", "--rate", str(RATE), "--burst",
                       str(BURST), "--lease", "6", "--timeout", "5", *extra],
                      env={**scraper_env(site, url), **(env or {})}, stdout=subprocess.DEVNULL,
                      stderr=subprocess.PIPE, text=True, start_new_session=True)


def done(url):
    return rows(url, "SELECT COUNT(*) AS n FROM jobs WHERE status = 'done'")[0]["n"]


def check_once(site, url):
    """Every job done once, one version a template, no attempt spent and no breaker opened by the outage."""
    check_every_row(site, url)
    assert rows(url, "SELECT template_id FROM answers GROUP BY template_id, kind HAVING COUNT(*) > 1") == []
    assert rows(url, "SELECT key, attempts FROM jobs WHERE attempts > 1") == []
    assert rows(url, "SELECT domain FROM domains WHERE state <> 'closed' OR failures > 0") == []
    stats = site.stats()
    assert stats["http_429"] == 0


def test_a_fast_and_an_immediate_restart_mid_run_lose_nothing_and_charge_nobody(standin, own_server, own_url):
    site = standin(templates=240, rate=RATE, burst=BURST)
    in_process(site, own_url, "seed", "--from-search", "--rate", str(RATE), check=0)
    began = time.monotonic()
    run = start_run(site, own_url)
    try:
        downs = []
        for mode, at in (("fast", 60), ("immediate", 140)):
            wait_until(lambda at=at: done(own_url) >= at, timeout=60)
            downs.append((mode, own_server.restart(mode)))
        code = run.wait(120)
        stderr = run.stderr.read()
    finally:
        if run.poll() is None:
            run.kill()
    wall = time.monotonic() - began
    print(f"restarts {', '.join(f'{m} {s:.1f} s down' for m, s in downs)}; 240 templates at {RATE}/s in "
          f"{wall:.1f} s (without faults {240 / RATE:.1f} s of rate); exit {code}")
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert "the database is unreachable" in stderr and "answers again" in stderr
    check_once(site, own_url)


def test_a_database_down_past_db_down_after_ends_the_run_with_69_and_loses_nothing(standin, own_server, own_url):
    site = standin(templates=150, rate=RATE, burst=BURST)
    in_process(site, own_url, "seed", "--from-search", "--rate", str(RATE), check=0)
    run = start_run(site, own_url, env={"SCRAPER_DB_DOWN_AFTER": "2"})
    try:
        wait_until(lambda: done(own_url) >= 30, timeout=60)
        own_server.shut_down("fast")
        stopped = time.monotonic()
        code = run.wait(60)
        took = time.monotonic() - stopped
        stderr = run.stderr.read()
    finally:
        if run.poll() is None:
            run.kill()
        own_server.boot()
    print(f"the database down: the run ended {took:.1f} s later (db_down_after 2 s), exit {code}")
    assert code == 69, stderr[-3000:]
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if "stayed unreachable" in line]
    assert errors and all("db_down_after" in line for line in errors)
    assert stderr.strip().splitlines()[-1].split(" ", 3)[-1].startswith("next: bring the database back")
    # everything still there: a second run finishes every job, none done twice
    again = start_run(site, own_url)
    assert again.wait(120) == 0, again.stderr.read()[-3000:]
    check_every_row(site, own_url)
    assert rows(own_url, "SELECT template_id FROM answers GROUP BY template_id, kind HAVING COUNT(*) > 1") == []


def test_a_silent_network_is_noticed_and_the_run_goes_on(standin, own_server, own_url):
    relay = SilentRelay(own_server.port).start()
    via = own_url.replace(f":{own_server.port}/", f":{relay.port}/")
    site = standin(templates=200, rate=RATE, burst=BURST)
    in_process(site, own_url, "seed", "--from-search", "--rate", str(RATE), check=0)
    # a round trip unanswered for 1 + 1 s counts as lost
    env = {"SCRAPER_DB_KEEPALIVE": "1", "SCRAPER_DB_STATEMENT_TIMEOUT": "1", "SCRAPER_DB_CONNECT_TIMEOUT": "2"}
    run = start_run(site, via, env=env)
    try:
        wait_until(lambda: done(own_url) >= 50, timeout=60)
        relay.silence()
        time.sleep(4)
        before = done(own_url)
        relay.resume()
        resumed = time.monotonic()
        wait_until(lambda: done(own_url) > before, timeout=60, every=0.02)
        back = time.monotonic() - resumed
        code = run.wait(120)
        stderr = run.stderr.read()
    finally:
        if run.poll() is None:
            run.kill()
        relay.stop()
    print(f"the network silent 4 s: jobs finished again {back:.1f} s after it spoke (bound 2 s a round trip); "
          f"exit {code}")
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr
    assert "counts as lost" in stderr
    check_once(site, own_url)
