"""Issue 32's hints where the cause is known: a script-built page under fetcher = "http" names
fetcher = "auto" (in `failures` and the run's `next:` line, which advises no plain retry); the walk says
how many sitemap URLs include/exclude left out; a CSS field that matches nothing is empty and listed in the
record's `missing`; ignoring a domain's robots.txt re-queues its jobs that ended invalid (robots)."""

import json
import os
import sys

import pytest

from scraper.base.sources import Source
from scraper.policy import outcome
from scraper.sites import catalogue
from scripts.standin import client
from tests import warm
from tests.helpers import in_process, rows, scraper, write

pytestmark = pytest.mark.slow

SOURCES = """
[[source]]
name = "events"
kind = "catalogue"
rate = 50.0
burst = 5
site = "{url}/"
include = ["{include}"]
type = "Event"
required = ["name", "startDate"]
fetcher = "http"
"""


def run(folder, site, include, *args):
    env = {**os.environ, "SCRAPER_DB": str(folder / "jobs.db"), "SCRAPER_TRANSCRIPTS": "0",
           "SCRAPER_SOURCES": write(folder, SOURCES.format(url=site.url, include=include))}
    return warm.run([sys.executable, "-m", "scraper", *args], env=env, capture_output=True, text=True,
                    timeout=300)


def test_script_pages_over_plain_http_name_fetcher_auto_and_the_walk_counts_what_include_left_out(tmp_path):
    with client.start(catalogue=True, events=24, seed=2) as site:
        truth = site.truth()
        seeded = run(tmp_path, site, "^/live/", "seed")
        done = run(tmp_path, site, "^/live/", "run", "--workers", "2")
        failures = run(tmp_path, site, "^/live/", "failures")
    live = [e for e in truth["events"] if e["script_rendered"]]
    others = len(truth["events"]) - len(live) + len(truth["pages"])
    assert seeded.returncode == 0, seeded.stderr[-2000:]
    assert f"; {others} listed URL(s) left out by include/exclude." in seeded.stdout
    assert done.returncode == 1, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert f"{len(live)} of them `incomplete`" in last and 'set fetcher = "auto"' in last, last
    assert "a retry fetches the same page" in last
    assert failures.stdout.count('set fetcher = "auto" for source events') == len(live), failures.stdout


def test_the_next_line_of_mixed_failures_separates_the_incomplete_ones():
    line = outcome.next_step(1, failed=5, incomplete=2, scripted=0)
    assert "2 of them `incomplete`" in line and "fix the source's `required`" in line
    assert "the other 3: `scraper retry --failed`" in line
    assert "incomplete" not in outcome.next_step(1, failed=5)


PAGE = """<html><head><script type="application/ld+json">{"@type": "Event", "name": "Jazz", "startDate": "2026-01-01",
"organizer": {"name": "From JSON-LD"}}</script></head><body><h1>Jazz</h1></body></html>"""


def test_a_css_field_that_matches_nothing_is_empty_and_listed_as_missing():
    source = Source(name="e", kind="catalogue", options=(
        ("fields", (("organizer", "css:.organizer::text"), ("title", "css:h1::text"),
                    ("venue", "jsonld:location.name"))),
        ("site", "https://s.test/"), ("type", "Event")))
    record = catalogue.record_of(source, "https://s.test/e/1", PAGE.encode())
    assert record["organizer"] is None                    # not the JSON-LD object of the same name
    assert record["title"] == "Jazz"
    assert record[catalogue.MISSING] == ["organizer", "venue"]


def test_ignoring_robots_txt_requeues_the_jobs_it_had_refused_and_says_how_many(standin, tmp_path):
    site = standin(templates=30, rate=50, burst=10, robots="rules", robots_disallow_ids="1")
    db = tmp_path / "jobs.db"
    in_process(site, db, "seed", "--from-search", check=0)
    scraper(site, db, "run", "--workers", "2", "--rate", "30", "--no-transcripts", check=0)
    refused = rows(db, "SELECT key FROM jobs WHERE status = 'invalid' AND error_kind = 'robots'")
    assert refused
    again = scraper(site, db, "run", "--workers", "2", "--rate", "30", "--no-transcripts",
                    "--robots-ignore", "127.0.0.1", check=0)
    assert f"re-queued {len(refused)} job(s) of 127.0.0.1 that ended invalid (robots)" in again.stderr
    assert rows(db, "SELECT COUNT(*) AS n FROM jobs WHERE status <> 'done'")[0]["n"] == 0
    status = json.loads(in_process(site, db, "status", "--json", check=0).stdout)
    assert status["invalid"] == 0


def test_a_robots_txt_404_is_no_error_in_the_report_or_status(standin, tmp_path):
    import time

    from scraper.db import store
    from scraper.products import report
    site = standin(templates=5, rate=50, burst=10)          # its robots.txt answers 404: no rules
    db = tmp_path / "jobs.db"
    ids = tmp_path / "ids.txt"                               # seeded from a file: the run's worker reads robots.txt
    ids.write_text("".join(f"{i}\n" for i in site.corpus()["ids"][:5]))
    in_process(site, db, "seed", "--ids", str(ids), check=0)
    scraper(site, db, "run", "--workers", "1", "--rate", "30", "--no-transcripts", check=0)
    assert rows(db, "SELECT COUNT(*) AS n FROM requests WHERE kind = 'robots_4xx' AND status = 404")[0]["n"] >= 1
    conn = store.connect(str(db))
    data = report.gather(conn, time.time())
    conn.close()
    assert data["run"]["errors"] == {} and data["runs"][-1]["errors"] == 0
    status = json.loads(in_process(site, db, "status", "--json", check=0).stdout)
    assert status["errors_this_run"] == {}
