"""PostgreSQL against SQLite: claims plus completions per second with 1, 4 and 8 processes, and the
efficiency of two `scraper run` groups (two machines, two time zones) on one PostgreSQL database against
the stand-in.

    .venv/bin/python -m scripts.bench_postgres [--seconds 3] [--templates 300] [--rate 20]

PostgreSQL is a throw-away server started like the tests' (tests/pg.py: Debian's package, an unprivileged
user, 127.0.0.1 only, fsync off); nothing else is contacted.
"""

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

from scraper.db import events, store
from scraper.db.queue import Queue
from scripts.standin import client
from tests.pg import Server, why_not

LEASE_S = 60.0
JOBS = 200_000


def _worker(path, index, seconds, out, with_event):
    conn = store.connect(path)
    q, done = Queue(conn), 0
    clock = store.clock if store.is_postgres(conn) else (lambda c: time.time())
    name = f"bench-{index}-{os.getpid()}"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = clock(conn)
        job = q.claim(name, now, LEASE_S)
        if job is None:
            break
        q.complete(job, name, now, 1, write=lambda c, i=job.id: _result(c, i, with_event))
        done += 1
    conn.close()
    out.put(done)


def _result(c, i, with_event):
    """A job's result row, and with `with_event` the outbox event a new template version writes with it."""
    c.execute("INSERT INTO counters (name, value) VALUES (?, 1) ON CONFLICT (name) DO NOTHING", (f"bench:{i}",))
    if with_event:
        events.append(c, "template.updated", "n8n", str(i), {"id": i, "version": 2, "content_hash": "0" * 64},
                      "2026-11-27T00:00:00+00:00")


def claims_per_s(path, processes, seconds, with_event=False):
    conn = store.open_db(path)
    Queue(conn).seed(((f"b:{i}", "n8n", f"https://example.org/{i}", "example.org") for i in range(JOBS)), now=0)
    conn.close()
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(path, i, seconds, out, with_event)) for i in range(processes)]
    started = time.perf_counter()
    for p in procs:
        p.start()
    total = sum(out.get() for _ in procs)
    for p in procs:
        p.join()
    return total / (time.perf_counter() - started)


def two_groups(server, templates, rate, burst=5):
    """(seconds, efficiency = achieved rate / --rate, 429s, max in 1 s, s to the first request, s from the
    last request to the last group's exit) of two 3-worker groups."""
    url = server.new_url()
    site = client.start(templates=templates, rate=rate, burst=burst, latency_ms=20)
    env = {**os.environ, "SCRAPER_API_URL": site.api_url, "SCRAPER_SITE_URL": site.url, "SCRAPER_DB": url,
           "SCRAPER_TRANSCRIPTS": "0"}
    try:
        subprocess.run([sys.executable, "-m", "scraper", "seed", "--from-search", "--rate", str(rate)], env=env,
                       check=True, capture_output=True)
        before = site.stats()["requests"]
        started, started_epoch = time.perf_counter(), time.time()
        groups = [subprocess.Popen([sys.executable, "-m", "scraper", "run", "--workers", "3", "--rate", str(rate),
                                    "--burst", str(burst)], env={**env, "TZ": tz}, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL) for tz in ("UTC", "Asia/Macau")]
        for g in groups:
            g.wait(600)
        elapsed = time.perf_counter() - started
        stats, log = site.stats(), site.request_log()
        arrivals = sorted(t for series in log["by_kind"].values() for t in series
                          if t + log["t0_wall"] >= started_epoch)
        sent = stats["requests"] - before
        first, last = log["t0_wall"] + arrivals[0], log["t0_wall"] + arrivals[-1]
        return (elapsed, sent / elapsed / rate, stats["http_429"], stats["max_in_1s"], first - started_epoch,
                started_epoch + elapsed - last)
    finally:
        site.stop()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="Length of each claims measurement.")
    parser.add_argument("--templates", type=int, default=300, help="Stand-in templates for the two-group run.")
    parser.add_argument("--rate", type=float, default=20.0, help="--rate of the two-group run (and the site's).")
    parser.add_argument("--claims-only", action="store_true", help="Leave out the two-group run.")
    args = parser.parse_args(argv)
    reason = why_not()
    if reason:
        print(f"PostgreSQL bench skipped: {reason}")
        return 0
    server = Server().start()
    try:
        print("claims + completions per second (one claim, one result row and its done per job; + event: and one "
              "outbox event, as a new version writes)")
        print(f"{'processes':>10} {'SQLite':>10} {'+ event':>10} {'PostgreSQL':>12} {'+ event':>10}")
        for n in (1, 4, 8):
            with tempfile.TemporaryDirectory() as work:
                lite = claims_per_s(os.path.join(work, "jobs.db"), n, args.seconds)
            with tempfile.TemporaryDirectory() as work:
                lite_ev = claims_per_s(os.path.join(work, "jobs.db"), n, args.seconds, with_event=True)
            pg = claims_per_s(server.new_url(), n, args.seconds)
            pg_ev = claims_per_s(server.new_url(), n, args.seconds, with_event=True)
            print(f"{n:>10} {lite:>10.0f} {lite_ev:>10.0f} {pg:>12.0f} {pg_ev:>10.0f}")
        if args.claims_only:
            return 0
        elapsed, efficiency, http_429, max_1s, first_s, exit_s = two_groups(server, args.templates, args.rate)
        print(f"two run groups (UTC, Asia/Macau; 3 workers each) on one PostgreSQL database, {args.templates} "
              f"templates at --rate {args.rate:g} --burst 5: {elapsed:.1f} s, efficiency {efficiency:.0%} of the "
              f"rate, {http_429} 429s, at most {max_1s} requests in one second; the first request +{first_s:.2f} s "
              f"after the start, the exit +{exit_s:.2f} s after the last")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
