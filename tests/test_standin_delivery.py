"""The stand-ins of issue 41 (scripts/standin/receiver.py, etl.py): a webhook receiver switchable while it
runs, and the ETL API in both field spellings; in-process, on 127.0.0.1."""

import pytest
import requests

from scripts.standin.etl import EtlApi
from scripts.standin.receiver import Receiver


def test_the_receiver_logs_every_request_and_answers_as_told_while_it_runs():
    with Receiver() as r:
        assert requests.post(r.url + "/in", data=b"one", headers={"webhook-id": "a"}).status_code == 200
        r.set_answer(429, retry_after=7)
        late = requests.post(r.url + "/in", data=b"two")
        r.set_answer(302)
        moved = requests.post(r.url + "/in", data=b"three", allow_redirects=False)
        r.set_answer(410)
        gone = requests.post(r.url + "/in", data=b"four")
        r.set_answer("hang", hang_s=5)
        with pytest.raises(requests.Timeout):
            requests.post(r.url + "/in", data=b"five", timeout=0.2)
        log = r.received()
    assert (late.status_code, late.headers["retry-after"]) == (429, "7")
    assert (moved.status_code, moved.headers["location"], gone.status_code) == (302, "/moved", 410)
    assert [e["body"] for e in log] == ["one", "two", "three", "four", "five"]
    assert log[0]["headers"]["webhook-id"] == "a"
    with pytest.raises(ValueError):
        Receiver(status=299)


@pytest.mark.parametrize("spelling, id_, created", [("camel", "_id", "createdAt"), ("snake", "id", "created_at")])
def test_the_etl_api_answers_in_either_spelling_and_a_repeated_create_makes_one_run(spelling, id_, created):
    with EtlApi(spelling=spelling, key="k") as api:
        auth = {"Authorization": "Bearer k"}
        assert requests.get(api.url + "/runs", timeout=5).status_code == 401
        made = [requests.post(api.url + "/runs", json={"domain": "n8n", "items": [{"id": "1", "url": "u1"}]},
                              headers={**auth, "Idempotency-Key": "run-1"}, timeout=5) for _ in range(2)]
        run = made[0].json()
        assert [m.status_code for m in made] == [201, 200] and made[1].json()[id_] == run[id_] and created in run
        requests.post(f"{api.url}/runs/{run[id_]}/items", headers=auth, timeout=5,
                      json={"items": [{"id": "1", "status": "failed", "failedReason": "HTTP 500"},
                                      {"id": "2", "url": "u2", "status": "done"}]})
        latest = requests.get(api.url + "/runs/latest?domain=n8n", headers=auth, timeout=5).json()
        state = api.snapshot()
    assert latest[id_] == run[id_] and latest["status"] == "running"
    (stored,) = state["runs"]
    assert {k: v["status"] for k, v in stored["items"].items()} == {"1": "failed", "2": "done"}
    assert state["counters"]["creates"] == 1 and state["counters"]["replays"] == 1
