"""The real CLI against the stand-in site: faults, the database row by row."""

import json
import shlex
import sys

import pytest
from click.testing import CliRunner

from scraper import cli
from scripts import demo
from tests import warm
from tests.helpers import ROOT, check_every_row, in_process, rows, scraper

pytestmark = pytest.mark.slow


@pytest.mark.timing
def test_run_with_faults_checks_every_row(standin, backend):
    site = standin(templates=80, rate=50, burst=5, latency_ms=5,
                   faults="503:0.05,500x2:0.05,reset:0.05,truncate:0.05,404:0.05,403:0.05", seed=3)
    db = backend
    assert "seeded 80 new" in in_process(site, db, "seed", "--from-search", check=0).stdout
    done = scraper(site, db, "run", "--workers", "2", "--rate", "50", "--burst", "5", "--backoff-base", "0.1")
    assert done.returncode == 1, done.stderr[-2000:]     # the 403s end failed
    faults, jobs, stored = check_every_row(site, db)
    assert len(jobs) == 80
    for template_id, job in jobs.items():
        if faults.get(template_id) not in ("404", "403"):
            assert job["attempts"] == {"500": 3, None: 1}.get(faults.get(template_id), 2)
    assert site.stats()["http_429"] == 0


def test_a_server_stricter_than_the_rate_pauses_the_domain_and_loses_no_job(standin, tmp_path):
    # the operator said 20/s, the site allows 4/s: 429s come, the domain pauses, nothing fails
    site = standin(templates=40, rate=4, burst=2)
    db = tmp_path / "jobs.db"
    in_process(site, db, "seed", "--from-search", "--rate", "4", "--burst", "2", check=0)
    done = scraper(site, db, "run", "--workers", "3", "--rate", "20", "--burst", "5")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "domain paused" in done.stderr
    assert len(rows(db, "SELECT id FROM workflows")) == 40
    assert rows(db, "SELECT COUNT(*) AS n FROM jobs WHERE status = 'done'")[0]["n"] == 40
    report = json.loads(in_process(site, db, "status", "--json", check=0).stdout)
    assert report["http_429"] == site.stats()["http_429"] > 0


def test_make_demo_script_scrapes_the_standin_end_to_end(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)     # where the explored files are written
    db = tmp_path / "demo.db"
    done = warm.run([sys.executable, "-m", "scripts.demo", "--templates", "30", "--db", str(db)],
                    capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "seeded 30 new job(s)" in done.stdout
    # the templates carry videos: the status counts their transcript jobs too, so read the n8n site's line
    assert "site      n8n: 30 total" in done.stdout and ", 0 answered 429" in done.stdout
    assert "YouTube saw" in done.stdout and done.stdout.count(", 0 answered 429") == 2
    assert rows(db, "SELECT COUNT(*) AS n FROM transcripts")[0]["n"] >= 1
    invalid = rows(db, "SELECT id FROM jobs WHERE status = 'invalid' AND site = 'n8n'")
    assert len(rows(db, "SELECT id FROM workflows")) + len(invalid) == 30
    # it ends with the README's commands on its own database (the README's read jobs.db, which the demo
    # never made), and each of them runs as printed, the stand-ins gone
    shown = done.stdout.split("explore it", 1)[1].splitlines()[1:]
    assert [line.split()[:3] for line in shown] == [[".venv/bin/scraper", "--db", str(db)]] * len(demo.EXPLORE)
    for line in shown:
        result = CliRunner().invoke(cli.main, shlex.split(line)[1:], env={"SCRAPER_DB": None}, catch_exceptions=False)
        assert result.exit_code == 0, (line, result.output[-2000:])
