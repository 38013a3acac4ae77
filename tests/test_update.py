"""Issue 22: `scraper update` for cron, each run's own record in the report, exports stopped by a signal,
global options after the command, and the small things a new user hit."""

import json
import re
import signal
import time

import pytest

from scraper.base.errors import DatabaseError
from scraper.db import store
from scraper.products import report
from tests import warm
from tests.helpers import (
    NOWHERE,
    STAMPED_ERROR,
    assert_one_sentence_error,
    count,
    in_process,
    invoke,
    jobs_in,
    rows,
    scraper,
    start_scraper,
    wait_until,
)

STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")
FAST = ("--rate", "100", "--burst", "10", "--backoff-base", "0.05")


def last_line(done):
    return done.stderr.strip().splitlines()[-1]


# --- scraper update -------------------------------------------------------------------------------


@pytest.mark.slow
def test_update_against_a_site_that_is_down_names_the_walk_and_runs_nothing_else(tmp_path):
    db = tmp_path / "jobs.db"
    site = type("Down", (), {"api_url": NOWHERE + "/api", "url": NOWHERE})()
    done = scraper(site, db, "update", "--timeout", "1", "--max-attempts", "1")
    assert done.returncode == 1, done.stderr
    assert STAMP.match(last_line(done)) and "update finished: exit 1, set by the walk" in last_line(done)
    assert "could not reach" in done.stderr and "run finished" not in done.stderr
    assert not db.exists()          # nothing else ran: no database, no run


@pytest.mark.slow
def test_update_walks_retries_old_failures_only_then_runs(standin, tmp_path):
    site = standin(templates=30, rate=100, burst=10, faults="403:0.2", seed=5)
    db = tmp_path / "jobs.db"
    first = scraper(site, db, "update", "--workers", "2", *FAST)
    assert first.returncode == 1, first.stderr[-2000:]       # the 403s end failed
    assert "update finished: exit 1, set by the run" in last_line(first)
    failed = jobs_in(db, "failed")
    assert failed and jobs_in(db, "pending") == 0 and jobs_in(db, "done") + failed + jobs_in(db, "invalid") == 30
    # at once again: the failures are younger than 24 h, so they stay failed and are not fetched again
    again = scraper(site, db, "update", "--workers", "2", *FAST)
    assert "moved 0 failed job(s) back to pending" in again.stdout and again.returncode == 1
    # with --retry-after 0 they go back and are fetched once more (and fail again: a 403 is a 403)
    retried = scraper(site, db, "update", "--workers", "2", "--retry-after", "0", *FAST)
    assert f"moved {failed} failed job(s) back to pending" in retried.stdout
    assert retried.returncode == 1 and jobs_in(db, "failed") == failed


def test_update_takes_every_option_of_run_and_its_own():
    import click

    from scraper.cli import main
    ctx = click.Context(main)      # commands are loaded when used
    run = {o for p in main.get_command(ctx, "run").params for o in p.opts}
    update = {o for p in main.get_command(ctx, "update").params for o in p.opts}
    assert run < update and update - run == {"--retry-after"}


def test_update_refuses_a_usage_error_before_anything_runs(tmp_path):
    db = tmp_path / "jobs.db"
    result = invoke("update", "--domain-rate", "nonsense", db=db)
    assert_one_sentence_error(result)
    assert not db.exists()
    assert invoke("update", "--workers", "abc", db=db).exit_code == 2 and not db.exists()


def test_update_picks_the_most_serious_code_in_its_order():
    from scraper.cli.update import most_serious
    assert most_serious([("walk", 0), ("retry", 0), ("run", 0)]) == (0, None)     # every step succeeded
    assert most_serious([("walk", 1), ("retry", 0), ("run", 3)]) == (1, "walk")
    assert most_serious([("walk", 75), ("retry", 0), ("run", 3)]) == (3, "run")
    assert most_serious([("walk", 1), ("retry", 0), ("run", 70)]) == (70, "run")
    assert most_serious([("walk", 0), ("retry", 0), ("run", 75)]) == (75, "run")


@pytest.mark.slow
def test_sigterm_stops_update_at_once(standin, tmp_path):
    site = standin(templates=200, rate=5, burst=2)
    db = tmp_path / "jobs.db"
    proc = start_scraper(site, db, "update", "--workers", "2", "--rate", "5", "--burst", "2")
    wait_until(lambda: done_so_far(db) > 0, timeout=60)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-2000:]
    assert "update finished: exit 143, set by the run" in err.strip().splitlines()[-1]


def done_so_far(db):
    try:
        return count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'done'") if db.exists() else 0
    except DatabaseError:       # the walk is still creating it
        return 0


# --- the report reads each run's own record -------------------------------------------------------


def done_in_runs(db):
    conn = store.connect(str(db))
    try:
        data = report.gather(conn, time.time())
        first = report.gather(conn, time.time(), 1)["run"]
    finally:
        conn.close()
    return [r["done_in_run"] for r in data["runs"]], first


@pytest.mark.slow
def test_a_runs_done_in_run_stays_what_its_last_line_said(standin, tmp_path):
    site = standin(templates=80, rate=100, burst=10)    # the site takes FAST; the first run goes at 10/s
    db = tmp_path / "jobs.db"
    in_process(site, db, "seed", "--from-search", "--rate", "100", "--burst", "10", check=0)
    proc = start_scraper(site, db, "run", "--workers", "2", "--rate", "10", "--burst", "2")
    wait_until(lambda: count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'done'") >= 40, timeout=120)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143
    said = int(re.search(r"run finished: (\d+) done in this run", err).group(1))
    assert 0 < said < 80
    before, first = done_in_runs(db)
    assert before == [said] and first["done_cumulative"][-1] == said
    assert first["done_cumulative"][0] > 0 or len(first["done_cumulative"]) > 1      # drawn from its own record
    for _ in range(2):      # two refreshes and their runs fetch every template again
        in_process(site, db, "refresh", "--older-than", "0", check=0)
        scraper(site, db, "run", "--workers", "2", *FAST, check=0)
    after, first_after = done_in_runs(db)
    assert after[0] == said and len(after) == 3 and after[1] == 80 and after[2] == 80
    assert first_after["done_cumulative"] == first["done_cumulative"]
    # every request row of a run carries its run's id; the seed's walk (robots.txt, one search page) none
    assert count(db, "SELECT COUNT(*) FROM requests WHERE run_id IS NULL") == 2
    assert {r["run_id"] for r in rows(db, "SELECT DISTINCT run_id FROM requests")} == {None, 1, 2, 3}


def test_the_migration_gives_earlier_runs_a_record_and_loses_nothing(tmp_path):
    db = tmp_path / "old.db"
    conn = store.connect(str(db))
    store.migrate(conn, 6)      # the schema before migration 7 (each run's own record)
    conn.execute("INSERT INTO runs (pid, started_at, finished_at, workers, done) VALUES (1, 100, 200, 2, 1)")
    conn.execute("INSERT INTO jobs (key, site, url, domain, status, created_at, updated_at, finished_at) "
                 "VALUES ('n8n:1', 'n8n', 'u', 'd', 'done', 0, 0, 150)")
    conn.execute("INSERT INTO requests (at, domain, kind, status, ms) VALUES (140, 'd', 'ok', NULL, 5)")
    conn.commit()
    conn.close()
    conn = store.open_db(str(db))
    try:
        recorded = [tuple(r) for r in conn.execute("SELECT run_id, job_id, status, at FROM run_jobs")]
        assert recorded == [(1, 1, "done", 150)]
        assert conn.execute("SELECT run_id FROM requests").fetchone()[0] == 1
        assert conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 1
    finally:
        conn.close()


# --- exports and signals --------------------------------------------------------------------------


def big_library(db, n=2000):
    """`n` stored templates with a large workflow each, so an export takes a while."""
    conn = store.open_db(str(db))
    workflow = json.dumps({"nodes": [{"name": f"node {i}", "parameters": {"text": "x" * 400}} for i in range(60)]})
    with store.transaction(conn) as c:
        c.executemany("INSERT INTO workflows (id, name, workflow, version, fetched_at) VALUES (?, ?, ?, 1, ?)",
                      [(i, f"template {i}", workflow, "2026-01-01T00:00:00+00:00") for i in range(1, n + 1)])
    conn.close()


@pytest.mark.slow
@pytest.mark.parametrize("sig, code, name", [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C")])
def test_a_signal_during_an_export_leaves_no_file_and_says_so(tmp_path, sig, code, name):
    db = tmp_path / "jobs.db"
    big_library(db)
    out = tmp_path / "out"
    out.mkdir()
    site = type("Nowhere", (), {"api_url": NOWHERE + "/api", "url": NOWHERE})()
    proc = start_scraper(site, db, "export", "--format", "jsonl", "--output", str(out / "k.jsonl"))
    wait_until(lambda: any(f.stat().st_size > 0 for f in out.iterdir()), timeout=60, every=0.01)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert list(out.iterdir()) == []
    lines = err.strip().splitlines()
    assert len(lines) == 1 and STAMP.match(lines[0]), err
    assert f"export stopped by {name}; nothing was written." in lines[0] and "Aborted" not in err


# --- global options, status, and the small things -------------------------------------------------


@pytest.fixture
def stored_db(tmp_path):
    """A database with 8 stored templates (their jobs done, two removed) and changes at one time."""
    db = tmp_path / "jobs.db"
    conn = store.open_db(str(db))
    with store.transaction(conn) as c:
        for i in range(1, 9):
            c.execute("INSERT INTO jobs (key, site, url, domain, status, created_at, updated_at, finished_at) "
                      "VALUES (?, 'n8n', 'u', 'd', 'done', 0, 0, 1)", (f"n8n:{i}",))
            c.execute("INSERT INTO workflows (id, name, description, version, fetched_at, removed_at) "
                      "VALUES (?, ?, 'telegram bot', 1, '2026-11-20T00:00:00+00:00', ?)",
                      (i, f"telegram {i}", "2026-11-21T00:00:00+00:00" if i > 6 else None))
            c.execute("INSERT INTO answers (template_id, version, kind, content_hash, fetched_at, body_fetched_at, "
                      "size, body, source, key) VALUES (?, 1, 'api', ?, '2026-11-20T00:00:00+00:00', "
                      "'2026-11-20T00:00:00+00:00', 1, x'00', 'n8n', ?)", (i, f"h{i}", str(i)))
        for i in (1, 4, 3, 11, 8, 2, 9):
            c.execute("INSERT INTO changes (template_id, key, change, at) "
                      "VALUES (?, ?, 'added', '2026-11-20T00:00:00+00:00')", (i, str(i)))
        c.execute("INSERT INTO changes (template_id, key, change, at) "
                  "VALUES (7, '7', 'removed', '2026-11-21T00:00:00+00:00')")
    conn.close()
    return db


def test_global_options_after_the_command_name(stored_db):
    result = invoke("status", "--db", str(stored_db))
    assert result.exit_code == 0 and "8 total" in result.output
    assert invoke("status", "--json", f"--db={stored_db}").exit_code == 0
    twice = invoke("status", "--db", str(stored_db) + "x", db=stored_db)
    assert_one_sentence_error(twice, "--db", "twice")
    assert invoke("status", "--db", str(stored_db), db=stored_db).exit_code == 0     # the same value is fine


def test_status_counts_the_mirror_apart_from_the_queue(stored_db):
    conn = store.connect(str(stored_db))
    conn.execute("UPDATE jobs SET status = 'pending' WHERE key IN ('n8n:1', 'n8n:2')")     # a refresh
    conn.close()
    report_ = json.loads(invoke("status", "--json", db=stored_db).stdout)
    assert report_["stored"] == {"live": 6, "removed": 2} and report_["refreshing"] == 2
    assert report_["done"] == 6 and report_["pending"] == 2      # the job-state keys keep their meaning
    text = invoke("status", db=stored_db).output
    assert "stored    8 template(s) in the mirror: 6 live, 2 removed" in text and "refresh   2 " in text


def test_search_prints_the_total(stored_db):
    text = invoke("search", "telegram", "--limit", "3", db=stored_db).output
    assert text.splitlines()[0] == "showing 3 of 8 matches for 'telegram', best first:"
    assert len(json.loads(invoke("search", "telegram", "--limit", "3", "--json", db=stored_db).stdout)) == 3


@pytest.mark.parametrize("name", ["3", "n8n:3", "http://site.test/workflows/3-some-slug"])
def test_history_takes_an_id_a_key_or_a_url(stored_db, name):
    result = invoke("history", name, db=stored_db)
    assert result.exit_code == 0 and result.output.startswith("version 1  2026-11-20"), result.output


def test_history_refuses_what_is_no_id(stored_db):
    assert_one_sentence_error(invoke("history", "youtube:abc", db=stored_db), "n8n:ID")


def test_changes_limit_and_kind_ordered_by_time_then_key(stored_db):
    lines = invoke("changes", "--limit", "5", "--kind", "added", db=stored_db).output.splitlines()
    assert len(lines) == 5
    assert [int(line.split()[-1]) for line in lines] == [3, 4, 8, 9, 11]     # the newest 5, oldest first
    every = json.loads(invoke("changes", "--json", db=stored_db).stdout)
    assert [c["id"] for c in every] == [1, 2, 3, 4, 8, 9, 11, 7]
    both = json.loads(invoke("changes", "--json", "--kind", "added", "--kind", "removed", "--limit", "2",
                             db=stored_db).stdout)
    assert [(c["id"], c["change"]) for c in both] == [(11, "added"), (7, "removed")]


def test_a_missing_choice_fits_on_one_line(stored_db):
    result = invoke("export", db=stored_db)
    errors = [line for line in result.output.splitlines() if STAMPED_ERROR.match(line)]
    assert result.exit_code == 2 and len(errors) == 1 and "jsonl, json, csv, parquet" in errors[0]
    assert not [line for line in result.output.splitlines() if line.startswith("\t") or not STAMP.match(line)]


@pytest.mark.parametrize("content", ["", "\n\n# only a comment\n"])
def test_an_empty_ids_file_exits_2(tmp_path, content):
    ids = tmp_path / "ids.txt"
    ids.write_text(content)
    db = tmp_path / "jobs.db"
    assert_one_sentence_error(invoke("seed", "--ids", str(ids), db=db), "names no template")
    assert not db.exists()


def test_refresh_says_why_nothing_was_queued(stored_db):
    text = invoke("refresh", "--older-than", "36500", db=stored_db).output
    assert "queued 0 template(s) for a re-fetch: none was last fetched more than 36500 day(s) ago" in text
    assert "the oldest was fetched" in text


def test_update_with_no_network_points_to_make_demo(tmp_path):
    # issue 32: `make scrape` offline fails in one clear sentence that names the offline way in
    import os
    import sys
    env = {**os.environ, "SCRAPER_DB": str(tmp_path / "jobs.db"), "SCRAPER_API_URL": "http://127.0.0.1:9/api",
           "SCRAPER_SITE_URL": "http://127.0.0.1:9"}
    env.pop("SCRAPER_SOURCES", None)
    done = warm.run([sys.executable, "-m", "scraper", "update", "--backoff-base", "0", "--workers", "1"],
                    env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    failed = [line for line in done.stderr.splitlines() if "the walk failed" in line]
    assert len(failed) == 1 and "could not reach http://127.0.0.1:9/robots.txt" in failed[0]
    assert "try `make demo` (it needs no internet)" in failed[0]
