"""Issue 7 in small: a job's failure is contained, answers are bounded, abandoned work is charged,
a domain that keeps failing is given up, and seeding retries a failing page. Real SQLite; the network
is `responses`."""

import gzip
import json
import re
import time

import pytest
import requests
import responses

from scraper.base import settings
from scraper.base.errors import FetchError, ParseError
from scraper.db import politeness as politeness_rows
from scraper.db import store
from scraper.db.queue import Queue
from scraper.mirror import seed
from scraper.net import http
from scraper.policy import breaker, progress, retry
from scraper.politeness import robots
from scraper.products import status
from scraper.sites import n8n
from tests.helpers import API, DETAIL, DOMAIN, NOW, TID, detail_body, job, workflow

SEARCH = re.compile(re.escape(API) + r"/templates/search.*")


# --- containment ---------------------------------------------------------------------------------

def test_an_answer_that_makes_parsing_raise_ends_its_job_as_internal_and_the_worker_goes_on(make, net):
    w, q, clock = make(ids=[TID, 5338])
    deep = b'{"id":%d,"workflow":' % TID + b"[" * 200_000 + b"]" * 200_000 + b"}"
    net.get(DETAIL, body=deep)
    net.get(f"{API}/templates/workflows/5338", body=detail_body(5338))
    assert w.step() and w.step()
    j = job(q)
    assert (j["status"], j["error_kind"], j["attempts"]) == ("pending", "internal", 1)
    assert j["last_error"].startswith("RecursionError: ")
    assert job(q, 5338)["status"] == "done" and workflow(q, 5338) is not None
    assert q.counters()["error:internal"] == 1


def test_internal_failures_end_the_job_failed_after_max_attempts(make, net):
    w, q, clock = make(max_attempts=2)
    net.get(DETAIL, body=b"[" * 200_000 + b"]" * 200_000)
    w.step()
    clock.t += 3600
    w.step()
    assert (job(q)["status"], job(q)["error_kind"], job(q)["attempts"]) == ("failed", "internal", 2)


def test_a_lone_surrogate_is_refused_with_a_reason_and_nothing_is_stored(make, net):
    w, q, clock = make()
    net.get(DETAIL, body=detail_body(TID).replace(b'"name": "', b'"name": "\\ud800', 1))
    w.step()
    j = job(q)
    assert (j["status"], j["error_kind"]) == ("pending", "parse")
    assert "not valid Unicode" in j["last_error"] and "\\ud800" in j["last_error"]
    assert workflow(q) is None


def test_bytes_that_are_not_utf8_are_a_parse_failure(make, net):
    w, q, clock = make()
    net.get(DETAIL, body=detail_body(TID).replace(b'"name": "', b'"name": "\xff\xfe', 1))
    w.step()
    assert (job(q)["error_kind"], workflow(q)) == ("parse", None)


# --- bounded answers -----------------------------------------------------------------------------

def test_a_compression_bomb_is_refused_as_too_large_and_not_retried(make, net):
    w, q, clock = make(max_answer_mb=1)
    bomb = gzip.compress(b" " * (20 * 2**20))
    assert len(bomb) < 2**16
    net.get(DETAIL, body=bomb, headers={"Content-Encoding": "gzip"})
    w.step()
    j = job(q)
    assert (j["status"], j["error_kind"], j["attempts"]) == ("failed", "too_large", 1)
    assert "1 MB" in j["last_error"] and "--max-answer-mb" in j["last_error"]


def test_a_compressed_answer_under_the_cap_is_decoded_and_stored(make, net):
    w, q, clock = make(max_answer_mb=1)
    net.get(DETAIL, body=gzip.compress(detail_body(TID)), headers={"Content-Encoding": "gzip"})
    w.step()
    assert job(q)["status"] == "done" and workflow(q)["id"] == TID


def test_an_announced_length_over_the_cap_is_refused_before_reading(net):
    net.get(DETAIL, body=b" " * (2 * 2**20 + 1), auto_calculate_content_length=True)
    with pytest.raises(FetchError) as e:
        http.fetch(http.make_session("t"), DETAIL, 5, 2 * 2**20)
    assert e.value.kind == retry.TOO_LARGE and "announces 2097153 bytes" in str(e.value)


def test_a_fetch_returns_the_whole_body_under_the_cap(net):
    body = detail_body(TID)
    net.get(DETAIL, body=body)
    assert http.fetch(http.make_session("t"), DETAIL, 5, len(body)) == body


def test_too_large_is_final_and_a_failed_probe_costs_no_attempt():
    assert retry.decide(retry.TOO_LARGE, 200, 1, 3) == retry.Outcome(retry.FAILED)
    for kind in retry.BREAKER_KINDS:
        assert retry.decide(kind, None, 3, 3, probe=True) == retry.Outcome(retry.RETRY, 0.0, counted=False)
    assert retry.decide(retry.HTTP_4XX, 400, 3, 3, probe=True).action == retry.FAILED
    assert {retry.INTERNAL, retry.ABANDONED, retry.TOO_LARGE} <= set(retry.KINDS)


# --- the give-up rule ----------------------------------------------------------------------------

def fail_probe(b, now, cycles=3):
    b = breaker.on_probe(b, now, 90)
    return breaker.on_failure(b, now, 10, 60, max_open_cycles=cycles)


def test_a_domain_is_given_up_after_max_open_cycles_failed_probes_and_tried_again_next_run():
    b = breaker.Breaker(breaker.OPEN, 10, NOW)
    for n in (1, 2):
        b = fail_probe(b, NOW + n * 60)
        assert (b.state, b.open_cycles, b.gave_up) == (breaker.OPEN, n, False)
        assert breaker.admits(b, b.open_until) == "probe"
    b = fail_probe(b, NOW + 180)
    assert (b.state, b.open_cycles, b.gave_up) == (breaker.OPEN, 3, True)
    assert breaker.admits(b, NOW + 10**6) == "no"
    again = breaker.on_new_run(b)
    assert (again.gave_up, again.open_cycles, breaker.admits(again, NOW + 181)) == (False, 0, "probe")
    assert breaker.on_success(fail_probe(breaker.Breaker(breaker.OPEN, 10, NOW), NOW)) == breaker.Breaker()


def test_failed_probes_spend_no_attempts_and_the_domain_is_given_up(make, net):
    w, q, clock = make(ids=[1, 2, 3], breaker_failures=1, max_open_cycles=2, max_attempts=1, give_up_after_s=0)
    net.get(re.compile(re.escape(API) + r"/templates/workflows/\d+"), body=requests.ConnectionError("refused"))
    w.step()                                          # an ordinary failure: counted, ends failed (1 attempt)
    assert q.domains()[DOMAIN].state == breaker.OPEN and q.counts()["failed"] == 1
    for _ in (1, 2):
        clock.t = q.domains()[DOMAIN].open_until
        assert w.step()                                # the probe
    b = q.domains()[DOMAIN]
    assert (b.state, b.open_cycles, b.gave_up) == (breaker.OPEN, 2, True)
    assert q.counts() == {"pending": 2, "running": 0, "done": 0, "failed": 1, "invalid": 0}
    assert all(job(q, i)["attempts"] == 0 for i in (2, 3) if job(q, i)["status"] == "pending")
    clock.t += 10**6
    assert w.step() is False and not q.work_left() and q.given_up() == {DOMAIN: 2}
    report = status.report(q, clock.t)
    assert report["domains"][DOMAIN]["gave_up"] is True and report["domains"][DOMAIN]["state"] == "open"
    assert "gave up after 2 failed probes" in status.render(report)
    assert "breaker open, gave up" in progress.domains_note(q.domains(), clock.t)
    assert q.new_run(clock.t) == [DOMAIN] and q.work_left()


# --- abandoned work ------------------------------------------------------------------------------

def test_a_worker_that_dies_holding_a_job_is_charged_and_the_job_ends_abandoned(tmp_path):
    conn = store.open_db(str(tmp_path / "jobs.db"))
    q = Queue(conn)
    q.seed([(n8n.job_key(1), n8n.SITE, "u", "d"), (n8n.job_key(2), n8n.SITE, "u", "d")], now=NOW)
    for n in (1, 2):
        j = q.claim(f"w{n}", NOW + n, 60)
        assert j.key == "n8n:1" and j.attempts == n
        assert q.abandon(NOW + n, [f"w{n}"], max_attempts=2) == ((1, 0) if n == 1 else (0, 1))
    row = dict(conn.execute("SELECT * FROM jobs WHERE key = 'n8n:1'").fetchone())
    assert (row["status"], row["error_kind"], row["attempts"]) == ("failed", "abandoned", 2)
    assert "w2 died holding it" in row["last_error"]
    other = q.claim("w3", NOW + 3, 60)
    assert q.release(other, "w3", NOW + 3)                          # a clean hand-back stays free
    assert dict(conn.execute("SELECT attempts FROM jobs WHERE key = 'n8n:2'").fetchone())["attempts"] == 0
    assert q.counters()["error:abandoned"] == 2
    conn.close()


# --- seeding -------------------------------------------------------------------------------------

def search_body(ids, total):
    return json.dumps({"totalWorkflows": total, "workflows": [{"id": i, "name": f"t{i}"} for i in ids]})


@pytest.fixture
def seed_settings(tmp_path):
    s = settings.build(db_path=str(tmp_path / "jobs.db"), api_url=API, site_url="http://site.test",
                       backoff_base_s=0.01, rate_per_s=1000, burst=100)
    conn = store.open_db(s.db_path)      # robots.txt known (404: no rules): the tests count only the pages
    politeness_rows.save_robots(conn, robots.host_of(API), time.time(), 404, b"", None, None, ())
    conn.close()
    return s


@pytest.mark.parametrize("first", [
    {"status": 503, "body": "busy"},
    {"status": 429, "body": "slow down", "headers": {"Retry-After": "0"}},
    {"body": '{"totalWorkflows": 130, "workflo'},
    {"body": requests.ConnectionError("reset by peer")},
])
def test_seeding_retries_a_failing_page(seed_settings, first):
    waits = []
    with responses.RequestsMock() as rsps:
        rsps.get(SEARCH, **first)
        rsps.get(SEARCH, body=search_body(range(1, 101), 130))
        rsps.get(SEARCH, body=search_body(range(101, 131), 130))
        walk = seed.discover(seed_settings, sleep=waits.append)
    assert list(walk.entries) == list(range(1, 131)) and walk.complete and len(waits) == 1


def test_seeding_gives_up_after_max_attempts_and_never_takes_a_short_walk_for_complete(seed_settings):
    with responses.RequestsMock() as rsps:
        rsps.get(SEARCH, body=search_body(range(1, 101), 250))
        rsps.get(SEARCH, body=search_body(range(101, 140), 250))       # short before the end: not complete
        with pytest.raises(ParseError) as e:
            seed.discover(seed_settings, sleep=lambda s: None)
        pages = [int(re.search(r"page=(\d+)", c.request.url).group(1)) for c in rsps.calls]
        # page 2 tried max_attempts times; page 3 at most once, read ahead meanwhile (mirror/readahead)
        assert pages.count(1) == 1 and pages.count(2) == seed_settings.max_attempts and pages.count(3) <= 1
    assert "39 templates, 100 were due" in str(e.value)


@pytest.mark.parametrize("hostile, reason", [
    (b"[" * 200_000 + b"]" * 200_000, "RecursionError"),                # valid JSON, nested past the parser
    (b"\xff\xfe{\x00\x00 not UTF-8", "not valid JSON"),
    (b'{"totalWorkflows": "many", "workflows": {"id": 1}}', "no 'workflows' list"),
    (b'{"totalWorkflows": 1, "workflows": [{"id": "1"}]}', "without an integer id"),
])
def test_a_hostile_search_page_fails_that_page_with_a_reason_never_the_seed(seed_settings, hostile, reason):
    with responses.RequestsMock() as rsps:
        rsps.get(SEARCH, body=hostile)
        with pytest.raises(ParseError) as e:
            seed.discover(seed_settings, sleep=lambda s: None)
        assert len(rsps.calls) == seed_settings.max_attempts         # retried like any bad page, then given up
    assert reason in str(e.value)


def test_a_search_page_over_the_cap_is_too_large_and_not_retried(seed_settings):
    small = settings.build(**{**seed_settings.__dict__, "max_answer_mb": 1})
    with responses.RequestsMock() as rsps:
        rsps.get(SEARCH, body=b" " * (2**20 + 1))
        with pytest.raises(FetchError) as e:
            seed.discover(small, sleep=lambda s: None)
        assert len(rsps.calls) == 1
    assert e.value.kind == retry.TOO_LARGE


def test_wrong_types_beside_the_id_do_not_stop_the_walk(seed_settings):
    odd = {"id": 7, "name": ["not", "a", "name"], "nodes": 5, "description": {"x": None}, "totalViews": "many"}
    with responses.RequestsMock() as rsps:
        rsps.get(SEARCH, body=json.dumps({"totalWorkflows": 1, "workflows": [odd]}))
        walk = seed.discover(seed_settings, sleep=lambda s: None)
    assert list(walk.entries) == [7] and walk.complete        # the detail answer of 7 is vetted by its own job
