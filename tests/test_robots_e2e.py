"""The "Done when" scenarios of issue 15 with real processes: the CLI against the stand-in."""

import json

import pytest

from tests.helpers import definition_ids, rows, scraper

pytestmark = pytest.mark.slow


@pytest.mark.timing
def test_rules_and_crawl_delay(standin, tmp_path):
    site = standin(templates=40, rate=50, burst=10, robots="rules", robots_disallow_ids="1",
                   robots_crawl_delay=0.2)
    db = tmp_path / "jobs.db"
    scraper(site, db, "seed", "--from-search", "--rate", "20", check=0)
    done = scraper(site, db, "run", "--workers", "4", "--rate", "20", "--no-transcripts")
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = rows(db, "SELECT key, status, error_kind FROM jobs")
    disallowed = [j for j in jobs if j["key"].split(":")[1].startswith("1")]
    assert disallowed and all((j["status"], j["error_kind"]) == ("invalid", "robots") for j in disallowed)
    assert all(j["status"] == "done" for j in jobs if j not in disallowed)
    seen = site.stats().get("detail_requests", {})
    assert not [tid for tid in seen if str(tid).startswith("1")]       # never asked for a disallowed one
    assert max(site.rate_series(), default=0) <= 6
    assert site.robots_requests() == 1                                  # seed and run together
    d = json.loads(scraper(site, db, "status", "--json", check=0).stdout)["domains"]["127.0.0.1"]
    assert (d["rate_per_s"], d["configured_rate_per_s"], d["rate_reason"]) == (5.0, 20.0, "robots")


def test_robots_answering_503_sends_nothing_and_exits_3(standin, tmp_path):
    site = standin(templates=10, robots="503")
    db = tmp_path / "jobs.db"
    ids = tmp_path / "ids.txt"
    ids.write_text("".join(f"{t}\n" for t in definition_ids()[:10]))
    scraper(site, db, "seed", "--ids", str(ids), check=0)
    done = scraper(site, db, "run", "--workers", "2", "--backoff-base", "0.1", "--no-transcripts")
    assert done.returncode == 3, done.stderr[-3000:]
    assert "robots.txt of 127.0.0.1:" in done.stderr
    assert "could not be fetched (503); nothing was sent to" in done.stderr
    assert not site.stats().get("detail_requests")
    assert rows(db, "SELECT COUNT(*) AS n FROM jobs WHERE status = 'pending' AND attempts = 0")[0]["n"] == 10
    listing = scraper(site, tmp_path / "other.db", "seed", "--from-search")
    assert listing.returncode == 1 and "robots.txt of" in listing.stderr


@pytest.mark.timing
def test_a_10_second_storm_no_longer_ends_the_run(standin, tmp_path):
    site = standin(templates=200, rate=50, burst=10)
    db = tmp_path / "jobs.db"
    scraper(site, db, "seed", "--from-search", check=0)
    site.storm(10)
    done = scraper(site, db, "run", "--workers", "4", "--rate", "20", "--breaker-open", "3", "--max-attempts", "6",
                   "--no-transcripts")
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows(db, "SELECT COUNT(*) AS n FROM jobs WHERE status = 'done'")[0]["n"] == 200


@pytest.mark.timing
def test_a_slow_phase_slows_the_pool_down_then_it_returns_to_the_limit(standin, tmp_path):
    site = standin(templates=300, rate=50, burst=10, latency_ms=40, slow_phase_factor=10, slow_phase_s=20,
                   slow_phase_after_s=12)
    db = tmp_path / "jobs.db"
    scraper(site, db, "seed", "--from-search", "--rate", "5", check=0)
    done = scraper(site, db, "run", "--workers", "4", "--rate", "5", "--no-transcripts")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rate halved" in done.stderr
    phase = site.request_log()["slow_phases"][0]
    series = site.rate_series()
    during = series[int(phase["start_s"]) + 5:int(phase["end_s"])]
    assert during and sum(during) / len(during) <= 0.6 * 5
    assert "recovered" in done.stderr
