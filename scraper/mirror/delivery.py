"""Webhook delivery (`scraper deliver`): each endpoint gets the outbox's events it wants, in seq order, in
batches, and its cursor moves only over a 2xx for the whole batch (strict order per endpoint, at least once).

A failed batch is pinned (`pending_upto`): its retries send the same events, the same bytes and the same
`webhook-id`, when the endpoint's schedule allows (policy/delivery). Each attempt holds the endpoint
(`deliveries.take`), so deliverers beside each other (a run's relay, `scraper deliver`, runs on two
machines) take turns and never send one endpoint two batches at once. One endpoint that is down or disabled
holds back no other, and delivery runs apart from the workers, so it never slows a crawl.
"""

import logging
import random
import time

from scraper.db import deliveries, events
from scraper.net import webhook
from scraper.policy import delivery

log = logging.getLogger(__name__)

SCAN = 500                  # events read at a time while looking for those an endpoint wants
POLL_S = 1.0                # --follow: how often an idle delivery looks again


def _batch(conn, endpoint, st):
    """(events to send, seq up to which they cover) for one endpoint: the pinned batch again, or the next
    `batch` it wants; the cursor skips what it does not want."""
    cursor, upto = st["cursor"], st["pending_upto"]
    if upto is not None:
        rows = [events.as_dict(r) for r in events.after(conn, cursor, until=upto)]
        return [e for e in rows if endpoint.wants(e["type"], e["source"])][:endpoint.batch], upto
    chosen = []
    while True:
        page = [events.as_dict(r) for r in events.after(conn, cursor, SCAN)]
        for e in page:
            if endpoint.wants(e["type"], e["source"]):
                chosen.append(e)
                if len(chosen) == endpoint.batch:
                    return chosen, e["seq"]
            cursor = e["seq"]
        if len(page) < SCAN:
            return chosen, cursor


def deliver_once(conn, endpoints, now, post=webhook.post, unit_random=random.random, send=None):
    """One attempt for each endpoint that is due and has something to send; returns what happened, one
    dict per attempt: {url, webhook_id, events, status, error, ok, disabled}. `send(endpoint, batch, now)`
    makes an attempt (default: the signed webhook POST; the ETL API has its own, mirror/etl)."""
    send = send or (lambda endpoint, batch, at: _send(endpoint, batch, at, post))
    done = []
    for endpoint in endpoints:
        url = endpoint.shown
        held = now + endpoint.timeout_s + endpoint.hold_s
        st = deliveries.take(conn, url, now, held)
        if st is None:
            continue
        try:
            batch, upto = _batch(conn, endpoint, st)
        except BaseException:
            deliveries.release(conn, url, held)
            raise
        if not batch:
            deliveries.skip(conn, url, upto, now, held)
            continue
        if st["pending_upto"] is None and not deliveries.pin(conn, url, upto, now, held):
            continue
        outcome = send(endpoint, batch, now)
        status, error = outcome["status"], outcome["error"]
        verdict = delivery.verdict(status)
        wait = None
        if verdict == delivery.RETRY:
            wait = delivery.next_wait_s(st["attempts"] + 1, endpoint.retry, unit_random(),
                                        delivery.retry_after_s(outcome["retry_after"], now))
        disabled = verdict == delivery.DISABLE or (verdict == delivery.RETRY and wait is None)
        if not deliveries.attempted(conn, url, outcome["webhook_id"], batch[0]["seq"], upto, len(batch), now, status,
                                    error, outcome["ms"], outcome["ok"], held, now + (wait or 0.0), disabled):
            log.warning("webhook %s: an attempt outlasted its hold and another deliverer took the endpoint; the "
                        "attempt is recorded, the endpoint left as its holder has it", url)
            done.append({**outcome, "disabled": False})
            continue
        if disabled:
            log.error("webhook %s disabled: %s", url, error or f"HTTP {status}")
        elif error:
            log.warning("webhook %s: %s; next attempt in %.0f s", url, error, wait or 0.0)
        done.append({**outcome, "disabled": disabled})
    return done


def redeliver(conn, endpoints, now, since=None, run_id=None, post=webhook.post):
    """Send again the batches each endpoint already took (those with an event after seq `since`, or of run
    `run_id`): the same events, so the same `webhook-id` and bytes while its configuration is unchanged. The
    cursors stay where they are (what was never delivered is `deliver`'s). Returns the attempts made."""
    done = []
    for endpoint in endpoints:
        url = endpoint.shown
        for first, last in deliveries.delivered(conn, url, since, run_id):
            batch = [e for e in (events.as_dict(r) for r in events.after(conn, first - 1, until=last))
                     if endpoint.wants(e["type"], e["source"])]
            if not batch:
                continue
            outcome = _send(endpoint, batch, now, post)
            deliveries.replayed(conn, url, outcome["webhook_id"], first, last, len(batch), now, outcome["status"],
                                outcome["error"], outcome["ms"], outcome["ok"])
            done.append(outcome)
    return done


def _send(endpoint, batch, now, post):
    msg_id = webhook.webhook_id(batch)
    ctype, payload = webhook.body(batch, endpoint.batch == 1)
    status, retry_after, error, ms = post(endpoint.url, payload,
                                          webhook.headers(endpoint.secrets, msg_id, ctype, payload, now),
                                          endpoint.timeout_s)
    return {"url": endpoint.shown, "webhook_id": msg_id, "events": len(batch), "status": status, "error": error,
            "ok": delivery.verdict(status) == delivery.OK, "retry_after": retry_after, "ms": ms}


def deliver(conn, endpoints, clock=time.time, sleep=time.sleep, follow=False, stop=lambda: False,
            post=webhook.post, etl=None):
    """Deliver until nothing is due (or, with `follow`, until `stop()`); returns the attempts made. `etl`:
    (the ETL API as an endpoint, a mirror.etl.Reporter), delivered in the same loop."""
    made = []
    while not stop():
        now = clock()
        got = deliver_once(conn, endpoints, now, post)
        if etl is not None:
            got += deliver_once(conn, [etl[0]], now, send=etl[1].send)
        made += got
        if not got:
            if not follow:
                return made
            sleep(POLL_S)
    return made
