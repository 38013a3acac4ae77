"""Measure the mirror: a daily run at 1 % churn against a full re-crawl, and database growth per version.

    .venv/bin/python -m scripts.bench_mirror [--templates 2000] [--rate 50] [--workers 4]

Everything runs against the local stand-in (scripts/standin) on 127.0.0.1, started here.
Steps: a first full crawl; then 1 % of the library changes (0.4 % new, 0.3 % visibly edited, 0.1 % edited
only in the workflow JSON, 0.2 % removed) and every view count moves; the daily line (seed --from-search,
retry --failed, run) is timed and its requests counted by the stand-in; then a full re-crawl
(refresh --older-than 0, run) for comparison. Growth per version: the database's size (page_count x
page_size) before and after 10 % of the templates get a new version, divided by the new versions, and
the mean compressed answer. Wall times scale with --rate; the projection to the real library uses the
request counts at n8n.io's 2 requests/s.
"""

import argparse
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts.benchkit import env_for
from scripts.standin import client

REAL_LIBRARY = 13_000
REAL_RATE = 2.0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--templates", type=int, default=2000)
    p.add_argument("--rate", type=float, default=50.0)
    p.add_argument("--workers", type=int, default=4)
    args = p.parse_args()
    fast = ["--rate", str(args.rate), "--burst", "5"]
    site = client.start(templates=args.templates, rate=args.rate * 1.2, burst=6)
    url = site.url
    work = Path(tempfile.mkdtemp(prefix="bench-mirror-"))
    db = work / "jobs.db"
    env = env_for(db, url)

    def scraper(*a):
        subprocess.run([sys.executable, "-m", "scraper", "--log-level", "WARNING", *a], env=env, check=False,
                       capture_output=True)

    def measured(*commands):
        site.reset()
        t = time.perf_counter()
        for c in commands:
            scraper(*c)
        stats = site.stats()
        return stats["requests"], time.perf_counter() - t, stats["by_kind"]["search"]

    def db_bytes():
        conn = sqlite3.connect(db)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
        finally:
            conn.close()

    def count_versions():
        conn = sqlite3.connect(db)
        try:
            return conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
        finally:
            conn.close()

    run = ("run", "--workers", str(args.workers), *fast)
    daily = [("seed", "--from-search", *fast), ("retry", "--failed"), run]
    try:
        first = measured(*daily)
        ids = site.corpus()["ids"]
        n = len(ids)

        def share(pct):
            return max(1, round(n * pct / 100))

        edited, removed = ids[:share(0.3)], ids[-share(0.2):]
        wf_only = ids[len(edited):len(edited) + share(0.1)]
        added = site.library(add=share(0.4), edit=edited, edit_workflow=wf_only, remove=removed, views=1)["added"]
        day = measured(*daily)
        recrawl = measured(("refresh", "--older-than", "0"), run)

        before = db_bytes()
        versions_before = count_versions()
        tenth = ids[: n // 10]
        site.library(edit_workflow=tenth)
        measured(("refresh", "--older-than", "0"), run)
        versions_added = count_versions() - versions_before
        conn = sqlite3.connect(db)
        mean_blob, mean_raw = conn.execute("SELECT AVG(LENGTH(body)), AVG(size) FROM answers").fetchone()
        conn.close()
        growth = (db_bytes() - before) / max(1, versions_added)
    finally:
        site.stop()

    pages = day[2]
    churn = len(added) + len(edited) + len(wf_only) + len(removed)
    print(f"library {n} templates ({pages} listing pages after the change), rate {args.rate:g}/s, "
          f"{args.workers} workers")
    print(f"first crawl                  {first[0]:6d} requests  {first[1]:7.1f} s")
    print(f"daily line at 1 % churn      {day[0]:6d} requests  {day[1]:7.1f} s   "
          f"({churn} changed: {len(added)} new, {len(edited)} edited, {len(wf_only)} workflow-only, "
          f"{len(removed)} removed; bound pages + new + edited + removed = "
          f"{pages + len(added) + len(edited) + len(removed)})")
    print(f"full re-crawl                {recrawl[0]:6d} requests  {recrawl[1]:7.1f} s")
    print(f"growth per new version       {growth / 1024:6.1f} KiB (database file; {versions_added} versions)")
    print(f"stored answer                {mean_blob / 1024:6.1f} KiB compressed, {mean_raw / 1024:.1f} KiB raw "
          f"({mean_raw / mean_blob:.1f}x)")
    real_pages = REAL_LIBRARY // 100
    real_daily = real_pages + REAL_LIBRARY * 0.009     # new + edited + removed; workflow-only edits wait for refresh
    print(f"projected at n8n.io ({REAL_LIBRARY} templates, {REAL_RATE:g} req/s): daily line ~{real_daily:.0f} "
          f"requests ~{real_daily / REAL_RATE / 60:.0f} min; full re-crawl ~{REAL_LIBRARY + real_pages} requests "
          f"~{(REAL_LIBRARY + real_pages) / REAL_RATE / 3600:.1f} h")


if __name__ == "__main__":
    main()
