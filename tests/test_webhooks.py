"""Webhooks (issue 41, item 2): [[webhook]] endpoints in the configuration, `scraper deliver` sending the
outbox as signed CloudEvents in strict order, retries with the same id and bytes, Retry-After, 410, no
redirect; the network faked by `responses`."""

import base64
import json
import os
import time

import pytest
import responses
from standardwebhooks import Webhook, WebhookVerificationError

from scraper.base import config, settings
from scraper.base.errors import ConfigError
from scraper.base.webhooks import Endpoint, Secret, parse
from scraper.db import deliveries, events, store
from scraper.mirror import delivery
from scripts.standin.receiver import Receiver
from tests.helpers import assert_one_sentence_error, invoke, trickling_server

SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()
OTHER = "whsec_" + base64.b64encode(b"o" * 32).decode()
HOOK = "http://hooks.test/in"


@pytest.fixture
def outbox(tmp_path):
    """A database whose outbox holds: 3 template events (n8n), an item event (events), a run.finished."""
    conn = store.open_db(str(tmp_path / "jobs.db"))
    for i, (type_, source) in enumerate([("template.created", "n8n"), ("item.created", "events"),
                                         ("template.updated", "n8n"), ("template.removed", "n8n"),
                                         ("run.finished", "n8n")], 1):
        events.append(conn, type_, source, str(i), {"i": i}, "2026-11-27T10:00:00+00:00", run_id=7 if i == 4 else None)
    yield conn
    conn.close()


def endpoint(**kw):
    return Endpoint(**{"url": HOOK, "secrets": (Secret(SECRET),), "events": ("template.*", "run.finished"),
                       "sources": ("n8n",), "batch": 2, "retry": (5.0, 60.0), **kw})


def received(rsps):
    return [(c.request.headers, c.request.body) for c in rsps.calls]


def test_batches_go_in_order_signed_and_a_retry_sends_the_same_id_and_bytes(outbox):
    now = time.time()
    ep = endpoint()
    with responses.RequestsMock() as rsps:
        rsps.post(HOOK, status=503)
        first = delivery.deliver_once(outbox, [ep], now, unit_random=lambda: 0.5)
        assert [(a["ok"], a["events"], a["status"]) for a in first] == [(False, 2, 503)]
        st = deliveries.state(outbox, ep.shown)
        assert st["cursor"] == 0 and st["attempts"] == 1 and st["next_at"] == pytest.approx(now + 5)
        assert delivery.deliver_once(outbox, [ep], now + 4) == []          # not yet
        rsps.replace(responses.POST, HOOK, status=200)
        delivery.deliver(outbox, [ep], clock=lambda: now + 6)
        sent = received(rsps)
    assert len(sent) == 3
    (h1, b1), (h2, b2), (h3, b3) = sent
    assert (h1["webhook-id"], b1) == (h2["webhook-id"], b2)              # the retry: same id, same bytes
    for head, body in sent:
        Webhook(SECRET).verify(body, dict(head))
    assert h1["content-type"] == "application/cloudevents-batch+json"
    batches = [json.loads(b) for b in (b2, b3)]
    # the item (another source) is left out; strict seq order; the CloudEvent names the event
    assert [[(e["type"], e["subject"], e["data"]["i"]) for e in b] for b in batches] == [
        [("template.created", "1", 1), ("template.updated", "3", 3)],
        [("template.removed", "4", 4), ("run.finished", "5", 5)]]
    assert batches[0][0]["source"] == "scraper/n8n" and batches[0][0]["sequence"] == f"{1:020d}"
    assert deliveries.state(outbox, ep.shown)["cursor"] == 5
    tampered = b2.replace(b'"i": 1', b'"i": 2')
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(tampered, dict(h2))


def test_one_event_per_request_and_two_secrets_while_rotating(outbox):
    ep = endpoint(secrets=(Secret(SECRET), Secret(OTHER)), batch=1, events=("run.finished",))
    with responses.RequestsMock() as rsps:
        rsps.post(HOOK, status=204)
        delivery.deliver(outbox, [ep])
        (head, body), = received(rsps)
    assert head["content-type"] == "application/cloudevents+json"
    event = json.loads(body)
    assert head["webhook-id"] == event["id"] == events.as_dict(events.after(outbox, 4)[0])["id"]
    for secret in (SECRET, OTHER):
        assert Webhook(secret).verify(body, dict(head))["type"] == "run.finished"


def test_retry_after_is_honoured_410_disables_and_a_redirect_is_a_failure(outbox):
    now = time.time()
    ep = endpoint(retry=(1.0,))
    with responses.RequestsMock() as rsps:
        rsps.post(HOOK, status=429, headers={"Retry-After": "7"})
        delivery.deliver_once(outbox, [ep], now)
        assert deliveries.state(outbox, ep.shown)["next_at"] >= now + 7
        assert delivery.deliver_once(outbox, [ep], now + 6.9) == []
        rsps.replace(responses.POST, HOOK, status=302, headers={"Location": "http://elsewhere.test/"})
        moved = delivery.deliver_once(outbox, [ep], now + 8)
        assert len(rsps.calls) == 2                           # the redirect was not followed
    assert moved[0]["ok"] is False and "elsewhere.test" in moved[0]["error"]
    # the one-step schedule is spent: the endpoint is disabled, and says so
    report = deliveries.report(outbox, [ep.shown], now + 9)[0]
    assert report["disabled"] and report["cursor"] == 0 and report["backlog"] == 5
    gone = endpoint()
    with responses.RequestsMock() as rsps:
        rsps.post("http://gone.test/", status=410)
        ep410 = Endpoint("http://gone.test/", gone.secrets)
        assert delivery.deliver_once(outbox, [ep410], now)[0]["disabled"]
        assert delivery.deliver_once(outbox, [ep410], now + 10_000) == []
    assert deliveries.state(outbox, ep410.shown)["disabled"]


def test_a_receiver_that_hangs_is_abandoned_at_the_timeout(outbox):
    import requests
    now = time.time()
    with responses.RequestsMock() as rsps:
        rsps.post(HOOK, body=requests.exceptions.ReadTimeout("read timed out"))
        got = delivery.deliver_once(outbox, [endpoint()], now, unit_random=lambda: 0.0)
    assert got[0]["status"] is None and "ReadTimeout" in got[0]["error"]
    assert deliveries.state(outbox, endpoint().shown)["next_at"] == pytest.approx(now + 4.5)



def test_a_receiver_that_trickles_its_error_answer_is_cut_at_the_attempts_deadline():
    """A 503 whose body comes a byte at a time: each read is within the timeout, the whole is not. The attempt
    ends at its deadline with the status and a reason, and never holds its deliverer longer."""
    from scraper.net import webhook
    started = time.monotonic()
    with trickling_server(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 1000\r\n\r\n") as url:
        status, _, error, ms = webhook.post(url + "/", b"{}", {}, 1.0)
    assert status == 503 and error == "HTTP 503: (no complete answer within 1 s)"
    assert time.monotonic() - started < 3.0 and 900 <= ms

def write_config(tmp_path, text):
    path = tmp_path / "scraper.toml"
    path.write_text(text)
    return str(path)


def test_endpoints_are_declared_in_the_configuration_and_their_secrets_never_shown(tmp_path, monkeypatch):
    path = write_config(tmp_path, '[[webhook]]\nurl = "https://user:pw@hooks.test/in?token=t"\n'
                                  'secrets = ["${HOOK_SECRET}", "${OLD_SECRET}"]\nevents = ["template.*"]\n'
                                  'batch = 10\nretry = [1, 2]\ntimeout = 3\nhold = 2\n')
    s, _ = settings.load(path, {"HOOK_SECRET": SECRET, "OLD_SECRET": OTHER})
    (ep,) = s.webhooks
    assert (ep.shown, ep.events, ep.batch, ep.retry, ep.timeout_s, ep.hold_s) == (
        "https://hooks.test/in", ("template.*",), 10, (1.0, 2.0), 3.0, 2.0)
    assert [x.value for x in ep.secrets] == [SECRET, OTHER]
    assert SECRET not in repr(s)
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    monkeypatch.setenv("OLD_SECRET", OTHER)
    shown = invoke("--config", path, "config")
    assert shown.exit_code == 0 and SECRET not in shown.output and OTHER not in shown.output


@pytest.mark.parametrize("table, environ, words", [
    ('url = "https://h.test/"\nsecret = "whsec_abc"', {}, ["environment"]),
    ('url = "https://h.test/"\nsecret = "${HOOK}"', {}, ["HOOK", "not set"]),
    ('url = "https://h.test/"\nsecret = "${HOOK}"', {"HOOK": "hunter2"}, ["not a Standard Webhooks secret"]),
    ('url = "ftp://h.test/"\nsecret = "${HOOK}"', {"HOOK": SECRET}, ["http or https"]),
    ('url = "https://h.test/"\nsecret = "${HOOK}"\nbatch = 0', {"HOOK": SECRET}, ["batch"]),
    ('url = "https://h.test/"\nsecret = "${HOOK}"\nhold = 0', {"HOOK": SECRET}, ["hold"]),
    ('url = "https://h.test/"\nsecret = "${HOOK}"\nevents = ["nope"]', {"HOOK": SECRET}, ["not an event type"]),
])
def test_a_bad_webhook_table_is_one_sentence(tmp_path, table, environ, words):
    path = write_config(tmp_path, "[[webhook]]\n" + table)
    with pytest.raises(ConfigError) as e:
        parse(config.read_toml(path, "configuration file")["webhook"], path, environ)
    for word in words:
        assert word in str(e.value)
    assert "hunter2" not in str(e.value)


def test_deliver_and_deliveries_commands(tmp_path, outbox, monkeypatch):
    db = tmp_path / "jobs.db"
    path = write_config(tmp_path, f'[[webhook]]\nurl = "{HOOK}"\nsecret = "${{HOOK_SECRET}}"\n')
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    with responses.RequestsMock() as rsps:
        rsps.post(HOOK, status=200)
        result = invoke("--config", path, "deliver", db=db)
    assert result.exit_code == 0, result.output
    assert "delivered 5 event(s) in 1 request(s); 0 attempt(s) failed." in result.output
    report = json.loads(invoke("--config", path, "deliveries", "--json", db=db).output)
    assert report["endpoints"] == [{"url": HOOK, "cursor": 5, "backlog": 0, "oldest_s": None, "last_error": None,
                                    "disabled": False, "attempts": 0, "next_at": None}]
    status = json.loads(invoke("--config", path, "status", "--json", db=db).output)
    assert [(e["url"], e["cursor"], e["backlog"], e["disabled"]) for e in status["endpoints"]] == [(HOOK, 5, 0, False)]
    assert SECRET not in invoke("--config", path, "status", db=db).output
    monkeypatch.delenv("HOOK_SECRET")
    os.remove(path)
    assert_one_sentence_error(invoke("deliver", db=db), "[[webhook]]")


def test_redeliver_sends_the_same_batches_again_and_moves_no_cursor(outbox):
    ep = endpoint()
    with responses.RequestsMock() as rsps:
        rsps.post(HOOK, status=200)
        delivery.deliver(outbox, [ep])
        first = received(rsps)
        again = delivery.redeliver(outbox, [ep], time.time(), since=0)
        by_run = delivery.redeliver(outbox, [ep], time.time(), run_id=7)
        sent = received(rsps)
    assert [a["ok"] for a in again] == [True, True]
    assert [(h["webhook-id"], b) for h, b in sent[2:4]] == [(h["webhook-id"], b) for h, b in first]
    assert [a["webhook_id"] for a in by_run] == [first[1][0]["webhook-id"]]     # the batch holding run 7's event
    assert deliveries.state(outbox, ep.shown)["cursor"] == 5
    assert delivery.redeliver(outbox, [ep], time.time(), since=5) == []


def test_redeliver_needs_one_range(tmp_path, outbox, monkeypatch):
    path = write_config(tmp_path, f'[[webhook]]\nurl = "{HOOK}"\nsecret = "${{HOOK_SECRET}}"\n')
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    assert_one_sentence_error(invoke("--config", path, "redeliver", db=tmp_path / "jobs.db"), "--since", "--run")


def test_two_deliverers_take_turns_on_an_endpoint(outbox):
    now = time.time()
    url = endpoint().shown
    assert deliveries.take(outbox, url, now, now + 45) is not None
    assert deliveries.take(outbox, url, now + 1, now + 46) is None            # held by the first
    assert delivery.deliver_once(outbox, [endpoint()], now + 1) == []
    assert deliveries.take(outbox, url, now + 46, now + 90) is not None       # a holder that died lets it go
    assert not deliveries.release(outbox, url, now + 45)                        # the first's hold is over
    assert deliveries.release(outbox, url, now + 90)
    # an attempt holds the endpoint for its timeout and its hold (a deliverer killed mid-attempt lets it go then)
    held = []

    def post(*_):
        held.append((deliveries.take(outbox, url, now + 92.9, now + 99) is None,
                     deliveries.take(outbox, url, now + 93.1, now + 99) is not None))
        return 200, None, None, 1

    (made,) = delivery.deliver_once(outbox, [endpoint(timeout_s=1.0, hold_s=2.0)], now + 90, post=post)
    assert held == [(True, True)] and made["ok"]


def test_an_attempt_that_outlasted_its_hold_changes_nothing_of_the_endpoint(outbox):
    """A deliverer whose attempt ran past its hold while another took the endpoint: its answer is recorded, but
    neither the cursor, the pinned batch nor the other's hold moves (the holder sends the pinned batch again,
    with the same id and bytes)."""
    now = time.time()
    url = endpoint().shown
    late = []

    def post(*_):
        late.append(deliveries.take(outbox, url, now + 20, now + 60))      # the other deliverer, after the hold
        return 200, None, None, 1

    (made,) = delivery.deliver_once(outbox, [endpoint(timeout_s=1.0, hold_s=2.0)], now, post=post)
    assert late[0] is not None and late[0]["pending_upto"] is not None
    st = deliveries.state(outbox, url)
    assert st["cursor"] == 0 and st["pending_upto"] == late[0]["pending_upto"]
    lease = outbox.execute("SELECT lease_until FROM webhook_endpoints WHERE url = ?", (url,)).fetchone()[0]
    assert lease == now + 60
    assert outbox.execute("SELECT COUNT(*) FROM deliveries WHERE url = ? AND ok = 1", (url,)).fetchone()[0] == 1
    # the holder's own attempt moves the endpoint on
    (again,) = delivery.deliver_once(outbox, [endpoint()], now + 61, post=lambda *_: (200, None, None, 1))
    assert again["ok"] and again["webhook_id"] == made["webhook_id"]
    assert deliveries.state(outbox, url)["cursor"] == late[0]["pending_upto"]


def test_a_run_delivers_beside_itself_and_sends_its_last_events_before_it_returns(tmp_path, outbox):
    """relay.beside: a process of its own, stopped after a last pass (the receiver stand-in on 127.0.0.1)."""
    from scraper.pool import relay
    with Receiver() as receiver:
        hook = receiver.url + "/in"
        s = settings.build(db_path=str(tmp_path / "jobs.db"), webhooks=(endpoint(url=hook, sources=()),))
        with relay.beside(s):
            pass
        got = [(r["headers"], r["body"]) for r in receiver.received()]
    sent = [e for _, body in got for e in json.loads(body)]
    assert [e["subject"] for e in sent] == ["1", "3", "4", "5"]
    for head, body in got:
        Webhook(SECRET).verify(body, head)
    assert deliveries.state(outbox, hook)["cursor"] == 5


from hypothesis import given  # noqa: E402 - the property tests of policy/delivery, kept beside their use
from hypothesis import strategies as st  # noqa: E402


@given(st.lists(st.floats(0.5, 1e5), min_size=1, max_size=8), st.integers(1, 10), st.floats(0, 0.999999),
       st.one_of(st.none(), st.floats(0, 1e5)))
def test_the_wait_is_the_schedules_step_with_jitter_never_before_retry_after(schedule, failures, unit, asked):
    from scraper.policy import delivery as policy
    wait = policy.next_wait_s(failures, tuple(schedule), unit, asked)
    if failures > len(schedule):
        assert wait is None                                    # spent: the endpoint is disabled
    else:
        step = schedule[failures - 1]
        assert wait >= (asked or 0.0)
        assert wait == asked or step * (1 - policy.JITTER) <= wait <= step * (1 + policy.JITTER)


@given(st.integers(100, 599))
def test_only_a_2xx_delivers_and_only_410_disables(status):
    from scraper.policy import delivery as policy
    expected = policy.OK if status < 300 and status >= 200 else policy.DISABLE if status == 410 else policy.RETRY
    assert policy.verdict(status) == expected
    assert policy.retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", 1445412480.0) == 0.0
    assert policy.retry_after_s("7", 0) == 7.0 and policy.retry_after_s("soon", 0) is None
