"""How fast `scraper serve`'s dashboard answers on a big database: 100,000 templates (jobs, `workflows` rows
and their changes over a year) and 1,000 runs (their `run_jobs`, `run_sources` and request log), a walk a
day. Times each of the dashboard's queries and the two pages through Datasette's in-process client (no
port), and prints the figures (median of 5; the target: every one under a second).

    .venv/bin/python -m scripts.bench_dashboard [--templates 100000] [--runs 1000] [--workdir DIR]

Nothing is contacted: the database is built in place, as scripts/bench.py builds status's.
"""

import argparse
import asyncio
import datetime
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from scraper.base import settings as config
from scraper.db import dashboard, requestlog, store
from scraper.products import browse, sources, status
from scripts.bench import build_status_db
from scripts.benchkit import median_s

DAY_S = 86_400
TARGET_S = 1.0


def _iso(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(timespec="seconds")


def build(path, n, runs, now):
    """The jobs of `bench.build_status_db` (60 % done), a `workflows` row and an `added` change for each done
    template over the last year, a `changed` for one in ten and a `removed` for one in fifty; `runs` runs
    over the year, each finished with its `run_sources`, the done jobs shared out among them in `run_jobs`,
    50 requests a run; a walk a day."""
    rng = random.Random(11)
    conn = build_status_db(path, n, now)
    year = now - 365 * DAY_S
    done = [r[0] for r in conn.execute("SELECT id FROM jobs WHERE status = 'done' ORDER BY id")]
    starts = sorted(year + rng.random() * 365 * DAY_S for _ in range(runs))
    with store.transaction(conn) as c:
        c.executemany("INSERT INTO workflows (id, name, first_seen_at, version) VALUES (?, ?, ?, 1)",
                      ((i, f"template {i}", _iso(year + i * 365 * DAY_S / n)) for i in range(1, n + 1)))
        changes = []
        for i in range(1, n + 1):
            at = year + i * 365 * DAY_S / n
            changes.append((i, "added", _iso(at), str(i)))
            if i % 10 == 0:
                changes.append((i, "changed", _iso(at + DAY_S), str(i)))
            if i % 50 == 0:
                changes.append((i, "removed", _iso(at + 2 * DAY_S), str(i)))
        c.executemany("INSERT INTO changes (template_id, change, at, version, source, key) "
                      "VALUES (?, ?, ?, 1, 'n8n', ?)", changes)
        per = max(1, len(done) // runs)
        for k, start in enumerate(starts, 1):
            end = start + 600
            c.execute("INSERT INTO runs (id, pid, started_at, finished_at, workers, done, failed, invalid, exit_code, "
                      "heartbeat_at, sources) VALUES (?, 1, ?, ?, 4, 0, 0, 0, 0, ?, '[\"n8n\"]')", (k, start, end, end))
            mine = done[(k - 1) * per:k * per]
            c.executemany("INSERT INTO run_jobs (run_id, job_id, status, at) VALUES (?, ?, 'done', ?)",
                          ((k, j, start + 1) for j in mine))
            c.execute("INSERT INTO run_sources (run_id, source, total, finished, failed, invalid) "
                      "VALUES (?, 'n8n', ?, ?, 0, 0)", (k, len(mine), len(mine)))
            c.executemany("INSERT INTO requests (at, domain, kind, status, ms, run_id) VALUES (?, '127.0.0.1', 'ok', "
                          "200, 100, ?)", ((start + j, k) for j in range(50)))
        c.executemany("INSERT INTO source_walks (source, started_at, finished_at, complete) VALUES ('n8n', ?, ?, 1)",
                      ((_iso(year + d * DAY_S), _iso(year + d * DAY_S + 60)) for d in range(365)))
    conn.execute("ANALYZE")
    return conn


def pages(path, s, urls):
    """{url: (status, median seconds)} through Datasette's in-process client."""
    async def run():
        ds = browse.app(path, s)
        await ds.invoke_startup()
        out = {}
        for url in urls:
            took, code = [], None
            for _ in range(5):
                t0 = time.perf_counter()
                code = (await ds.client.get(url)).status_code
                took.append(time.perf_counter() - t0)
            out[url] = (code, statistics.median(took))
        return out
    return asyncio.run(run())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--templates", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=1_000)
    ap.add_argument("--workdir", type=Path)
    a = ap.parse_args(argv)
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-dashboard-"))
    work.mkdir(parents=True, exist_ok=True)
    path, now = work / "jobs.db", time.time()
    t0 = time.perf_counter()
    conn = build(path, a.templates, a.runs, now)
    print(f"built {a.templates:,} jobs and templates, {a.runs:,} runs in {time.perf_counter() - t0:.1f} s: {path}")
    s = config.build(db_path=str(path))
    since = _iso(now - 90 * DAY_S)[:10]
    figures = {
        "status.of_database (status --json)": lambda: status.of_database(conn, now, s),
        "requestlog.sent_since (rate per domain)": lambda: requestlog.sent_since(conn, now - 60),
        "dashboard.runs": lambda: dashboard.runs(conn),
        "dashboard.runs source+range": lambda: dashboard.runs(conn, "n8n", since, ""),
        "dashboard.changes": lambda: dashboard.changes(conn),
        "dashboard.changes source+range": lambda: dashboard.changes(conn, "n8n", since, ""),
        "dashboard.catalogue": lambda: dashboard.catalogue(conn),
        "sources.report (freshness)": lambda: sources.report(conn, s, now),
    }
    slow = []
    for name, fn in figures.items():
        took = median_s(fn)
        slow += [name] if took >= TARGET_S else []
        print(f"{name:44s} {took * 1000:8.1f} ms")
    conn.close()
    db = browse.db_name(path)
    urls = ["/dashboard", "/dashboard.json", f"/dashboard.json?source=n8n&since={since}",
            *(f"/{db}/{name}.json?source=&since=&until=" for name in dashboard.QUERIES)]
    for url, (code, took) in pages(path, s, urls).items():
        slow += [url] if took >= TARGET_S or code != 200 else []
        print(f"GET {url:60s} {code} {took * 1000:8.1f} ms")
    print("every figure under a second" if not slow else f"over a second or failing: {', '.join(slow)}")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
