"""Worker.step on a real queue, with the network faked by `responses`."""

import json
import random
import re

import pytest
import requests
import responses

from scraper import __version__
from scraper.base import settings
from scraper.db import store
from scraper.db.queue import Queue
from scraper.policy import breaker, retry
from scraper.pool import jobclient
from scraper.products import status
from scraper.sites import n8n
from tests.helpers import API, DETAIL, DOMAIN, NOW, SITE, TID, detail_body, job, workflow

OTHER_TID = 5338
ANY_DETAIL = re.compile(re.escape(API) + r"/templates/workflows/\d+")
PAGE_HTML = """<!DOCTYPE html><html><head>
<title>Build Your First AI Agent | n8n workflow template</title>
<meta name="description" content="Learn agents">
<meta property="og:title" content="Build Your First AI Agent">
</head><body><svg><title>icon</title></svg></body></html>"""


def first_backoff(seed=7):
    return retry.backoff(1, settings.BACKOFF_BASE_S, rng=random.Random(seed))


# --- success -------------------------------------------------------------------------------------

@pytest.mark.parametrize("limiter_kind", ["none", "domain"])
def test_success_writes_the_workflow_and_done(make, net, limiter_kind):
    w, q, clock = make(limiter_kind=limiter_kind)
    body = detail_body(TID)
    net.get(DETAIL, body=body)
    assert w.step() is True
    j = job(q)
    assert (j["status"], j["attempts"], j["http_status"], j["worker"], j["error_kind"]) == ("done", 1, 200, None, None)
    expected = n8n.extract(body, jobclient.iso(NOW))
    stored = workflow(q)
    assert {k: stored[k] for k in expected} == expected
    assert stored["name"] == "Build Your First AI Agent" and stored["author"] == "lucaspeyrin"
    assert stored["page_title"] is None


def test_step_with_nothing_to_do_is_false(make, net):
    w, q, clock = make(ids=())
    assert w.step() is False
    assert len(net.calls) == 0


def test_user_agent_names_scraper_and_its_version(make, net):
    w, q, clock = make()
    net.get(DETAIL, body=detail_body(TID))
    w.step()
    ua = net.calls[0].request.headers["User-Agent"]
    assert ua.startswith(f"scraper/{__version__}")
    assert ua == settings.USER_AGENT


def test_with_page_fetches_the_page_too_and_follows_a_same_site_redirect(make, net):
    w, q, clock = make(with_page=True)
    net.get(DETAIL, body=detail_body(TID))
    net.get(f"{SITE}/workflows/{TID}", status=301,
            headers={"Location": f"{SITE}/workflows/{TID}-build-your-first-ai-agent/"})
    net.get(f"{SITE}/workflows/{TID}-build-your-first-ai-agent/", body=PAGE_HTML, content_type="text/html")
    assert w.step()
    stored = workflow(q)
    assert stored["page_title"] == "Build Your First AI Agent | n8n workflow template"
    assert stored["page_description"] == "Learn agents"
    assert json.loads(stored["page_og"]) == {"og:title": "Build Your First AI Agent"}
    assert job(q)["status"] == "done"


def test_with_page_a_missing_page_keeps_the_api_answer(make, net):
    w, q, clock = make(with_page=True)
    net.get(DETAIL, body=detail_body(TID))
    net.get(f"{SITE}/workflows/{TID}", status=404)
    assert w.step()
    stored = workflow(q)
    assert stored["id"] == TID and stored["page_title"] is None
    assert job(q)["status"] == "done"


def test_with_page_a_failing_page_retries_the_job(make, net):
    w, q, clock = make(with_page=True)
    net.get(DETAIL, body=detail_body(TID))
    net.get(f"{SITE}/workflows/{TID}", status=503)
    w.step()
    assert (job(q)["status"], job(q)["error_kind"]) == ("pending", "http_5xx")
    assert workflow(q) is None


# --- final failures ------------------------------------------------------------------------------

@pytest.mark.parametrize("status", [404, 410])
def test_gone_is_invalid(make, net, status):
    w, q, clock = make()
    net.get(DETAIL, status=status)
    w.step()
    j = job(q)
    assert (j["status"], j["http_status"], j["error_kind"], j["finished_at"]) == ("invalid", status, "http_4xx", NOW)
    assert workflow(q) is None


def test_forbidden_is_failed_with_the_reason_kept(make, net):
    w, q, clock = make()
    net.get(DETAIL, status=403)
    w.step()
    j = job(q)
    assert (j["status"], j["http_status"], j["error_kind"]) == ("failed", 403, "http_4xx")
    assert "403" in j["last_error"] and "Forbidden" in j["last_error"]
    assert q.counters() == {"error:http_4xx": 1}


# --- retries -------------------------------------------------------------------------------------

def test_500_is_retried_later_then_succeeds(make, net):
    w, q, clock = make()
    net.get(DETAIL, status=500)
    net.get(DETAIL, body=detail_body(TID))
    w.step()
    j = job(q)
    assert (j["status"], j["attempts"], j["error_kind"], j["http_status"]) == ("pending", 1, "http_5xx", 500)
    assert j["available_at"] == pytest.approx(NOW + first_backoff())
    base = settings.BACKOFF_BASE_S
    assert 0.8 * base <= j["available_at"] - NOW <= 1.2 * base
    assert w.step() is False                       # the retry is not due yet, and the worker did not wait
    clock.t = NOW + 2
    assert w.step() is True
    j = job(q)
    assert (j["status"], j["attempts"], j["error_kind"], j["last_error"]) == ("done", 2, None, None)
    assert workflow(q)["id"] == TID
    assert q.domains()[DOMAIN].failures == 0       # the success closed the count again


def test_max_attempts_exhausted_is_failed(make, net):
    w, q, clock = make(max_attempts=2)
    net.get(DETAIL, status=502)
    w.step()
    clock.t = NOW + 10
    w.step()
    j = job(q)
    assert (j["status"], j["attempts"], j["error_kind"], j["finished_at"]) == ("failed", 2, "http_5xx", NOW + 10)
    clock.t = NOW + 1000
    assert w.step() is False


def test_429_with_retry_after_pauses_the_domain_and_reschedules(make, net):
    w, q, clock = make(ids=(TID, OTHER_TID))
    net.get(DETAIL, status=429, headers={"Retry-After": "7"})
    w.step()
    assert q.domains()[DOMAIN].paused_until == NOW + 7
    j = job(q)
    # the attempt is given back: a 429 is the domain's, not the job's
    assert (j["status"], j["attempts"], j["error_kind"], j["http_status"]) == ("pending", 0, "http_429", 429)
    assert j["available_at"] == NOW + 7
    assert q.counters() == {"error:http_429": 1}
    assert status.report(q, NOW)["http_429"] == 1
    assert w.step() is False                       # the other job waits for the pause too
    assert len(net.calls) == 1


def test_a_429_with_an_unreadable_retry_after_is_still_a_429(make, net):
    w, q, clock = make()
    net.get(DETAIL, status=429, headers={"Retry-After": "\xb2"})
    w.step()
    j = job(q)
    assert (j["status"], j["error_kind"], j["http_status"]) == ("pending", "http_429", 429)
    assert q.domains()[DOMAIN].paused_until == NOW + settings.PAUSE_429_S


def test_429_is_not_a_breaker_failure(make, net):
    w, q, clock = make()
    net.get(DETAIL, status=429)
    w.step()
    b = q.domains()[DOMAIN]
    assert (b.state, b.failures, b.paused_until) == (breaker.CLOSED, 0, NOW + settings.PAUSE_429_S)


def test_truncated_json_is_a_parse_failure(make, net):
    w, q, clock = make()
    body = detail_body(TID)
    net.get(DETAIL, body=body[: len(body) // 2])
    w.step()
    j = job(q)
    assert (j["status"], j["error_kind"], j["attempts"]) == ("pending", "parse", 1)
    assert "not valid JSON" in j["last_error"]
    assert workflow(q) is None


def test_an_answer_for_another_template_is_a_parse_failure(make, net):
    w, q, clock = make()
    net.get(DETAIL, body=detail_body(OTHER_TID))
    w.step()
    j = job(q)
    assert (j["status"], j["error_kind"]) == ("pending", "parse")
    assert str(OTHER_TID) in j["last_error"]
    assert workflow(q) is None and workflow(q, OTHER_TID) is None


def test_connection_error_is_a_network_failure(make, net):
    w, q, clock = make()
    net.get(DETAIL, body=requests.ConnectionError("connection refused"))
    w.step()
    j = job(q)
    assert (j["status"], j["error_kind"], j["http_status"]) == ("pending", "network", None)
    assert q.domains()[DOMAIN].failures == 1


def test_timeout_is_a_timeout_failure(make, net):
    w, q, clock = make()
    net.get(DETAIL, body=requests.Timeout("read timed out"))
    w.step()
    j = job(q)
    assert (j["status"], j["error_kind"]) == ("pending", "timeout")
    assert q.counters() == {"error:timeout": 1}


def test_a_redirect_to_another_host_is_refused(make, net):
    w, q, clock = make()
    net.get(DETAIL, status=302, headers={"Location": "http://elsewhere.test/steal"})
    w.step()
    j = job(q)
    assert (j["error_kind"], j["http_status"]) == ("http_4xx", 302)
    assert "elsewhere.test" in j["last_error"]
    assert [c.request.url for c in net.calls] == [DETAIL]       # never followed


def test_ten_consecutive_503s_open_the_breaker(make, net):
    w, q, clock = make(ids=range(1, 13), breaker_failures=10)
    net.get(ANY_DETAIL, status=503)
    for _ in range(9):
        assert w.step()
    assert q.domains()[DOMAIN].state == breaker.CLOSED
    assert w.step()
    b = q.domains()[DOMAIN]
    assert (b.state, b.failures, b.open_until) == (breaker.OPEN, 10, NOW + settings.BREAKER_OPEN_S)
    assert q.counts()["pending"] == 12
    assert q.claim("w2", NOW, 60) is None
    assert w.step() is False
    assert len(net.calls) == 10


def test_the_breaker_threshold_comes_from_settings(make, net):
    w, q, clock = make(ids=range(1, 5), breaker_failures=3)
    net.get(ANY_DETAIL, status=503)
    for _ in range(3):
        w.step()
    assert q.domains()[DOMAIN].state == breaker.OPEN
    assert w.step() is False


# --- leases and stopping -------------------------------------------------------------------------

def test_a_result_is_not_written_when_the_lease_was_lost_during_the_request(make, net):
    w, q, clock = make()
    other = Queue(store.connect(w.s.db_path))

    def answer_after_the_job_was_taken_back(request):
        other.requeue(NOW + 1)                      # the supervisor thought we were dead
        assert other.claim("w2", NOW + 1, 60) is not None
        return 200, {}, detail_body(TID)

    net.add_callback(responses.GET, DETAIL, callback=answer_after_the_job_was_taken_back)
    w.step()
    j = job(q)
    assert (j["status"], j["worker"]) == ("running", "w2")
    assert workflow(q) is None
    other.conn.close()


def test_a_stop_before_the_request_hands_the_job_back(make, net):
    w, q, clock = make()
    w.flags.stop = True
    assert w.step() is True
    j = job(q)
    assert (j["status"], j["attempts"], j["worker"]) == ("pending", 0, None)
    assert len(net.calls) == 0


def test_a_worker_whose_claims_start_finding_nothing_rings_the_supervisor_once(tmp_path):
    """Issue 45: the run's end is seen when the last job is written, not at the supervisor's next tick: a
    worker rings its wakeup when its claims start finding nothing, once until it works again."""
    import select

    from scraper.pool import wakeup, worker
    s = settings.build(db_path=str(tmp_path / "jobs.db"), transcripts=False)
    conn = store.open_db(s.db_path)
    bell = wakeup.Wakeup()
    try:
        w = worker.Worker(s, "w1", Queue(conn), None, None, wakeup=bell)
        assert select.select([bell], [], [], 0)[0] == []
        assert w.step(now=NOW) is False
        assert select.select([bell], [], [], 0)[0] == [bell]     # rung: the supervisor's wait returns now
        bell.drain()
        assert w.step(now=NOW + 1) is False
        assert select.select([bell], [], [], 0)[0] == []         # still idle: no second ring
    finally:
        bell.close()
        conn.close()
