"""robots.txt, Crawl-delay, the effective rate and the adaptive slow-down (issue 15): the pure rules, and
the worker on a real queue with the network faked by `responses`."""

import re
import sqlite3

import pytest
import requests
import responses

from scraper.base import settings
from scraper.base.clock import FakeClock
from scraper.db import politeness as politeness_rows
from scraper.db import store
from scraper.policy import breaker, margin, retry
from scraper.policy import robots as rules
from scraper.politeness import rates, robots
from scraper.products import status
from tests.conftest import ANY_ROBOTS
from tests.helpers import API, DETAIL, DOMAIN, NOW, TID, detail_body, job

ROBOTS_URL = "http://api.test/robots.txt"
OTHER = 5338


# --- the pure rules ------------------------------------------------------------------------------

@pytest.mark.parametrize("status_, outcome", [(200, rules.RULES), (204, rules.RULES), (404, rules.ALLOW_ALL),
                                              (403, rules.ALLOW_ALL), (429, rules.UNAVAILABLE),
                                              (503, rules.UNAVAILABLE), (None, rules.UNAVAILABLE)])
def test_rfc_9309_outcome_of_each_status(status_, outcome):
    assert rules.outcome_of(status_) == outcome


def test_the_product_token_is_the_user_agent_before_its_first_slash():
    assert rules.product_token(settings.USER_AGENT) == "scraper"
    assert rules.product_token("mybot/2.0 (+mailto:a@b)") == "mybot"


def test_robots_only_ever_lowers_the_rate_and_a_crawl_delay_means_burst_1():
    assert rules.robots_rate(0.2, None) == 5.0
    assert rules.robots_rate(0.5, (3, 1)) == 2.0 and rules.robots_rate(None, (1, 5)) == 0.2
    assert rules.robots_rate(None, None) is None and rules.robots_rate(0, None) is None
    assert rules.effective(20, 5, 5.0, crawl_delay=True) == rules.Rate(5.0, 1, rules.ROBOTS)
    assert rules.effective(2, 5, 5.0, crawl_delay=True) == rules.Rate(2, 1, None)     # never raised
    assert rules.effective(20, 5, 5.0, adaptive_per_s=2.5) == rules.Rate(2.5, 5, rules.ADAPTIVE)
    assert rules.effective(20, 5) == rules.Rate(20, 5, None)


def answers(count, baseline, last, n503=0):
    return rules.Answers(count, baseline, tuple(last), n503)


def test_adaptive_halves_while_slow_at_most_once_per_20_answers_floor_a_tenth():
    slow = [400] * 20
    rate, mark, why = rules.adapt(5.0, None, None, answers(40, 40, slow), 1.0)
    assert (rate, mark, why) == (2.5, 40, "slow")
    assert rules.adapt(5.0, 2.5, 40, answers(50, 40, slow), 1.0) == (2.5, 40, None)   # not 20 new answers yet
    assert rules.adapt(5.0, 2.5, 40, answers(60, 40, slow), 1.0)[:2] == (1.25, 60)
    assert rules.adapt(5.0, 0.6, 60, answers(80, 40, slow), 1.0)[0] == 0.5              # the floor
    assert rules.adapt(5.0, 0.5, 80, answers(100, 40, slow), 1.0)[0] == 0.5


def test_a_lone_503_is_a_hiccup_more_than_10_percent_is_a_struggling_site():
    fast = [40] * 20
    assert rules.adapt(5.0, None, None, answers(40, 40, fast, n503=2), 1.0) == (None, None, None)
    assert rules.adapt(5.0, None, None, answers(40, 40, fast, n503=3), 1.0)[::2] == (2.5, "503")


def test_recovery_climbs_back_to_the_configured_rate_within_60_s():
    fast, rate, t = [40] * 20, 0.5, 0
    while rate is not None:
        rate, _, why = rules.adapt(5.0, rate, 20, answers(100, 40, fast), 1.0)
        t += 1
    assert why == "recovered" and t <= 60


def test_the_open_period_doubles_per_failed_probe_capped_at_10_minutes():
    assert [breaker.open_period(3, n) for n in (0, 1, 2, 3)] == [3, 6, 12, 24]
    assert breaker.open_period(60, 10) == breaker.OPEN_MAX_S


def test_give_up_needs_the_failed_probes_and_the_time_open():
    b = breaker.Breaker(breaker.OPEN, 10, NOW, opened_at=NOW - 1)
    for i in range(3):
        b = breaker.on_failure(breaker.on_probe(b, NOW + i, 90), NOW + i, 10, 3, 3, give_up_after_s=600)
    assert b.open_cycles == 3 and not b.gave_up                          # a blip: 3 probes in a few seconds
    b = breaker.on_failure(breaker.on_probe(b, NOW + 700, 90), NOW + 700, 10, 3, 3, give_up_after_s=600)
    assert b.gave_up                                                      # an outage: open for 700 s


# --- the worker ----------------------------------------------------------------------------------

def fresh(make, **options):
    """A worker whose hosts' robots.txt is not known yet."""
    w, q, clock = make(ids=(TID, OTHER), **options)
    q.conn.execute("DELETE FROM robots")
    return w, q, clock


def serve_robots(net, **kwargs):
    net.replace(responses.GET, ANY_ROBOTS, **kwargs)


def test_a_disallowed_url_is_never_requested_and_ends_invalid_kind_robots(make, net):
    w, q, clock = fresh(make)
    serve_robots(net, body=f"User-agent: *\nDisallow: /api/templates/workflows/{TID}\n"
                           "Sitemap: http://api.test/sitemap.xml\n")
    net.get(re.compile(re.escape(API) + r"/templates/workflows/\d+"), body=detail_body(OTHER))
    w.step()
    w.step()
    j = job(q)
    assert (j["status"], j["error_kind"], j["attempts"]) == ("invalid", retry.ROBOTS, 1)
    assert "api.test" in j["last_error"] and "'scraper'" in j["last_error"]
    urls = [c.request.url for c in net.calls]
    assert urls.count(ROBOTS_URL) == 1 and DETAIL not in urls          # asked once for both jobs, never sent
    assert job(q, OTHER)["status"] == "done"
    assert robots.sitemaps(q.conn, "http://api.test/anything") == ["http://api.test/sitemap.xml"]
    assert robots.sitemaps(q.conn, "http://nowhere.test") == []


def test_the_user_agent_token_picks_its_group(make, net):
    w, q, clock = fresh(make, user_agent="otherbot/1.0")
    serve_robots(net, body="User-agent: scraper\nDisallow: /\n")
    net.get(DETAIL, body=detail_body(TID))
    w.step()
    assert job(q)["status"] == "done"


def test_robots_ignore_sends_the_disallowed_request(make, net):
    w, q, clock = fresh(make, robots_ignore=("api.test",))
    serve_robots(net, body="User-agent: *\nDisallow: /\n")
    net.get(DETAIL, body=detail_body(TID))
    w.step()
    assert job(q)["status"] == "done" and ROBOTS_URL not in [c.request.url for c in net.calls]


@pytest.mark.parametrize("answer", [{"status": 503}, {"body": requests.ConnectionError("refused")}])
def test_robots_that_cannot_be_fetched_disallows_the_host_for_this_run(make, net, answer):
    w, q, clock = fresh(make, max_attempts=2, backoff_base_s=0.0)
    serve_robots(net, **answer)
    w.step()
    j = job(q)
    assert (j["status"], j["attempts"]) == ("pending", 0)               # no attempt charged
    assert [c.request.url for c in net.calls] == [ROBOTS_URL] * 2       # retried, nothing else sent
    d = q.domains()[DOMAIN]
    assert d.gave_up and w.step() is False                              # nothing else is claimed
    reason = politeness_rows.gave_up_reasons(q.conn)[DOMAIN]
    assert reason.startswith("robots.txt of api.test:80 could not be fetched (")
    assert reason.endswith("nothing was sent to api.test:80")
    stored = politeness_rows.load_robots(q.conn, "http://api.test:80")
    assert stored is None                                               # not cached: the next run asks again


def test_a_404_robots_allows_everything_and_is_reused_for_24_hours(make, net):
    w, q, clock = fresh(make)
    serve_robots(net, status=404)
    net.get(re.compile(re.escape(API) + r"/templates/workflows/\d+"), body=detail_body(TID))
    w.step()
    assert politeness_rows.load_robots(q.conn, "http://api.test:80")["status"] == 404
    w.robots._hosts.clear()                                             # another process: reads the table
    w.step()
    assert [c.request.url for c in net.calls].count(ROBOTS_URL) == 1


def test_crawl_delay_lowers_the_domains_rate_in_its_row_with_burst_1(make, net):
    w, q, clock = fresh(make, rate_per_s=20, burst=5)
    serve_robots(net, body="User-agent: *\nCrawl-delay: 0.2\n")
    net.get(DETAIL, body=detail_body(TID))
    w.step()
    assert rates.rate_of(q.conn, w.s, DOMAIN) == rules.Rate(5.0, 1, rules.ROBOTS)
    d = status.report(q, NOW)["domains"][DOMAIN]
    assert (d["rate_per_s"], d["configured_rate_per_s"], d["rate_reason"]) == (5.0, 20, "robots")


def test_a_robots_body_over_the_cap_is_refused(make, net):
    w, q, clock = fresh(make, max_attempts=1)
    serve_robots(net, body=b"#" * (robots.ROBOTS_MAX_BYTES + 1))
    w.step()
    assert job(q)["attempts"] == 0 and q.domains()[DOMAIN].gave_up


def test_the_limiter_follows_a_lowered_rate(tmp_path):
    from scraper.politeness.limiter import DomainLimiter
    s = settings.build(db_path=str(tmp_path / "jobs.db"), rate_per_s=20, burst=5)
    conn = store.open_db(s.db_path)
    clock = FakeClock(0.0)
    lim = DomainLimiter(s.limiter_path, 20, 5, rate_of=rates.limiter_rates(conn, s), clock=clock)
    units = margin.burst_units(20, 5)       # the burst less its margin (3 at 20/s)
    assert [r.limit for r in lim._bucket("x.test").rates] == [units]
    politeness_rows.update_rate(conn, "x.test", NOW, lambda r: {"robots_rate_per_s": 5.0, "robots_crawl_delay": 1})
    assert [r.limit for r in lim._bucket("x.test").rates] == [units]      # read again after RATE_TTL_S
    clock.advance(1.0)
    assert [(r.limit, r.interval) for r in lim._bucket("x.test").rates] == [(1, 200)]
    lim.close()
    conn.close()


def test_a_database_of_the_previous_schema_upgrades_in_place(tmp_path):
    path = str(tmp_path / "old.db")
    conn = sqlite3.connect(path)
    for number in range(store.SCHEMA_VERSION - 1):
        for statement in store._statements(store.MIGRATIONS[number]):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {store.SCHEMA_VERSION - 1}")
    conn.execute("INSERT INTO domains (domain, state, gave_up) VALUES ('n8n.io', 'open', 1)")
    conn.commit()
    conn.close()
    conn = store.open_db(path)
    row = dict(conn.execute("SELECT * FROM domains").fetchone())
    assert (row["domain"], row["state"], row["gave_up"], row["opened_at"], row["rate_per_s"]) == \
        ("n8n.io", "open", 1, 0, None)
    assert conn.execute("SELECT COUNT(*) FROM robots").fetchone()[0] == 0
    conn.close()
