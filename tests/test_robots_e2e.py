"""The "Done when" scenarios of issue 15 with real processes: the CLI against the stand-in."""

import json

import pytest

from tests.helpers import definition_ids, in_process, rows, scraper, start_scraper, wait_until

pytestmark = pytest.mark.slow


@pytest.mark.timing
def test_rules_and_crawl_delay(standin, tmp_path):
    site = standin(templates=40, rate=50, burst=10, robots="rules", robots_disallow_ids="1",
                   robots_crawl_delay=0.2)
    db = tmp_path / "jobs.db"
    in_process(site, db, "seed", "--from-search", "--rate", "20", check=0)
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
    d = json.loads(in_process(site, db, "status", "--json", check=0).stdout)["domains"]["127.0.0.1"]
    assert (d["rate_per_s"], d["configured_rate_per_s"], d["rate_reason"]) == (5.0, 20.0, "robots")


def test_robots_answering_503_sends_nothing_and_exits_3(standin, tmp_path):
    site = standin(templates=10, robots="503")
    db = tmp_path / "jobs.db"
    ids = tmp_path / "ids.txt"
    ids.write_text("".join(f"{t}\n" for t in definition_ids()[:10]))
    in_process(site, db, "seed", "--ids", str(ids), check=0)
    # an outage, compressed: short open periods, given up after 3 failed probes whatever the time open
    done = scraper(site, db, "run", "--workers", "2", "--backoff-base", "0.1", "--breaker-open", "0.2",
                   "--give-up-after", "0", "--no-transcripts")
    assert done.returncode == 3, done.stderr[-3000:]
    assert site.robots_requests() >= 2 + 3          # the first tries, then once at each probe
    assert "robots.txt of 127.0.0.1:" in done.stderr
    assert "could not be fetched (503); nothing was sent to" in done.stderr
    assert not site.stats().get("detail_requests")
    assert rows(db, "SELECT COUNT(*) AS n FROM jobs WHERE status = 'pending' AND attempts = 0")[0]["n"] == 10
    listing = in_process(site, tmp_path / "other.db", "seed", "--from-search")
    assert listing.returncode == 1 and "robots.txt of" in listing.stderr


def test_a_robots_txt_answering_429_for_8_seconds_is_waited_out(standin, tmp_path):
    site = standin(templates=20, rate=50, burst=10)
    db = tmp_path / "jobs.db"
    ids = tmp_path / "ids.txt"
    ids.write_text("".join(f"{t}\n" for t in site.corpus()["ids"]))
    in_process(site, db, "seed", "--ids", str(ids), check=0)    # seeding from a file asks nothing of the site
    site.robots(mode="429", for_s=8)
    done = scraper(site, db, "run", "--workers", "2", "--rate", "20", "--breaker-open", "2", "--no-transcripts")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "its jobs wait" in done.stderr                          # the blip was waited out, not the run ended
    # every job ends as the site says (no faults: every template is there)
    assert rows(db, "SELECT status, COUNT(*) AS n FROM jobs GROUP BY status") == [{"status": "done", "n": 20}]
    assert site.robots_requests() >= 2                             # asked again after the blip


def test_a_10_second_storm_no_longer_ends_the_run(standin, tmp_path):
    """Issue 15's 10 s storm and 3 s open period, time compressed by two (5 s and 1.5 s, the backoff's
    base 0.5 s; 100 templates at 20/s, so the run is as long as the storm): the open periods 1.5, 3, 6 s
    outlast the storm before the third failed probe, as 3, 6, 12 s outlast 10 s. The storm outlasting
    --give-up-after is tests/test_time_driven.py's, on the fake clock."""
    site = standin(templates=100, rate=50, burst=10)
    db = tmp_path / "jobs.db"
    in_process(site, db, "seed", "--from-search", check=0)
    proc = start_scraper(site, db, "run", "--workers", "4", "--rate", "20", "--breaker-open", "1.5",
                         "--max-attempts", "6", "--backoff-base", "0.5", "--no-transcripts")
    # the storm starts once the run sends (a loaded machine may take seconds to start it)
    wait_until(lambda: sum(site.stats().get("detail_requests", {}).values()) >= 5 or proc.poll() is not None)
    site.storm(5)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    assert rows(db, "SELECT COUNT(*) AS n FROM jobs WHERE status = 'done'")[0]["n"] == 100
    assert "breaker of 127.0.0.1 open" in err


def test_a_slow_phase_slows_the_pool_down_then_it_returns_to_the_limit(standin, tmp_path):
    """Issue 15's slow phase (answers ten times slower for 20 s, at 5/s with 4 workers; a 60 s climb back),
    time compressed: 20/s with 8 workers (at 400 ms a answer they could still send 20/s, so only the rule
    slows them), an 8 s phase once the run has its baseline (its first 40 answers; started by the test,
    so a slow start of the run cannot eat into it), a 5 s climb back (--adaptive-recover). The same rule
    on the fake clock is tests/test_time_driven.py's. It runs beside other tests: a busy machine can only
    lower the rate it bounds from above, and the rule ignores answers under 200 ms."""
    rate = 20
    site = standin(templates=300, rate=50, burst=10, latency_ms=40)
    db = tmp_path / "jobs.db"
    in_process(site, db, "seed", "--from-search", "--rate", str(rate), check=0)
    proc = start_scraper(site, db, "run", "--workers", "8", "--rate", str(rate), "--adaptive-recover", "5",
                         "--no-transcripts")
    wait_until(lambda: sum(site.stats().get("detail_requests", {}).values()) >= 50 or proc.poll() is not None,
               timeout=60)
    site.slow(factor=10, seconds=8)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    assert "rate halved" in err
    phase = site.request_log()["slow_phases"][0]
    series = site.rate_series()
    during = series[int(phase["start_s"]) + 5:int(phase["end_s"])]
    assert during and sum(during) / len(during) <= 0.6 * rate
    assert "recovered" in err
