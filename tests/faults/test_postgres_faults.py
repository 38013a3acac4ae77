"""Faults of PostgreSQL a run lives through (issue 44), in real processes against the test process's server
(tests/pg.py; restarted here: the tests of one process run one at a time) and the n8n stand-in: a fast and
an immediate restart mid-run, the database down past `db_down_after` (exit 69), a silent network
(tests/faults/relay.py), a run group's clock ten minutes ahead (faketime).
Each test prints what it measured. Skipped with the reason where PostgreSQL is not installed."""

import base64
import shutil
import subprocess
import sys
import time

import pytest

from scripts.standin import client
from tests import warm
from tests.faults.relay import SilentRelay
from tests.helpers import check_every_row, in_process, rows, scraper_env, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.slow]

RATE, BURST = 100, 5


def start_run(site, url, *extra, env=None):
    return warm.Popen([sys.executable, "-m", "scraper", "run", "--workers", "2", "--rate", str(RATE), "--burst",
                       str(BURST), "--lease", "3", "--timeout", "2", *extra],
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
    assert site.stats()["http_429"] == 0


def test_restarts_mid_run_cost_nothing_and_a_database_gone_for_good_ends_it_with_69(standin, pg_server):
    """A fast restart (an upgrade) and an immediate one (a crash) mid-run, then the database down past
    db_down_after: exit 69 with its sentence, and a second run finishes everything, nothing done twice,
    no attempt spent."""
    url = pg_server.durable_url()       # a crash must not take back what was acknowledged
    site = standin(templates=120, rate=RATE, burst=BURST)
    in_process(site, url, "seed", "--from-search", "--rate", str(RATE), check=0)
    run = start_run(site, url, env={"SCRAPER_DB_DOWN_AFTER": "2"})
    try:
        downs = []
        for mode, at in (("fast", 25), ("immediate", 55)):
            wait_until(lambda at=at: done(url) >= at, timeout=60)
            downs.append((mode, pg_server.restart(mode)))
        wait_until(lambda: done(url) >= 85, timeout=60)
        pg_server.shut_down("fast")
        gone = time.monotonic()
        code = run.wait(60)
        took = time.monotonic() - gone
        stderr = run.stderr.read()
    finally:
        if run.poll() is None:
            run.kill()
        pg_server.boot()
    print(f"restarts: {', '.join(f'{m} {s:.1f} s down' for m, s in downs)}, the run went on; then the database "
          f"gone: the run ended {took:.1f} s later (db_down_after 2 s), exit {code}")
    assert code == 69, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert stderr.count("answers again") >= 2        # every process came back after each restart
    errors = [line for line in stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "stayed unreachable for" in errors[0] and "db_down_after is 2 s" in errors[0], errors
    assert stderr.strip().splitlines()[-1].split(" ", 3)[-1].startswith("next: bring the database back")
    # everything still there: the next run finishes every job (those left running come back uncharged)
    again = start_run(site, url)
    assert again.wait(120) == 0, again.stderr.read()[-3000:]
    check_once(site, url)
    status = in_process(site, url, "status", check=0).stdout
    assert "2 outage(s) of the database lived through by runs" in status, status


def test_a_silent_network_is_noticed_and_the_run_goes_on(standin, pg_server, pg_migrated_url, tmp_path):
    """Every process goes on: the supervisor, the workers and the webhook relay (a batch it was sending when
    the network went silent waits for its endpoint's hold, as after any cut attempt)."""
    own_url = pg_migrated_url
    hook = client.start(kind="receiver", host="127.0.0.1")
    config = tmp_path / "scraper.toml"
    config.write_text(f'[[webhook]]\nurl = "{hook.url}/in"\nsecret = "${{HOOK_SECRET}}"\n')
    relay = SilentRelay(pg_server.port).start()
    via = own_url.replace(f":{pg_server.port}/", f":{relay.port}/")
    site = standin(templates=90, rate=RATE, burst=BURST)
    in_process(site, own_url, "seed", "--from-search", "--rate", str(RATE), check=0)
    # a round trip unanswered for 1 + 1 s counts as lost
    env = {"SCRAPER_DB_KEEPALIVE": "1", "SCRAPER_DB_STATEMENT_TIMEOUT": "1", "SCRAPER_DB_CONNECT_TIMEOUT": "2",
           "SCRAPER_CONFIG": str(config), "HOOK_SECRET": "whsec_" + base64.b64encode(b"k" * 32).decode()}
    run = start_run(site, via, env=env)
    try:
        wait_until(lambda: done(own_url) >= 20, timeout=60)
        relay.silence()
        time.sleep(2)
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
        hook.stop()
    print(f"the network silent 2 s: jobs finished again {back:.1f} s after it spoke (bound 2 s a round trip); "
          f"exit {code}")
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr
    assert "counts as lost" in stderr
    assert "webhook delivery: the database answers again" in stderr      # the relay went on too
    check_once(site, own_url)


# --- clocks ------------------------------------------------------------------------------------------

def faketime(offset):
    """The argv prefix that runs a command with its clock `offset` ahead (Debian's faketime: libfaketime
    preloaded, inherited by every process the command forks), or the test skipped with the reason."""
    if shutil.which("faketime") is None:
        pytest.skip("faketime is not installed (apt-get install faketime)")
    return ["faketime", "-f", offset]


@pytest.mark.timing
def test_a_run_group_ten_minutes_ahead_holds_the_rate_and_takes_no_lease_early(standin, pg_migrated_url):
    own_url = pg_migrated_url
    site = standin(templates=80, rate=40, burst=BURST, latency_ms=5)
    in_process(site, own_url, "seed", "--from-search", "--rate", "40", check=0)
    argv = [sys.executable, "-m", "scraper", "run", "--workers", "2", "--rate", "40", "--burst", str(BURST),
            "--lease", "3", "--timeout", "2"]
    env = scraper_env(site, own_url)
    # the group ahead is a new interpreter under libfaketime (the warm starter's fork would not preload it)
    ahead = subprocess.Popen(faketime("+10m") + argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    plain = warm.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       start_new_session=True)
    try:
        status = subprocess.run(faketime("+10m") + [sys.executable, "-m", "scraper", "status"], env=env,
                                capture_output=True, text=True, timeout=60)
        codes = (ahead.wait(120), plain.wait(120))
        errors = ahead.stderr.read()
    finally:
        for group in (ahead, plain):
            if group.poll() is None:
                group.kill()
    stats = site.stats()
    skew = next(line for line in status.stdout.splitlines() if line.startswith("clock"))
    print(f"one group 10 min ahead: max {stats['max_in_1s']} requests in a second (rate 40 + burst {BURST}), "
          f"429s {stats['http_429']}; status: {skew!r}; exits {codes}")
    assert codes == (0, 0), errors[-3000:]
    assert "10m00s ahead of the database's" in skew
    assert "ahead of the database's" in errors      # the run said so at its start
    assert stats["max_in_1s"] <= 40 + BURST
    per_run = rows(own_url, "SELECT run_id, COUNT(*) AS n FROM run_jobs GROUP BY run_id")
    assert len(per_run) == 2 and all(r["n"] > 0 for r in per_run), per_run     # both groups worked
    check_once(site, own_url)


def test_a_rate_slot_left_an_hour_ahead_by_a_clock_stepped_back_costs_one_interval(pg_migrated_url):
    from scraper.db import slots, store
    conn = store.open_postgres(pg_migrated_url)
    try:
        slots.ensure(conn, "example.org")
        interval, tolerance = slots.gcra(10.0, 2)
        conn.raw("UPDATE domains SET slot_at = extract(epoch FROM clock_timestamp()) + 3600 WHERE domain = %s",
                 ("example.org",))
        first = slots.take(conn, "example.org", interval, tolerance)
        time.sleep(first)
        second = slots.take(conn, "example.org", interval, tolerance)
    finally:
        conn.close()
    print(f"a slot an hour ahead: waited {first:.2f} s, then {second:.2f} s")
    assert first == interval and second == 0.0
