"""Issue 41's two Done-when runs of webhook delivery (scripts/acceptance_delivery.py), scaled down: the same
functions the script runs, with real `scraper run` and `scraper deliver --follow` processes, real kill -9s
and the receiver and n8n stand-ins on 127.0.0.1; and the checks themselves, shown to fail."""

import json

import pytest

from scripts import acceptance_delivery as acceptance


@pytest.mark.slow
def test_kill_9s_of_workers_and_deliverers_lose_no_event_and_repeat_each_batch_byte_for_byte(tmp_path):
    figures, failures = acceptance.kills_run(tmp_path, templates=40, kills=5, rate=40, workers=2, batch=5,
                                             timeout_s=1, hold_s=1, receiver_delay_s=0.05)
    assert failures == []
    assert sum(figures["kills"].values()) == 5 and figures["kills"]["worker"] >= 1
    assert figures["kills"]["relay"] + figures["kills"]["deliver"] >= 1
    assert figures["templates_with_events"] == figures["templates_stored"] > 30
    assert figures["backlog"] == 0 and figures["unverified"] == 0 and figures["tamper_detected"]


@pytest.mark.slow
def test_a_receiver_down_gets_every_event_in_seq_order_after_and_the_crawl_keeps_its_pace(tmp_path):
    figures, failures = acceptance.outage_run(tmp_path, outage_s=3, rate=20)
    assert failures == []
    assert figures["attempts_refused"] + figures["attempts_503"] >= 1     # the outage was felt
    assert figures["delivered_requests"] >= 1 and figures["backlog"] == 0 and not figures["disabled"]
    assert figures["rate_with_endpoint"] >= 0.9 * figures["rate_without"] > 0


def _request(webhook_id, events, status=200):
    body = json.dumps([{"id": e, "sequence": f"{seq:020d}", "type": "template.created", "subject": str(seq),
                        "data": {"version": 1, "content_hash": "h"}} for seq, e in events])
    return {"at": 0.0, "status": status, "headers": {"webhook-id": webhook_id}, "body": body,
            "events": acceptance.carried(body)}


def test_the_checks_fail_on_a_lost_event_a_changed_repeat_and_a_split_batch():
    received = acceptance.Received(acceptance.SECRET)
    received.requests = [_request("a", [(1, "e1"), (2, "e2")]), _request("a", [(1, "e1"), (2, "e2"), (3, "e3")]),
                         _request("b", [(3, "e3")], status=503)]
    stored = [{"id": e} for e in ("e1", "e2", "e3", "e4")]
    failures = acceptance.check_received(received, stored, {})
    assert any("1 of 4 events never reached" in f for f in failures)
    assert any("different bytes" in f for f in failures)
    assert any("more than one webhook-id" in f for f in failures)
    assert any("one byte changed" in f for f in failures)     # these requests are not signed at all
