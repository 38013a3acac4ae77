"""robots.txt, Crawl-delay, the effective rate and the adaptive slow-down (issue 15): the pure rules, and
the worker on a real queue with the network faked by `responses`."""

import re

import pytest
import requests
import responses

from scraper.base import settings
from scraper.base.clock import FakeClock
from scraper.db import domains as domain_rows
from scraper.db import politeness as politeness_rows
from scraper.db import store
from scraper.policy import breaker, retry
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


def test_adaptive_halves_while_slow_at_most_once_per_window_floor_a_tenth():
    n = rules.WINDOW
    slow = [400] * n                                                                     # ten times 40 ms
    rate, mark, why = rules.adapt(5.0, None, None, answers(2 * n, 40, slow), 1.0, 60.0)
    assert (rate, mark, why) == (2.5, 2 * n, "slow")
    assert rules.adapt(5.0, 2.5, 2 * n, answers(2 * n + 10, 40, slow), 1.0, 60.0) == (2.5, 2 * n, None)  # too soon
    assert rules.adapt(5.0, 2.5, 2 * n, answers(3 * n, 40, slow), 1.0, 60.0)[:2] == (1.25, 3 * n)
    assert rules.adapt(5.0, 0.6, 3 * n, answers(4 * n, 40, slow), 1.0, 60.0)[0] == 0.5         # the floor
    assert rules.adapt(5.0, 0.5, 4 * n, answers(5 * n, 40, slow), 1.0, 60.0)[0] == 0.5


def test_a_site_ten_times_slower_is_slowed_once_the_slow_answers_are_most_of_the_window():
    n = rules.WINDOW
    fewer, most = n // 2 - 1, n // 2 + 1
    assert rules.struggling(answers(3 * n, 40, [40] * (n - fewer) + [400] * fewer)) is None
    assert rules.struggling(answers(3 * n, 40, [40] * (n - most) + [400] * most)) == "slow"


def test_a_healthy_fast_site_read_by_a_busy_client_is_never_slow():
    n = rules.WINDOW
    # times doubled and tripled by scheduling noise, yet far under the floor: not a signal
    noisy = [5, 40, 90, 120, 150, 180] * n
    assert rules.struggling(answers(3 * n, 8, noisy[:n])) is None
    # the ordinary faults: a few answers of 3 s (1 % of templates) among fast ones
    assert rules.struggling(answers(3 * n, 40, [3000] * 3 + [40] * (n - 3))) is None
    # a first sample that was itself slow (start-up) does not make a later normal one look fast or slow
    assert rules.struggling(answers(3 * n, 500, [40] * n)) is None


def test_503s_are_a_struggle_only_as_a_share_of_a_full_window():
    n, fast = rules.WINDOW, [40] * rules.WINDOW
    at_share = answers(n, 40, fast, n503=int(n * rules.SHARE_503))
    assert rules.adapt(5.0, None, None, at_share, 1.0, 60.0) == (None, None, None)
    assert rules.struggling(answers(n, 40, fast, n503=n // 30 + 1)) is None          # one in thirty: ordinary
    assert rules.adapt(5.0, None, None, answers(n, 40, fast, n503=n // 3), 1.0, 60.0)[::2] == (2.5, "503")  # a third
    assert rules.struggling(answers(n - 1, 40, fast[1:], n503=n // 2)) is None        # too few answers to judge


def test_recovery_climbs_back_to_the_configured_rate_within_60_s():
    fast, rate, t = [40] * rules.WINDOW, 0.5, 0
    while rate is not None:
        rate, _, why = rules.adapt(5.0, rate, 20, answers(5 * rules.WINDOW, 40, fast), 1.0, 60.0)
        t += 1
    assert why == "recovered" and t <= 60


def test_recovery_takes_the_adaptive_recover_setting():
    def climb(recover_s):
        rate, t = 0.5, 0
        while rate is not None:
            rate, _, why = rules.adapt(5.0, rate, 20, answers(5 * rules.WINDOW, 40, [40] * rules.WINDOW), 1.0,
                                       recover_s)
            t += 1
        return t
    assert climb(10.0) == 10 and climb(60.0) == 60


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


@pytest.mark.parametrize("answer", [{"status": 503}, {"status": 429}, {"body": requests.ConnectionError("refused")}])
def test_robots_that_cannot_be_fetched_makes_the_host_wait_like_a_down_site(make, net, answer):
    w, q, clock = fresh(make, max_attempts=2, backoff_base_s=0.0, pause_429_s=0.0, breaker_open_s=10,
                        give_up_after_s=100)
    serve_robots(net, **answer)
    w.step()
    j = job(q)
    assert (j["status"], j["attempts"]) == ("pending", 0)               # no attempt charged
    assert [c.request.url for c in net.calls] == [ROBOTS_URL] * 2       # retried, nothing else sent
    d = q.domains()[DOMAIN]
    assert (d.state, d.gave_up) == (breaker.OPEN, False)                # it waits: not given up
    assert w.step() is False                                            # nothing is claimed while it is open
    assert politeness_rows.load_robots(q.conn, "http://api.test:80") is None   # not cached: asked again
    # each probe fetches robots.txt again, once; a failed one doubles the open period
    clock.t = d.open_until
    w.step()
    assert [c.request.url for c in net.calls] == [ROBOTS_URL] * 3
    d = q.domains()[DOMAIN]
    assert (d.state, d.open_cycles, d.gave_up, d.open_until - clock.t) == (breaker.OPEN, 1, False, 20)
    # robots.txt answers again: the probe's job goes on, the breaker closes, the other job follows
    serve_robots(net, body="User-agent: *\nAllow: /\n")
    for tid in (TID, OTHER):
        net.get(f"{API}/templates/workflows/{tid}", body=detail_body(tid))
    clock.t = d.open_until
    w.step()
    w.step()
    assert q.domains()[DOMAIN].state == breaker.CLOSED
    assert job(q)["status"] == job(q, OTHER)["status"] == "done"
    assert [c.request.url for c in net.calls].count(ROBOTS_URL) == 4


def test_robots_that_stays_unavailable_gives_the_host_up_only_after_give_up_after(make, net):
    w, q, clock = fresh(make, max_attempts=1, breaker_open_s=10, max_open_cycles=2, give_up_after_s=100)
    serve_robots(net, status=503)
    w.step()
    probes = 0
    while not q.domains()[DOMAIN].gave_up:
        d = q.domains()[DOMAIN]
        assert d.state == breaker.OPEN and (probes < 2 or clock.t - d.opened_at < 100)   # blips are waited out
        assert probes < 10                                                  # 10 s, 20 s, 40 s, 80 s: it ends
        clock.t = d.open_until
        w.step()
        probes += 1
    d = q.domains()[DOMAIN]
    assert probes >= 3 and clock.t - d.opened_at >= 100 and w.step() is False
    reason = domain_rows.gave_up_reasons(q.conn)[DOMAIN]
    assert reason.startswith("robots.txt of api.test:80 could not be fetched (")
    assert reason.endswith("nothing was sent to api.test:80")
    assert {c.request.url for c in net.calls} == {ROBOTS_URL}           # nothing but robots.txt, ever


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
    from scraper.db import slots
    from scraper.politeness.limiter import DomainLimiter
    s = settings.build(db_path=str(tmp_path / "jobs.db"), rate_per_s=20, burst=5)
    conn = store.open_db(s.db_path)
    clock = FakeClock(0.0)
    lim = DomainLimiter(s.limiter_path, 20, 5, rate_of=rates.limiter_rates(conn, s), clock=clock)
    assert lim.params("x.test") == slots.gcra(20, 5)
    domain_rows.update_rate(conn, "x.test", NOW, lambda r: {"robots_rate_per_s": 5.0, "robots_crawl_delay": 1})
    assert lim.params("x.test") == slots.gcra(20, 5)      # read again after RATE_TTL_S
    clock.advance(1.0)
    assert lim.params("x.test") == slots.gcra(5.0, 1)     # robots.txt: 5/s, no burst
    lim.close()
    conn.close()


def test_a_database_of_the_previous_schema_upgrades_in_place(tmp_path):
    path = str(tmp_path / "old.db")
    conn = store.connect(path)
    store.migrate(conn, store.SCHEMA_VERSION - 1)
    conn.execute("INSERT INTO domains (domain, state, gave_up) VALUES ('n8n.io', 'open', 1)")
    conn.commit()
    conn.close()
    conn = store.open_db(path)
    row = dict(conn.execute("SELECT * FROM domains").fetchone())
    assert (row["domain"], row["state"], row["gave_up"], row["opened_at"], row["rate_per_s"]) == \
        ("n8n.io", "open", 1, 0, None)
    assert conn.execute("SELECT COUNT(*) FROM robots").fetchone()[0] == 0
    conn.close()
