"""One webhook request: a batch of outbox events as CloudEvents (the `cloudevents` package), signed as
Standard Webhooks asks (the `standardwebhooks` package), posted once without following a redirect.

The body is made from the stored events alone (each CloudEvent's `id` and `time` are the event's), so every
attempt of a batch sends the same bytes under the same `webhook-id`; only `webhook-timestamp` and the
signature over it are the attempt's. With two secrets (a rotation) the header carries both signatures.
"""

import datetime
import hashlib
import time

import requests

from scraper.base.errors import FetchError
from scraper.net import http
from scraper.policy import retry

CLOUDEVENT = "application/cloudevents+json"
BATCH = "application/cloudevents-batch+json"
ANSWER_MAX_BYTES = 65_536       # of an error answer (its first 300 characters are kept); an error page is larger


def _cloudevent(event):
    from cloudevents.core.v1.event import CloudEvent
    occurred = datetime.datetime.fromisoformat(event["occurred_at"].replace("Z", "+00:00"))
    if occurred.tzinfo is None:
        occurred = occurred.replace(tzinfo=datetime.timezone.utc)
    attributes = {"id": event["id"], "source": f"scraper/{event['source']}", "type": event["type"],
                  "specversion": "1.0", "time": occurred, "subject": event["subject"],
                  "datacontenttype": "application/json", "sequence": f"{event['seq']:020d}"}
    return CloudEvent(attributes=attributes, data=event["data"])


def webhook_id(events):
    """The id every attempt of this batch carries: the event's own id for one, else one made from theirs."""
    if len(events) == 1:
        return events[0]["id"].replace(".", "_")
    return "batch_" + hashlib.sha256("\n".join(e["id"] for e in events).encode()).hexdigest()[:32]


def body(events, one_per_request):
    """(Content-Type, bytes): one structured CloudEvent, or a batch (a JSON array of them)."""
    from cloudevents.core.formats.json import JSONFormat
    fmt = JSONFormat()
    if one_per_request:
        return CLOUDEVENT, fmt.write(_cloudevent(events[0]))
    return BATCH, b"[" + b",".join(fmt.write(_cloudevent(e)) for e in events) + b"]"


def headers(secrets, msg_id, content_type, payload, now):
    """The Standard Webhooks headers of one attempt at `now` (Unix seconds), signed with every secret."""
    from standardwebhooks import Webhook
    at = datetime.datetime.fromtimestamp(int(now), datetime.timezone.utc)
    text = payload.decode("utf-8")
    return {"content-type": content_type, "webhook-id": msg_id, "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": " ".join(Webhook(s.value).sign(msg_id, at, text) for s in secrets)}


def post(url, payload, head, timeout_s):
    """(HTTP status or None, Retry-After or None, error sentence or None, ms) of one POST; never raises and
    never follows a redirect."""
    started = time.monotonic()
    try:
        resp = requests.post(url, data=payload, headers=head, timeout=timeout_s, allow_redirects=False, stream=True)
    except (requests.RequestException, ValueError) as e:
        return None, None, f"{type(e).__name__}: {str(e)[:300]}", int((time.monotonic() - started) * 1000)
    try:
        ms = int((time.monotonic() - started) * 1000)
        if 200 <= resp.status_code < 300:
            return resp.status_code, None, None, ms
        # an error answer is read under the attempt's deadline (a timer cuts a body that trickles) and cap
        try:
            answer = bytes(http.read_body(resp, url, started + timeout_s, timeout_s, ANSWER_MAX_BYTES))
        except FetchError as e:
            answer = (f"(an answer over {ANSWER_MAX_BYTES // 1024} KiB)" if e.kind == retry.TOO_LARGE
                      else f"(no complete answer within {timeout_s:g} s)" if e.kind == retry.TIMEOUT
                      else f"({e.kind} mid-answer)").encode()
        where = f" to {resp.headers.get('location')}" if 300 <= resp.status_code < 400 else ""
        error = f"HTTP {resp.status_code}{where}: {answer.decode('utf-8', 'replace').strip()[:300]}".rstrip(": ")
        return resp.status_code, resp.headers.get("retry-after"), error, int((time.monotonic() - started) * 1000)
    except (requests.RequestException, OSError) as e:
        return resp.status_code, None, f"{type(e).__name__}: {str(e)[:300]}", int((time.monotonic() - started) * 1000)
    finally:
        resp.close()

