"""Measure a daily catalogue walk at 1 % churn: requests and wall time, against a first full crawl.

    .venv/bin/python -m scripts.bench_catalogue [--events 2000] [--rate 20] [--burst 5]

Runs against the events stand-in (scripts/standin/catalogue.py, 127.0.0.2), started here. The walk
(scraper.mirror.catalogue.walk) and the worker (scraper.pool.worker, one in-process worker, real SQLite,
the real per-domain limiter at --rate) are the project's own; only the process pool is left out, so
the figures are of the requests and the politeness wait, the part that scales. Steps: a first walk and
full crawl of the static event pages (include ^/events/); then 1 % of the calendar changes (a third
new, a third edited with a newer lastmod, a third removed); the daily walk and its jobs are timed and
their requests counted by the stand-in. At --rate R the wall time is about requests / R.
"""

import argparse
import dataclasses
import random
import sys
import tempfile
import time
from pathlib import Path

from scraper.base import settings
from scraper.base.sources import Source
from scraper.db import store
from scraper.db.queue import Queue
from scraper.mirror import catalogue as walker
from scraper.net import http
from scraper.politeness.limiter import DomainLimiter
from scraper.pool import worker
from scripts.standin import client


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=2000)
    p.add_argument("--rate", type=float, default=20.0)
    p.add_argument("--burst", type=int, default=5)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-catalogue-"))
    with client.start(catalogue=True, events=args.events, seed=11) as site:
        options = {"site": site.url, "include": ["^/events/"], "type": "Event", "required": ["name", "startDate"],
                   "fields": {"organizer": "css:p.organizer::text"}}
        source = Source(name="events", kind="catalogue", options=tuple(sorted(options.items())))
        s = settings.build(db_path=str(work / "jobs.db"), transcripts=False, rate_per_s=args.rate, burst=args.burst)
        s = dataclasses.replace(s, sources=(source,))
        conn = store.open_db(s.db_path)
        session = http.make_session(s.user_agent)
        lim = DomainLimiter(s.limiter_path, s.rate_per_s, s.burst, rate_of=s.rate_for)
        w = worker.Worker(s, "w1", Queue(conn), lim, session, rng=random.Random(1))

        get = w.client.walk()       # the walk's GETs through the worker's polite client, as `update` sends them

        def day(label):
            site.reset()
            t0 = time.monotonic()
            result = walker.walk(conn, s, source, get, time.time())
            t1 = time.monotonic()
            jobs = 0
            while w.step():
                jobs += 1
            t2 = time.monotonic()
            stats = site.stats()
            print(f"{label}: walk {result.requests} request(s) (robots.txt, sitemaps) in {t1 - t0:.2f} s "
                  f"({result.listed} listed, {result.new} new, {result.changed} changed, {result.removed} "
                  f"missing); {jobs} job(s) in {t2 - t1:.2f} s; {stats['requests']} requests in all "
                  f"({stats['by_kind']}), {t2 - t0:.2f} s wall, 429s {stats['http_429']}")
            return stats["requests"], t2 - t0

        full, full_s = day("first crawl")
        events = [e for e in site.truth()["events"] if "/events/" in e["url"]]
        n = max(3, round(len(events) / 100))
        ids = [e["id"] for e in random.Random(3).sample(events, 2 * (n // 3))]
        edited, removed = ids[: n // 3], ids[n // 3:]
        added = n - len(edited) - len(removed)
        site.change(add=added, edit=edited, remove=removed)
        daily, daily_s = day(f"daily walk at 1 % churn ({added} new, {len(edited)} edited, {len(removed)} removed)")
        print(f"daily/full: {daily}/{full} requests ({daily / full:.1%}), {daily_s:.2f}/{full_s:.2f} s "
              f"at {args.rate:g} requests/s")
        lim.close()
        session.close()
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
