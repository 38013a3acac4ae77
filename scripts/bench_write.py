"""The in-process cost of writing job results as a worker does: each result prepared outside the transaction
(`record.prepare`), then written by `Queue.complete` with `record.write` in the transaction that marks its
job done. Three passes of N results each: new templates (an API and a page answer, a video link), the same
templates fetched again unchanged (no new version), new catalogue items; on SQLite, and on a throw-away
PostgreSQL server where one can start (tests/pg.py). Nothing is sent over a network.

    .venv/bin/python -m scripts.bench_write [--results 1000] [--repeats 3] [--sqlite-only]

Prints, per backend and pass, the best of the repeats: results per second and microseconds per result,
for the write (`complete`) alone and with `prepare`.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

from scraper.db import store
from scraper.db.queue import Queue
from scraper.mirror import record
from scraper.net.http import answer
from scraper.sites import Result, n8n
from tests.helpers import definition_ids, detail_body

AT = "2026-11-01T00:00:00+00:00"
SITE = "http://shop.test"
FIRST_ID = 1_000_000


def template_results(n):
    bases = definition_ids()
    out = []
    for i in range(n):
        tid = FIRST_ID + i
        body = detail_body(bases[i % len(bases)], id=tid)
        raw = {n8n.API: answer(body, f"{SITE}/api/templates/workflows/{tid}", 200, "application/json"),
               n8n.PAGE: answer(b"<html><title>T</title>" + bytes(str(tid), "ascii") + b"</html>",
                                f"{SITE}/workflows/{tid}", 200, "text/html")}
        links = (("template_videos", "template_id", tid, [{"template_id": tid, "video_id": f"v{tid}"}]),)
        out.append((n8n.job_key(tid), Result(versioned=((n8n.extract(body, AT), raw, AT),), links=links)))
    return out


def item_results(n):
    out = []
    for i in range(n):
        key = f"/p/{i}"
        page = answer(f"<html><h1>Product {i}</h1></html>".encode() * 20, SITE + key, 200, "text/html")
        rec = {"name": f"Product {i}", "price": i, "views": i}
        out.append((f"shop:{key}", Result(items=(("shop", key, SITE + key, rec, {"page": page}, AT, ("views",)),))))
    return out


def one_pass(conn, results):
    """(seconds in `complete`, seconds with `prepare`) for `results` [(job key, Result)]; each job claimed first."""
    q = Queue(conn)
    q.seed([(key, "catalogue" if key.startswith("shop:") else n8n.SITE, SITE + "/" + key, "shop.test",
             "shop" if key.startswith("shop:") else "n8n") for key, _ in results], 1.0)
    conn.execute("UPDATE jobs SET status = 'pending', attempts = 0")
    write = total = 0.0
    for _key, result in results:
        job = q.claim("bench", 2.0, 60.0)
        t0 = time.perf_counter()
        prepared = record.prepare(result)
        t1 = time.perf_counter()
        assert q.complete(job, "bench", 3.0, 1, write=lambda c, r=prepared, j=job: record.write(c, r, 3.0,
                                                                                               source=j.source))
        t2 = time.perf_counter()
        write, total = write + t2 - t1, total + t2 - t0
    return write, total


def measure(new_db, n, repeats):
    """{pass: (best write s, best total s)} over `repeats` fresh databases."""
    templates, items = template_results(n), item_results(n)
    best = {}
    for _ in range(repeats):
        conn = store.open_db(new_db())
        for name, results in (("templates new", templates), ("templates again", templates), ("items new", items)):
            got = one_pass(conn, results)
            best[name] = got if name not in best else tuple(map(min, best[name], got))
        conn.close()
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=1000, help="Results per pass.")
    parser.add_argument("--repeats", type=int, default=3, help="Fresh databases per backend (the best is kept).")
    parser.add_argument("--sqlite-only", action="store_true", help="Leave out PostgreSQL.")
    args = parser.parse_args(argv)
    figures = {}
    with tempfile.TemporaryDirectory() as work:
        count = iter(range(1_000_000))
        figures["SQLite"] = measure(lambda: str(Path(work) / f"w{next(count)}.db"), args.results, args.repeats)
    if not args.sqlite_only:
        from tests.pg import Server, why_not
        reason = why_not()
        if reason:
            print(f"PostgreSQL left out: {reason}")
        else:
            server = Server().start()
            try:
                figures["PostgreSQL"] = measure(server.new_url, args.results, args.repeats)
            finally:
                server.stop()
    print(f"{args.results} results a pass, best of {args.repeats}")
    print(f"{'backend':<11} {'pass':<16} {'write/s':>9} {'us each':>8} {'+prepare/s':>11} {'us each':>8}")
    for backend, passes in figures.items():
        for name, (write, total) in passes.items():
            print(f"{backend:<11} {name:<16} {args.results / write:>9.0f} {write / args.results * 1e6:>8.0f} "
                  f"{args.results / total:>11.0f} {total / args.results * 1e6:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
