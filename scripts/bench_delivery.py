"""Webhook delivery: events per second to a receiver that answers at once, one event per request and in
batches of 100, and the time from an event's commit to its receipt (p95) with delivery beside a run.

    .venv/bin/python -m scripts.bench_delivery [--events 3000] [--latency-events 150]

The receiver is the stand-in (scripts/standin/receiver.py) as a process of its own on 127.0.0.1; the outbox
is a fresh SQLite database; events are signed and made CloudEvents as in production (mirror/delivery).
"""

import argparse
import base64
import json
import os
import statistics
import tempfile
import time

from scraper.base import settings
from scraper.base.webhooks import Endpoint, Secret
from scraper.db import events, store
from scraper.mirror import delivery
from scraper.pool import relay
from scripts.standin import client

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()


def _outbox(folder, n, name):
    path = os.path.join(folder, f"{name}.db")
    conn = store.open_db(path)
    with store.transaction(conn) as c:
        for i in range(n):
            events.append(c, "template.updated", "n8n", str(i), {"id": i, "version": 2, "content_hash": "x" * 64},
                          events.iso(time.time()))
    return conn, path


def throughput(folder, receiver, n, batch):
    """Events per second delivered to `receiver`, `batch` per request."""
    conn, _ = _outbox(folder, n, f"batch{batch}")
    endpoint = Endpoint(receiver.url + "/in", (Secret(SECRET),), batch=batch)
    started = time.perf_counter()
    made = delivery.deliver(conn, [endpoint])
    took = time.perf_counter() - started
    sent = sum(a["events"] for a in made if a["ok"])
    conn.close()
    assert sent == n, f"{sent} of {n} delivered"
    return n / took, len(made)


def latency(folder, receiver, n, every_s):
    """Seconds from each event's commit to its receipt (a list), with delivery beside a run (pool/relay)."""
    conn, path = _outbox(folder, 0, "latency")
    s = settings.build(db_path=path, webhooks=(Endpoint(receiver.url + "/lat", (Secret(SECRET),)),))
    committed = {}
    with relay.beside(s):
        for i in range(n):
            events.append(conn, "template.updated", "n8n", f"lat-{i}", {"id": i}, events.iso(time.time()))
            committed[f"lat-{i}"] = time.time()
            time.sleep(every_s)
    conn.close()
    received = {}
    for r in receiver.received():
        if r["path"] == "/lat":
            for e in json.loads(r["body"]):
                received.setdefault(e["subject"], r["at"])
    assert set(received) == set(committed), "an event was not received"
    return [received[k] - committed[k] for k in committed]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3000, help="events for the batches of 100")
    parser.add_argument("--single-events", type=int, default=1000, help="events for one event per request")
    parser.add_argument("--latency-events", type=int, default=150, help="events written 50 ms apart")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder, client.start(kind="receiver") as receiver:
        one, requests_one = throughput(folder, receiver, args.single_events, 1)
        hundred, requests_hundred = throughput(folder, receiver, args.events, 100)
        delays = sorted(latency(folder, receiver, args.latency_events, 0.05))
    p95 = delays[min(len(delays) - 1, int(0.95 * len(delays)))]
    print(f"delivery, one event per request: {one:,.0f} events/s ({args.single_events} events, "
          f"{requests_one} requests)")
    print(f"delivery, batches of 100:        {hundred:,.0f} events/s ({args.events} events, {requests_hundred} "
          f"requests)")
    print(f"commit to receipt beside a run:  p50 {statistics.median(delays):.3f} s, p95 {p95:.3f} s, "
          f"max {delays[-1]:.3f} s ({len(delays)} events, one every 50 ms; the relay polls every "
          f"{delivery.POLL_S:g} s when idle)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
