"""What the operator sees (issue 12): a status that knows whether a run is alive, a rate from the first
seconds, a database that knows its site, `failures`, errors that say what to do, timestamped lines."""

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import responses
from click.testing import CliRunner
from responses import matchers

from scraper import cli
from scraper.base import settings
from scraper.db import runstate, store
from scraper.db.queue import Queue
from scraper.policy import outcome
from scraper.products import status as status_report
from scraper.sites import n8n
from tests import warm
from tests.conftest import ANY_ROBOTS
from tests.helpers import (
    in_process,
    jobs_in,
    rows,
    run_on_a_terminal,
    scraper,
    scraper_env,
    search_items,
    start_scraper,
    status_json,
    wait_until,
)

API = "http://api.test/api"
SITE = "http://site.test"
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
STAMPED = re.compile(rf"^{STAMP} ")


def invoke(*args, db, api=API, site=SITE, env=None):
    return CliRunner().invoke(cli.main, ["--db", str(db), "--api-url", api, "--site-url", site, *args], env=env)


def seed_ids(db, ids, api=API, site=SITE, *more):
    ids_file = db.parent / "ids.txt"
    ids_file.write_text("".join(f"{i}\n" for i in ids))
    return invoke("seed", "--ids", str(ids_file), *more, db=db, api=api, site=site)


def one_error_line(result):
    lines = [line for line in result.output.splitlines() if " Error: " in line]
    assert len(lines) == 1 and STAMPED.match(lines[0]), result.output
    assert "Traceback" not in result.output
    return lines[0].split(" Error: ", 1)[1]


# --- the database remembers where it came from ---------------------------------------------------

def test_a_database_seeded_from_one_url_refuses_another(tmp_path):
    db = tmp_path / "jobs.db"
    assert seed_ids(db, [1, 2, 3]).exit_code == 0
    other_api, other_site = "http://127.0.0.1:9/api", "http://127.0.0.1:9"
    for command in (["run"], ["seed", "--ids", str(tmp_path / "ids.txt")]):
        result = invoke(*command, db=db, api=other_api, site=other_site)
        assert result.exit_code == 2, result.output
        message = one_error_line(result)
        assert f"--api-url {API} and --site-url {SITE}" in message and "--adopt-urls" in message
    # refused before anything changed: the same jobs, pointing at the same site
    urls = [r["url"] for r in rows(db, "SELECT url FROM jobs ORDER BY id")]
    assert urls == [f"{SITE}/workflows/{i}" for i in (1, 2, 3)]


def test_adopt_urls_moves_the_database_and_its_jobs(tmp_path):
    db = tmp_path / "jobs.db"
    seed_ids(db, [1, 2])
    new_api, new_site = "http://other.test/api", "http://other.test"
    result = seed_ids(db, [3], new_api, new_site, "--adopt-urls")
    assert result.exit_code == 0, result.output
    assert rows(db, "SELECT api_url, site_url FROM source") == [{"api_url": new_api, "site_url": new_site}]
    jobs = rows(db, "SELECT url, domain FROM jobs ORDER BY id")
    assert jobs == [{"url": f"{new_site}/workflows/{i}", "domain": "other.test"} for i in (1, 2, 3)]
    assert seed_ids(db, [1], new_api, new_site).exit_code == 0          # the new URLs are now its own
    assert seed_ids(db, [1]).exit_code == 2                             # and the old ones refused


def test_a_database_from_before_the_source_table_is_judged_by_its_jobs(tmp_path):
    db = tmp_path / "jobs.db"
    seed_ids(db, [1])
    conn = store.connect(str(db))
    conn.execute("DELETE FROM source")
    conn.close()
    result = invoke("run", db=db, api="http://127.0.0.1:9/api", site="http://127.0.0.1:9")
    assert result.exit_code == 2 and SITE in one_error_line(result)


# --- failures ------------------------------------------------------------------------------------

@pytest.fixture
def failed_db(tmp_path):
    """Jobs 1..6: 1 done, 2 failed (403), 3 invalid (404), 4 failed (network), 5 pending, 6 failed (parse);
    finished in the order 1, 3, 2, 6, 4."""
    db = tmp_path / "jobs.db"
    seed_ids(db, range(1, 7))
    conn = store.open_db(str(db))
    q = Queue(conn)
    ends = [(1, "done", None, None, None), (3, "invalid", "http_4xx", "HTTP 404 Not Found", 404),
            (2, "failed", "http_4xx", "HTTP 403 Forbidden", 403), (6, "failed", "parse", "missing field 'id'", 200),
            (4, "failed", "network", "ConnectionError: reset", None)]
    for t, (tid, status, kind, message, http_status) in enumerate(ends, start=100):
        conn.execute("UPDATE jobs SET priority = 1 WHERE key = ?", (n8n.job_key(tid),))
        job = q.claim("w1", t, 60)
        assert job.key == n8n.job_key(tid)
        if status == "done":
            q.complete(job, "w1", t + 0.5, 10)
        else:
            q.fail(job, "w1", t + 0.5, status, kind, message, http_status)
        conn.execute("UPDATE jobs SET priority = 0")
    conn.close()
    return db


def test_failures_json_lists_every_failed_row_with_its_reason_newest_first(failed_db):
    result = invoke("failures", "--json", db=failed_db)
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert listed == [
        {"key": "n8n:4", "status": "failed", "error_kind": "network", "last_error": "ConnectionError: reset",
         "attempts": 1, "http_status": None},
        {"key": "n8n:6", "status": "failed", "error_kind": "parse", "last_error": "missing field 'id'",
         "attempts": 1, "http_status": 200},
        {"key": "n8n:2", "status": "failed", "error_kind": "http_4xx", "last_error": "HTTP 403 Forbidden",
         "attempts": 1, "http_status": 403},
        {"key": "n8n:3", "status": "invalid", "error_kind": "http_4xx", "last_error": "HTTP 404 Not Found",
         "attempts": 1, "http_status": 404},
    ]
    limited = json.loads(invoke("failures", "--json", "--limit", "2", db=failed_db).stdout)
    assert [r["key"] for r in limited] == ["n8n:4", "n8n:6"]


def test_failures_text_and_its_limit(failed_db):
    text = invoke("failures", "--limit", "3", db=failed_db).output.splitlines()
    # the time of each failure, then aligned columns: every row's key, status, kind... start at one place
    assert re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC  n8n:4  failed  network ", text[0]), text[0]
    assert "ConnectionError: reset" in text[0]
    full = invoke("failures", db=failed_db).output.splitlines()
    assert len({line.index(" HTTP ") for line in full}) == 1 and len({line.index("attempt(s)") for line in full}) == 1
    assert text[-1] == "... and 1 more (raise --limit to see them)."
    assert len(full) == 4


def test_failures_of_a_clean_database(tmp_path):
    db = tmp_path / "jobs.db"
    seed_ids(db, [1])
    assert invoke("failures", "--json", db=db).stdout.strip() == "[]"
    assert "no job is failed or invalid." in invoke("failures", db=db).output


# --- errors that say what was tried and what to do -----------------------------------------------

def test_seed_without_network_names_the_url_and_what_to_do(tmp_path):
    result = invoke("seed", "--from-search", db=tmp_path / "jobs.db", api="http://127.0.0.1:9/api",
                    site="http://127.0.0.1:9")
    assert result.exit_code == 1
    message = one_error_line(result)
    assert "http://127.0.0.1:9/robots.txt" in message        # robots.txt is the walk's first request
    assert "check the network or --api-url" in message and "make demo" in message
    assert len(message) < 300 and "urllib3" not in message and "Max retries" not in message


def test_a_failed_first_seed_leaves_the_folder_as_it_found_it(tmp_path):
    folder = tmp_path / "mirror"
    folder.mkdir()
    result = invoke("seed", "--from-search", "--backoff-base", "0", db=folder / "jobs.db",
                    api="http://127.0.0.1:9/api", site="http://127.0.0.1:9")
    assert result.exit_code == 1 and sorted(os.listdir(folder)) == []


def test_seed_retries_say_in_a_few_words_what_failed(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="scraper.politeness.robots")
    result = invoke("seed", "--from-search", "--backoff-base", "0", db=tmp_path / "jobs.db",
                    api="http://127.0.0.1:9/api", site="http://127.0.0.1:9")
    assert result.exit_code == 1
    # robots.txt is the walk's first request: it is retried with the walk's policy, then the walk gives up
    retries = [r.getMessage() for r in caplog.records if r.name == "scraper.politeness.robots"]
    assert len(retries) == 2          # --max-attempts 3: two retries, then the error
    for line in retries:
        assert "http://127.0.0.1:9/robots.txt" in line and "network (ConnectionError)" in line
        assert len(line) < 200 and "Max retries" not in line


def test_seed_with_a_wrong_api_url_names_the_url_it_tried(tmp_path):
    with responses.RequestsMock() as rsps:
        rsps.add(responses.GET, ANY_ROBOTS, status=404)
        rsps.add(responses.GET, f"{API}/templates/search", status=404)
        result = invoke("seed", "--from-search", db=tmp_path / "jobs.db")
    assert result.exit_code == 1
    message = one_error_line(result)
    assert f"{API}/templates/search?page=1" in message and "HTTP 404" in message and "--api-url" in message


def test_seed_against_a_host_that_never_answers_gives_up_after_timeout(tmp_path):
    silent = socket.socket()            # accepts connections (the kernel's backlog), never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    try:
        result = invoke("seed", "--from-search", "--timeout", "0.3", db=tmp_path / "jobs.db",
                        api=f"http://127.0.0.1:{port}/api", site=f"http://127.0.0.1:{port}")
    finally:
        silent.close()
    assert result.exit_code == 1, result.output
    message = one_error_line(result)
    assert f"http://127.0.0.1:{port}/robots.txt" in message and "within 0.3 s" in message
    assert "--timeout" in message and not (tmp_path / "jobs.db").exists()


def test_seed_timeout_is_validated(tmp_path):
    result = invoke("seed", "--from-search", "--timeout", "0", db=tmp_path / "jobs.db")
    assert result.exit_code == 2 and "--timeout" in one_error_line(result)


# --- user agent ----------------------------------------------------------------------------------

def test_the_default_user_agent_names_the_tool_and_its_version():
    from scraper import __version__
    assert settings.USER_AGENT.startswith(f"scraper/{__version__} ") and "example" not in settings.USER_AGENT


@pytest.mark.parametrize("how", ["option", "env"])
def test_user_agent_is_configurable(tmp_path, how):
    ua = "scraper/0.1.0 (+mailto:ops@example.org)"
    args, env = (["--user-agent", ua], None) if how == "option" else ([], {"SCRAPER_USER_AGENT": ua})
    with responses.RequestsMock() as rsps:
        rsps.add(responses.GET, ANY_ROBOTS, status=404, match=[matchers.header_matcher({"User-Agent": ua})])
        rsps.add(responses.GET, f"{API}/templates/search", match=[matchers.header_matcher({"User-Agent": ua})],
                 json={"totalWorkflows": 1, "workflows": search_items()[:1]})
        result = CliRunner().invoke(cli.main, ["--db", str(tmp_path / "jobs.db"), "--api-url", API, "--site-url",
                                               SITE, *args, "seed", "--from-search"], env=env)
    assert result.exit_code == 0, result.output


def test_a_user_agent_on_two_lines_is_refused(tmp_path):
    result = CliRunner().invoke(cli.main, ["--user-agent", "a\r\nX-Evil: 1", "--db", str(tmp_path / "j.db"),
                                           "seed", "--from-search"])
    assert result.exit_code == 2 and "--user-agent" in one_error_line(result)


# --- lines with timestamps -----------------------------------------------------------------------

def test_result_lines_and_click_errors_carry_a_timestamp(tmp_path):
    db = tmp_path / "jobs.db"
    out = seed_ids(db, [1, 2]).output
    assert re.match(rf"^{STAMP} seeded 2 new job\(s\); 0 already known\.$", out.strip()), out
    out = invoke("retry", "--failed", db=db).output
    assert re.match(rf"^{STAMP} moved 0 failed job\(s\) back to pending\.$", out.strip()), out
    bad = invoke("run", "--workers", "0", db=db)                      # our own error
    assert bad.exit_code == 2 and STAMPED.match(bad.output.splitlines()[-1])
    usage = invoke("run", "--no-such-option", db=db)                  # click's
    assert usage.exit_code == 2
    assert all(STAMPED.match(line) for line in usage.output.splitlines()), usage.output


# --- what to do next ------------------------------------------------------------------------------

@pytest.mark.parametrize("code, words", [
    (0, ["nothing to do", "`scraper update`"]),
    (1, ["3 job(s) are failed", "scraper failures", "scraper retry --failed"]),
    (3, ["n8n.io kept failing", "run again in 5m00s or later"]), (70, ["fix the cause"]),
    (75, ["let the run that holds it finish"]), (130, ["run again to resume"]), (143, ["run again to resume"]),
])
def test_each_ending_says_what_to_do_next(code, words):
    sentence = outcome.next_step(code, failed=3, domains=["n8n.io"], retry_in_s=300)
    assert sentence.startswith("next: ") and sentence.endswith(".")
    for word in words:
        assert word in sentence, sentence
    # the README teaches `update` (issue 46: an n8n run taught `seed --from-search`)
    assert "--from-search" not in sentence


# --- with real runs -------------------------------------------------------------------------------

def seeded(standin, tmp_path, templates, latency_ms=0, **site_options):
    """A stand-in and a database seeded from its listing; `latency_ms` holds every answer after the seed
    (the listing itself is not slowed: the tests wait on jobs, not on the walk)."""
    site = standin(templates=templates, **site_options)
    db = tmp_path / "jobs.db"
    in_process(site, db, "seed", "--from-search", check=0)
    if latency_ms:
        site.slow(factor=1, seconds=3600, base_ms=latency_ms)
    return site, db


@pytest.mark.slow
def test_a_live_run_shows_its_pid_and_a_killed_one_shows_none_with_its_orphans(standin, tmp_path):
    site, db = seeded(standin, tmp_path, templates=40, rate=50, burst=5, latency_ms=1500)
    # one job in flight a worker (--inflight 1): three workers, three running jobs
    proc = warm.Popen([sys.executable, "-m", "scraper", "run", "--workers", "3", "--rate", "50", "--inflight", "1"],
                      env=scraper_env(site, db), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                      start_new_session=True)
    try:
        wait_until(lambda: jobs_in(db, "running") == 3)
        live = status_json(site, db)
        assert live["run"]["pid"] == proc.pid and live["run"]["alive"] is True
        assert live["stale_running"] == 0
        assert f"run       pid {proc.pid} since" in scraper(site, db, "status", check=0).stdout
    finally:
        os.killpg(proc.pid, signal.SIGKILL)             # the whole group: supervisor and workers
        proc.wait(10)
    report = wait_until(lambda: (r := status_json(site, db))["run"] is None and r)  # the kernel frees the lock
    assert report["running"] == 3 and report["stale_running"] == 3
    assert report["rate_per_min"] == 0.0
    assert "3 row(s) marked running belong to no live run" in scraper(site, db, "status", check=0).stdout
    site.slow(seconds=0)                                # the next run need not wait 1.5 s an answer
    again = scraper(site, db, "run", "--workers", "2", "--rate", "50", "--timeout", "5")
    assert again.returncode == 0
    assert f"the previous run (pid {proc.pid}," in again.stderr and "ended without finishing" in again.stderr


@pytest.mark.slow
def test_a_killed_supervisor_shows_its_run_as_gone(standin, tmp_path):
    site, db = seeded(standin, tmp_path, templates=20, rate=50, burst=5, latency_ms=4000)
    proc = start_scraper(site, db, "run", "--workers", "2", "--rate", "50", "--inflight", "1")
    wait_until(lambda: jobs_in(db, "running") == 2)
    os.kill(proc.pid, signal.SIGKILL)                   # its workers live on until their 4 s answer is in
    proc.wait(10)
    report = status_json(site, db)
    assert report["run"]["pid"] == proc.pid and report["run"]["alive"] is False
    assert report["rate_per_min"] == 0.0
    assert "is gone; its orphaned workers still hold the database" in scraper(site, db, "status", check=0).stdout
    wait_until(lambda: status_json(site, db)["run"] is None, timeout=20)


def test_twelve_seconds_into_a_run_at_rate_5_the_rate_is_about_300_per_min(tmp_path):
    """A run 12 s old at 5 jobs/s has finished about 60 jobs; an earlier run finished 200 more a
    minute ago. The rate must be about 300/min (the old 60 s window said 60/min)."""
    db = tmp_path / "jobs.db"
    seed_ids(db, range(1, 401))
    now = time.time()
    started = now - 12
    conn = store.open_db(str(db))
    q = Queue(conn)
    ends = [started - 40 + i * 0.1 for i in range(200)] + [started + 0.2 + i * 0.2 for i in range(59)]
    for t in ends:
        q.complete(q.claim("w1", t - 0.1, 60), "w1", t, 10)
    conn.execute("INSERT INTO runs (pid, started_at, workers) VALUES (?, ?, 4)", (os.getpid(), started))
    conn.close()
    fd = os.open(f"{db}-run.lock", os.O_RDWR | os.O_CREAT, 0o644)
    import fcntl
    fcntl.flock(fd, fcntl.LOCK_EX)                      # this process is the live run
    try:
        # the report at the test's own `now` (the command would read the clock after the writes above)
        conn = store.connect(str(db))
        lock = f"{db}-run.lock"
        report = status_report.report(Queue(conn), now, runstate.current(conn, lock, now),
                                      runstate.runs(conn, lock, now))
        conn.close()
    finally:
        os.close(fd)
    assert report["run"]["alive"] and report["rate_window_s"] == 12
    assert abs(report["rate_per_min"] - 300) <= 0.3 * 300, report
    assert report["eta_s"] is not None and abs(report["eta_s"] - 141 * 60 / report["rate_per_min"]) < 1


@pytest.mark.slow
def test_status_watch_redraws_until_ctrl_c(standin, tmp_path):
    site, db = seeded(standin, tmp_path, templates=5)
    proc = warm.Popen([sys.executable, "-m", "scraper", "status", "--watch"], env=scraper_env(site, db),
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    while len(seen) < 2:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        if line.startswith("status at "):
            seen.append(line)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0 and "Traceback" not in err and "Aborted" not in err
    assert seen[0] != seen[1]                           # two redraws, a second apart


@pytest.mark.slow
def test_transient_retries_are_summarised_not_logged_one_by_one(standin, tmp_path):
    site, db = seeded(standin, tmp_path, templates=40, rate=100, burst=5, faults="503:0.3", seed=5)
    done = scraper(site, db, "run", "--workers", "2", "--rate", "100", "--backoff-base", "0.05",
                   "--max-attempts", "8")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "-> pending" not in done.stderr              # each retry is at DEBUG
    assert re.search(r"INFO \d+ failed attempts: http_5xx ×\d+", done.stderr), done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert STAMPED.match(last) and "next: nothing to do" in last
    assert all(STAMPED.match(line) for line in done.stderr.splitlines()), done.stderr


@pytest.mark.slow
def test_on_a_terminal_log_lines_never_land_on_the_progress_bar(standin, tmp_path):
    site, db = seeded(standin, tmp_path, templates=30, rate=30, burst=5, latency_ms=20, faults="503:0.2", seed=3)
    code, text = run_on_a_terminal(["run", "--rate", "30", "--backoff-base", "0.05", "--max-attempts", "8"],
                                   scraper_env(site, db))
    assert code == 0
    stamps = [m.start() for m in re.finditer(STAMP, text)]
    assert len(stamps) >= 3 and "\r[" in text
    for at in stamps:                    # every log line first erases whatever the bar left on its line
        assert text[max(0, at - 4):at] == "\r\x1b[K", repr(text[max(0, at - 60):at + 40])
