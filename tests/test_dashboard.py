"""`scraper serve`'s dashboard (issue 47): its figures through Datasette's in-process client (the live part is
`status --json`'s object, the history is db/dashboard's queries, the same rows as their canned queries in
Datasette, filtered by source and dates), and the page in headless Chromium beside a live run on the
stand-in: every chart drawn, the done count within one refresh of `status --json`, no console error, no
request to another host."""

import asyncio
import json
import re
import signal
import subprocess
import sys
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from scraper import cli
from scraper.base import settings as config
from scraper.db import store
from scraper.db.queue import Queue
from scraper.mirror import seed as seeding
from scraper.products import browse
from tests import warm
from tests.helpers import count, scraper, scraper_env, status_json, wait_until
from tests.test_serve import CHROMIUM, fetch, free_port

pytest.importorskip("datasette", reason="Datasette is an optional extra: pip install 'scraper[serve]'")

CHARTS = ("chart-jobs", "chart-rate", "chart-errors", "chart-runs", "chart-durations", "chart-changes",
          "chart-catalogue")
JAN5, FEB10 = 1_767_571_200.0 + 3600, 1_770_681_600.0 + 3600      # 2026-01-05 and 2026-02-10, 01:00 UTC


def get(db, settings, *urls):
    """{url: (status, body)} through Datasette's in-process client (no port)."""
    async def run():
        ds = browse.app(db, settings)
        await ds.invoke_startup()
        return {u: ((r := await ds.client.get(u)).status_code, r.text) for u in urls}
    return asyncio.run(run())


@pytest.fixture
def history(tmp_path):
    """(db, settings): five n8n jobs, two finished runs (2026-01-05: 3 done, 1 failed; 2026-02-10: 1 done)
    and the changes of two sources over three days."""
    db = tmp_path / "jobs.db"          # SCRAPER_DB (tests/conftest.py): `status` reads this one
    s, _ = config.load()
    conn = store.open_db(str(db))
    Queue(conn).seed(seeding.job_rows(s, range(1, 6)))
    with store.transaction(conn) as c:
        for run_id, at, ended in ((1, JAN5, ((1, "done"), (2, "done"), (3, "done"), (4, "failed"))),
                                  (2, FEB10, ((5, "done"),))):
            c.execute("INSERT INTO runs (id, pid, started_at, finished_at, workers, exit_code, heartbeat_at, sources) "
                      "VALUES (?, 1, ?, ?, 2, 0, ?, '[\"n8n\"]')", (run_id, at, at + 90, at + 90))
            c.executemany("INSERT INTO run_jobs (run_id, job_id, status, at) VALUES (?, ?, ?, ?)",
                          [(run_id, j, st, at + 10) for j, st in ended])
        c.executemany("INSERT INTO changes (template_id, change, at, version, source, key) VALUES (?, ?, ?, 1, ?, ?)",
                      [(1, "added", "2026-01-05T01:00:00+00:00", "n8n", "1"),
                       (2, "added", "2026-01-05T01:00:01+00:00", "n8n", "2"),
                       (3, "added", "2026-01-05T01:00:02+00:00", "n8n", "3"),
                       (2, "changed", "2026-01-06T09:00:00+00:00", "n8n", "2"),
                       (3, "removed", "2026-02-10T02:00:00+00:00", "n8n", "3"),
                       (None, "added", "2026-02-10T03:00:00+00:00", "events", "/e/1"),
                       (None, "added", "2026-02-10T03:00:01+00:00", "events", "/e/2")])
    conn.close()
    return db, s


def test_the_figures_are_status_and_the_history_filtered_with_each_query_linked(history):
    db, s = history
    urls = ["/dashboard.json", "/dashboard.json?since=2026-02-01", "/dashboard.json?source=events",
            "/dashboard.json?since=2026-13-01", "/dashboard.json?since=2026-03-01&until=2026-02-01"]
    found = get(db, s, *urls)
    d = json.loads(found["/dashboard.json"][1])
    cmd = CliRunner().invoke(cli.main, ["status", "--json"])
    assert cmd.exit_code == 0, cmd.output
    shown = json.loads(cmd.output)
    for got in (d["status"], shown):    # the disk's free space is the machine's: other writers move it meanwhile
        assert got["database"].pop("free_mb") > 0
    assert d["status"] == shown and d["status"]["total"] == 5 and not d["live"]
    assert [(r["id"], r["done"], r["failed"], r["duration_s"], r["status"]) for r in d["runs"]] \
        == [(1, 3, 1, 90.0, "succeeded"), (2, 1, 0, 90.0, "succeeded")]
    assert d["changes"] == {"days": ["2026-01-05", "2026-01-06", "2026-02-10"], "added": [3, 0, 2],
                            "changed": [0, 1, 0], "removed": [0, 0, 1], "restored": [0, 0, 0]}
    assert d["catalogue"] == {"days": ["2026-01-05", "2026-01-06", "2026-02-10"],
                              "series": {"n8n": [3, 3, 2], "events": [None, None, 2]}}
    assert [x["name"] for x in d["sources"]] == ["n8n"] and d["sources"][0]["last_walk_at"] is None

    later = json.loads(found["/dashboard.json?since=2026-02-01"][1])
    assert [r["id"] for r in later["runs"]] == [2]
    # the range cuts the days shown, not the count carried into them
    assert later["catalogue"] == {"days": ["2026-02-10"], "series": {"n8n": [2], "events": [2]}}
    events = json.loads(found["/dashboard.json?source=events"][1])
    assert events["runs"] == [] and events["changes"]["added"] == [2]
    assert list(events["catalogue"]["series"]) == ["events"]
    for url, word in ((urls[3], "since must be a date"), (urls[4], "is after until")):
        code, body = found[url]
        assert code == 400 and word in json.loads(body)["error"]

    # each history chart links its canned query with the page's filters: Datasette answers the same rows
    links = {name: q["url"] for name, q in later["queries"].items() if name.startswith("dashboard_")}
    assert links["dashboard_runs"] == "/jobs/dashboard_runs?source=&since=2026-02-01&until="
    answers = get(db, s, *(u.replace("?", ".json?_shape=array&") for u in links.values()))
    by_name = {name: json.loads(answers[u.replace("?", ".json?_shape=array&")][1]) for name, u in links.items()}
    assert [(r["id"], r["done"]) for r in by_name["dashboard_runs"]] == [(2, 1)]
    assert by_name["dashboard_catalogue"] == [{"day": "2026-02-10", "source": "events", "live": 2},
                                              {"day": "2026-02-10", "source": "n8n", "live": 2}]
    assert sum(r["n"] for r in by_name["dashboard_changes"]) == 3


def test_the_page_loads_nothing_from_another_host(history):
    db, s = history
    code, page = get(db, s, "/dashboard")["/dashboard"]
    assert code == 200 and 'id="chart-rate"' in page
    # every src/href is on this server (a path), a fragment or inline data; the SVG namespace is no request
    assert not re.findall(r"""(?:src|href|action)\s*=\s*["'](?![/#?]|data:)""", page)
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) <= {"http://www.w3.org/2000/svg"}
    assert "import(" not in page and "@import" not in page


def watch_dashboard(standin, tmp_path, templates=200, rate=20):
    """A run over `templates` templates of the stand-in (one in ten answers 500 once) with `scraper serve`
    beside it, its dashboard in headless Chromium: returns what the checks need, measured while the run is
    live. Everything it starts is stopped before it returns."""
    from playwright.sync_api import sync_playwright

    from scraper.net.chromium import launch_args
    site = standin(templates=templates, rate=rate * 2, burst=4, faults="500:0.1")
    db = tmp_path / "jobs.db"
    env = scraper_env(site, db)
    scraper(site, db, "seed", "--from-search", check=0)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    serve = warm.Popen([sys.executable, "-m", "scraper", "serve", "--port", str(port)], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run = None
    try:
        wait_until(lambda: serve.poll() is not None or fetch(base + "/dashboard.json")[0] == 200, timeout=60)
        assert serve.poll() is None, serve.stderr.read()
        run = warm.Popen([sys.executable, "-m", "scraper", "run", "--workers", "2", "--rate", str(rate), "--burst", "2",
                          "--no-transcripts"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: count(db, "SELECT COUNT(*) FROM run_jobs") > 0, timeout=60)
        errors, hosts = [], set()
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=launch_args())
            try:
                page = browser.new_page()
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.on("request", lambda r: hosts.add(urlsplit(r.url).netloc))
                page.goto(base + "/dashboard", timeout=30_000)
                # drawn while the run is live, every chart with its marks (the run's first 500s too)
                page.wait_for_function(
                    "ids => document.body.dataset.live === 'yes' && ids.every(id => "
                    "+(document.getElementById(id).dataset.marks || 0) > 0) "
                    "&& !document.getElementById('tile-memory').textContent.startsWith('-') || (load(), false)",
                    arg=list(CHARTS), timeout=30_000, polling=1000)
                marks = page.evaluate("ids => Object.fromEntries(ids.map(id => [id, "
                                      "+document.getElementById(id).dataset.marks]))", list(CHARTS))
                svg_marks = page.evaluate("ids => ids.map(id => document.querySelectorAll("
                                          "'#' + id + ' svg rect, #' + id + ' svg polyline').length)", list(CHARTS))
                before = status_json(site, db)
                drawn = page.evaluate("+document.body.dataset.drawn")
                page.evaluate("load()")       # the page's own refresh, now rather than in LIVE_REFRESH_S
                page.wait_for_function(f"+document.body.dataset.drawn > {drawn}", timeout=10_000)
                shown = {k: page.inner_text(f"#tile-{k}") for k in ("done", "eta", "rate", "memory")}
                after = status_json(site, db)
                rate_caption = page.inner_text("#chart-rate")
            finally:
                browser.close()
        return {"marks": marks, "svg_marks": svg_marks, "before": before, "after": after, "shown": shown,
                "errors": errors, "hosts": hosts, "base": base, "rate_text": rate_caption}
    finally:
        for proc in (run, serve):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.communicate()


@pytest.mark.timing         # Chromium: after the parallel phase (`make test`)
@pytest.mark.slow
@pytest.mark.chromium
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian: apt-get install chromium)")
def test_chromium_draws_the_dashboard_of_a_live_run_as_status_counts_it(standin, tmp_path):
    seen = watch_dashboard(standin, tmp_path)
    assert all(n > 0 for n in seen["marks"].values()), seen["marks"]
    assert all(n > 0 for n in seen["svg_marks"]), seen["svg_marks"]
    # within one refresh: the page drew between two readings of `status --json`
    assert seen["before"]["done"] <= int(seen["shown"]["done"]) <= seen["after"]["done"], seen
    assert seen["after"]["run"]["alive"] and seen["shown"]["eta"] != "-"
    # the pool's memory against its ceiling, as the supervisor wrote them with its heartbeat
    run = seen["after"]["runs"][0]
    assert run["memory_mb"] > 0 and re.fullmatch(rf"\d+ / {run['memory_limit_mb']:g} MB", seen["shown"]["memory"])
    assert "127.0.0.1" in seen["rate_text"] and "configured /s" in seen["rate_text"]
    assert not seen["errors"], seen["errors"]
    assert seen["hosts"] == {urlsplit(seen["base"]).netloc}, seen["hosts"]
