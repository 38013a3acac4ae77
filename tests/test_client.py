"""One polite client for every request (issue 46): a walk's requests take the same steps as a worker's.

A 429 answered to the listing walk pauses the domain in the shared `domains` row, which the run's workers
read (on SQLite and on PostgreSQL); the walk's requests are in the request log; a 403 through one proxy of
a walk bans it for the domain. In-process, the network faked by `responses`, real databases."""

import re
import time

import pytest

from scraper.base import settings
from scraper.base.clock import FakeClock
from scraper.base.errors import DomainResting
from scraper.db import domains as domain_rows
from scraper.db import store
from scraper.db.queue import Queue
from scraper.mirror import seed
from scraper.policy import breaker
from scraper.politeness import client
from tests.helpers import API, SITE, TID
from tests.test_containment import search_body

SEARCH = re.compile(re.escape(API) + r"/templates/search.*")


def _seeded(backend, **options):
    """Settings over `backend` and its queue, with the template TID queued as `seed` queues it."""
    s = settings.build(db_path=backend, api_url=API, site_url=SITE, backoff_base_s=0.01, **options)
    conn = store.open_db(s.db_path)
    q = Queue(conn)
    q.seed(list(seed.job_rows(s, [TID])), time.time())
    return s, conn, q


def test_a_429_to_a_walk_pauses_the_run_s_workers_and_the_walk_is_in_the_request_log(backend, net):
    s, conn, q = _seeded(backend)
    clock = FakeClock(time.time())
    t0, waits = clock(), []
    net.get(SEARCH, status=429, headers={"Retry-After": "20"})
    net.get(SEARCH, body=search_body(range(1, 31), 30))
    walk = seed.discover(s, sleep=waits.append, clock=clock)
    assert list(walk.entries) == list(range(1, 31)) and walk.complete
    assert waits == [20.0]          # the walk's own retry waits what the site asked
    paused = q.domains()[s.domain]
    assert paused.paused_until == pytest.approx(t0 + 20, abs=1) and paused.state == breaker.CLOSED
    # the pause is the domain's, in the row every worker's claim reads: none takes its job until it is over
    assert q.claim("w1", t0 + 10, s.lease_s) is None
    job = q.claim("w1", t0 + 21, s.lease_s)
    assert job is not None and job.key == f"n8n:{TID}"
    logged = sorted((r["domain"], r["kind"], r["status"] or 0, r["run_id"])
                    for r in conn.execute("SELECT * FROM requests"))
    assert logged == [(s.domain, "http_429", 429, None), (s.domain, "ok", 0, None),
                      (s.domain, "robots_4xx", 404, None)]
    conn.close()


def test_a_403_through_one_proxy_of_a_walk_bans_it_for_the_domain(backend, net):
    first, second = "http://127.0.0.1:1", "http://127.0.0.1:2"      # never reached: `responses` answers
    s, conn, q = _seeded(backend, proxies=f"{first},{second}")
    net.get(SEARCH, status=403)                                     # the first proxy's address is refused
    net.get(SEARCH, body=search_body(range(1, 31), 30))
    walk = seed.discover(s, sleep=lambda seconds: None)
    assert walk.complete
    bans = [(r["url"], r["domain"]) for r in conn.execute("SELECT url, domain FROM proxy_bans")]
    assert bans == [(first, s.domain)]
    conn.close()


def test_a_walk_sends_nothing_to_a_domain_whose_breaker_rests(backend, net):
    """The run's workers found the domain failing: the walk fails at once instead of adding to it, and
    tests it once the open period is over (as a worker's probe would), which closes the breaker."""
    s, conn, q = _seeded(backend)
    clock = FakeClock(time.time())
    q.update_domain(s.domain, lambda b: breaker.on_blocked(b, clock(), 60.0), clock())
    net.get(SEARCH, body=search_body(range(1, 31), 30))
    with client.opened(s, conn, "walk", clock) as polite:
        get = polite.walk(domain=s.domain)
        with pytest.raises(DomainResting, match="resting: its breaker is open for 60 s more"):
            get(f"{API}/templates/search?page=1")
        assert get.sent == 0 and len(net.calls) == 0
        clock.advance(61)
        assert get(f"{API}/templates/search?page=1")
    assert q.domains()[s.domain].state == breaker.CLOSED
    conn.close()


def test_the_lint_check_finds_every_way_out_beside_the_polite_client(tmp_path):
    """scripts/check_one_way_out: an HTTP library, the transport's fetch or session, or the browser used
    outside the client is found with its line; annotations and the transport's helpers are not; the
    package as it stands has none (the worker, the walks and seed once had three)."""
    from scripts import check_one_way_out as check
    path = tmp_path / "m.py"
    path.write_text("from typing import TYPE_CHECKING\n"
                    "import requests\n"
                    "from scraper.net import http\n"
                    "from scraper.net.http import make_session\n"
                    "from scraper.net.browser import BrowserFetcher\n"
                    "if TYPE_CHECKING:\n"
                    "    import urllib3\n"
                    "def get(url):\n"
                    "    http.kind_of_status(200)\n"
                    "    return http.fetch(make_session('ua'), url, 1, 1)\n", encoding="utf-8")
    assert check.offences(path) == [(2, "requests"), (4, "scraper.net.http.make_session"),
                                    (5, "scraper.net.browser.BrowserFetcher"), (10, "scraper.net.http.fetch")]
    assert check.offences(path, "scraper/sites/youtube.py") == [
        (4, "scraper.net.http.make_session"), (5, "scraper.net.browser.BrowserFetcher"),
        (10, "scraper.net.http.fetch")]     # its allowance is the library's Session, nothing more
    assert check.main() == 0


def test_a_give_up_is_a_breaker_transition_read_by_key(backend):
    """One owner of the `domains` row: a domain given up for the run (robots.txt or every proxy unusable) is
    `breaker.on_give_up` written by `db/domains`, its reason beside it; a new run gives it another chance."""
    s, conn, q = _seeded(backend)
    now = time.time()
    q.update_domain(s.domain, lambda b: breaker.on_failure(b, now - 5, 1, 30.0), now - 5)   # open since now - 5
    before, after = q.give_up(s.domain, "robots.txt of site.test could not be fetched (too_large)", now, now + 3600)
    assert after == breaker.on_give_up(before, now, now + 3600) == q.breaker(s.domain)
    assert (after.state, after.gave_up, after.open_until, after.opened_at) == (breaker.OPEN, True, now + 3600, now - 5)
    assert domain_rows.gave_up_reasons(conn) == {s.domain: "robots.txt of site.test could not be fetched "
                                                               "(too_large)"}
    assert q.breaker("elsewhere.test") == breaker.Breaker()      # no row: closed
    assert q.claim("w1", now + 1, s.lease_s) is None              # its jobs stay pending
    assert list(q.given_up()) == [s.domain]
    assert q.new_run(now + 2) == [s.domain] and not q.breaker(s.domain).gave_up
    conn.close()


def test_seed_from_search_says_so_when_the_domain_rests(tmp_path, net):
    """`seed --from-search` while the run's workers hold the domain's breaker open: one sentence, exit 1,
    nothing sent to the site and nothing seeded."""
    from tests.helpers import count, invoke
    db = tmp_path / "jobs.db"
    s, conn, q = _seeded(str(db))
    q.update_domain(s.domain, lambda b: breaker.on_blocked(b, time.time(), 300.0), time.time())
    conn.close()
    result = invoke("seed", "--from-search", db=db)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{s.domain} is resting: its breaker is open for" in result.output and "nothing was seeded." in result.output
    assert len(net.calls) == 0 and count(db) == 1


def test_walk_due_sends_its_walks_through_one_client_and_logs_them(tmp_path, net):
    """`seed`/`update`'s entry point: the n8n walk's requests (robots.txt, the search page) are in the request
    log, and a domain whose breaker rests fails the walk with its one sentence, nothing sent."""
    from scraper.mirror import walks
    s, conn, q = _seeded(str(tmp_path / "jobs.db"))
    net.get(SEARCH, body=search_body(range(1, 31), 30))
    [outcome] = walks.walk_due(conn, s, time.time())
    assert outcome.error is None and outcome.result.complete and outcome.result.new == 30
    assert sorted(r["kind"] for r in conn.execute("SELECT kind FROM requests")) == ["ok", "robots_4xx"]
    q.update_domain(s.domain, lambda b: breaker.on_blocked(b, time.time(), 300.0), time.time())
    calls = len(net.calls)
    [outcome] = walks.walk_due(conn, s, time.time(), names=[s.n8n_source])
    assert outcome.error.startswith(f"{s.domain} is resting: its breaker is open for") and len(net.calls) == calls
    conn.close()


@pytest.mark.parametrize("starved", [False, True])
def test_a_slot_that_went_stale_before_its_request_could_leave_is_not_used(tmp_path, net, monkeypatch, starved):
    """Issue 45: between its rate slot and its send a process can be descheduled; sent late, the request
    would arrive bunched with the next ones past what the margin absorbs. A slot older than STALE_S is left
    unused and another taken: every request is sent once, one slot more is taken than requests sent. A
    process too starved to send on any fresh slot sends on its STALE_TAKES + 1st (it never sends nothing)."""
    from scraper.policy import margin
    from scraper.politeness import domain as politeness
    s, conn, _ = _seeded(str(tmp_path / "jobs.db"), rate_per_s=50, burst=1)
    clock = FakeClock(time.time())
    net.get(SEARCH, body=search_body(range(1, 31), 30))
    wait_for_slot, late = politeness.Politeness._wait_for_slot, []

    def descheduled_once(self, renew):     # after the first slot's grant (every grant: starved), away
        granted = wait_for_slot(self, renew)
        if starved or not late:
            late.append(True)
            clock.advance(margin.STALE_S * 2)
        return granted

    monkeypatch.setattr(politeness.Politeness, "_wait_for_slot", descheduled_once)
    with client.opened(s, conn, "walk", clock) as polite:
        taken, acquire = [], polite.limiter.acquire
        polite.limiter.acquire = lambda domain, *a, **k: taken.append(domain) or acquire(domain, *a, **k)
        polite.walk(domain=s.domain)(f"{API}/templates/search?page=1")
    sent = [c.request.url for c in net.calls]
    assert len(sent) == len(set(sent)) and any("/templates/search" in u for u in sent)   # each sent once
    # the stale slot was not used; starved, each request took STALE_TAKES more and went on the last
    assert len(taken) == (len(sent) * (margin.STALE_TAKES + 1) if starved else len(sent) + 1)
    conn.close()
