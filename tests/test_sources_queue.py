"""Issue 16, the sources side: claims by source priority (real SQLite), disabled and removed sources,
the counts per source, and the jobs.source migration from the previous release's schema."""

import json
import sqlite3

import pytest

from scraper.base import sources
from scraper.db import store
from scraper.db.claims import source_levels
from scraper.db.queue import Queue, add_jobs
from scraper.policy.fairness import Demand
from tests.helpers import EVENTS, NOW, assert_one_sentence_error, count, in_process, invoke, write

# --- claims across sources ----------------------------------------------------------------------

def _two_sources(conn, jobs=5):
    rows = [(f"n8n:{i}", "n8n", f"http://127.0.0.1/{i}", "127.0.0.1", "n8n") for i in range(jobs)]
    rows += [(f"events:/e/{i}", "catalogue", f"http://127.0.0.2/e/{i}", "127.0.0.2", "events") for i in range(jobs)]
    with store.transaction(conn) as c:
        add_jobs(c, rows[::-1], NOW)     # the second source's rows are older: only priority puts n8n first


@pytest.mark.parametrize("first", ["n8n", "events"])
def test_with_one_worker_and_both_domains_free_no_priority_2_job_starts_while_a_priority_1_job_is_runnable(
        tmp_path, first):
    other = "events" if first == "n8n" else "n8n"
    conn = store.open_db(str(tmp_path / "jobs.db"))
    _two_sources(conn)
    levels = source_levels([sources.Source(name=first, kind="n8n", priority=1),
                            sources.Source(name=other, kind="catalogue", priority=2, options=(("site", "x"),))])
    q = Queue(conn)
    free = {"127.0.0.1": Demand(0.0, 2.0), "127.0.0.2": Demand(0.0, 2.0)}
    taken = []
    for _ in range(10):     # one worker: it claims a job, finishes it, claims the next
        taken.append(q.claim("w1", NOW, 60, demands=free, workers=1, sources=levels))
        q.complete(taken[-1], "w1", NOW, 1)
    assert [j.source for j in taken] == [first] * 5 + [other] * 5
    assert q.claim("w1", NOW, 60, sources=levels) is None


def test_a_priority_2_job_goes_when_the_priority_1_domain_must_wait(tmp_path):
    conn = store.open_db(str(tmp_path / "jobs.db"))
    _two_sources(conn, jobs=1)
    levels = [["n8n"], ["events"]]
    waiting = {"127.0.0.1": Demand(3.0, 2.0), "127.0.0.2": Demand(0.0, 2.0)}
    job = Queue(conn).claim("w1", NOW, 60, demands=waiting, workers=1, sources=levels)
    assert job.source == "events"


def test_within_a_level_child_jobs_go_first_and_sources_not_named_are_never_claimed(tmp_path):
    conn = store.open_db(str(tmp_path / "jobs.db"))
    with store.transaction(conn) as c:
        add_jobs(c, [("a:1", "catalogue", "http://a/1", "a", "a"), ("b:1", "catalogue", "http://b/1", "b", "b")], NOW)
        add_jobs(c, [("b:child", "catalogue", "http://b/c", "b", "b")], NOW, priority=1)
        add_jobs(c, [("off:1", "catalogue", "http://c/1", "c", "off")], NOW - 100)
    q = Queue(conn)
    keys = [q.claim("w", NOW, 60, sources=[["a", "b"]]).key for _ in range(3)]
    assert keys == ["b:child", "a:1", "b:1"]
    assert q.claim("w", NOW, 60, sources=[["a", "b"]]) is None
    assert q.work_left(sources=["a", "b"]) is True       # running rows
    q.requeue(NOW)
    assert {q.claim("w", NOW, 60).key for _ in range(4)} == {"a:1", "b:1", "b:child", "off:1"}   # as before


def test_a_disabled_or_removed_source_is_neither_worked_nor_waited_for(tmp_path, db):
    conn = store.open_db(str(db))
    with store.transaction(conn) as c:
        add_jobs(c, [("events:/e/1", "catalogue", "http://127.0.0.2:9/e/1", "127.0.0.2", "events")], NOW)
    conn.close()
    for text in (EVENTS.replace('name = "events"', 'name = "events"\nenabled = false'),
                 '[[source]]\nname = "n8n"\nkind = "n8n"\n'):
        path = write(tmp_path, text)
        result = invoke("--sources", path, "run", "--workers", "1", db=db)
        assert result.exit_code == 0, result.output
        assert count(db, "SELECT COUNT(*) FROM jobs WHERE source = 'events' AND status = 'pending'") == 1


def test_run_source_limits_the_run_to_those_sources(tmp_path, db):
    path = write(tmp_path, EVENTS)
    result = invoke("--sources", path, "run", "--source", "nope", db=db)
    assert_one_sentence_error(result, "--source nope", "no such source")


# --- the migration ------------------------------------------------------------------------------

def test_a_database_of_the_previous_schema_upgrades_in_place_and_keeps_every_row(tmp_path):
    path = str(tmp_path / "old.db")
    conn = store.connect(path)
    store.migrate(conn, 6)              # the schema of the previous release
    conn.execute("BEGIN")
    conn.execute("INSERT INTO jobs (key, site, url, domain, status, created_at, updated_at) VALUES "
                 "('n8n:1', 'n8n', 'http://n8n.io/x/1', 'n8n.io', 'done', 1, 1), "
                 "('youtube:abc', 'youtube', 'http://youtube.com/abc', 'youtube.com', 'pending', 1, 1)")
    conn.execute("INSERT INTO workflows (id, name, version) VALUES (1, 'one', 1)")
    conn.execute("INSERT INTO walks (started_at, finished_at, complete, pages, listed, new, changed, removed, "
                 "restored) VALUES ('2026-11-01T00:00:00+00:00', '2026-11-01T00:01:00+00:00', 1, 3, 250, 250, 0, 0, 0)")
    conn.execute("COMMIT")
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    before = {t: conn.execute(f"SELECT * FROM {t}").fetchall() for t in tables if not t.startswith("workflows_fts")}
    conn.close()

    conn = store.open_db(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
    for table, rows in before.items():
        after = conn.execute(f"SELECT * FROM {table}").fetchall()
        assert [tuple(r)[:len(rows[0])] if rows else r for r in after] == [tuple(r) for r in rows], table
    assert dict(conn.execute("SELECT key, source FROM jobs")) == {"n8n:1": "n8n", "youtube:abc": "n8n"}
    walk = conn.execute("SELECT source, finished_at, complete, requests FROM source_walks").fetchall()
    assert [tuple(r) for r in walk] == [("n8n", "2026-11-01T00:01:00+00:00", 1, 3)]
    conn.close()
    with pytest.raises(sqlite3.OperationalError):      # nothing else changed its shape
        sqlite3.connect(path).execute("SELECT source FROM workflows")


def test_status_and_the_report_break_the_counts_down_per_source(tmp_path, db):
    from scraper.products import report
    conn = store.open_db(str(db))
    _two_sources(conn, jobs=2)
    data = report.gather(conn, NOW)
    conn.close()
    assert data["jobs_by_source"]["events"]["pending"] == 2 and data["jobs_by_source"]["n8n"]["pending"] == 2
    result = invoke("status", "--json", db=db)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["sources"]["events"] == {"pending": 2, "running": 0, "done": 0, "failed": 0,
                                                              "invalid": 0}
    assert "source    events: 2 total: 2 pending" in invoke("status", db=db).output


@pytest.mark.slow
def test_a_renamed_n8n_source_seeds_and_runs_end_to_end_in_real_processes(standin, tmp_path):
    from tests.helpers import scraper
    site = standin(templates=30, rate=50, burst=10)
    db = tmp_path / "jobs.db"
    path = write(tmp_path, f'[[source]]\nname = "templates"\nkind = "n8n"\nevery = "1d"\napi_url = "{site.api_url}"\n'
                           f'site_url = "{site.url}"\n')
    env = {"SCRAPER_SOURCES": path, "SCRAPER_API_URL": "http://127.0.0.1:9/api", "SCRAPER_SITE_URL": "http://127.0.0.1:9"}
    done = in_process(site, db, "seed", check=0, env=env)
    assert "templates: walked (complete" in done.stdout + done.stderr
    scraper(site, db, "run", "--workers", "2", "--rate", "40", "--burst", "10", check=0, env=env)
    assert count(db, "SELECT COUNT(*) FROM jobs WHERE source = 'templates' AND status = 'done'") == 30
    assert "not due until" in (lambda d: d.stdout + d.stderr)(in_process(site, db, "seed", check=0, env=env))
    [row] = json.loads(in_process(site, db, "sources", "--json", check=0, env=env).stdout)
    assert row["jobs"]["done"] == 30 and row["items"] == {"live": 30, "removed": 0}
