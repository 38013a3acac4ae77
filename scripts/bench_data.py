"""Benchmarks of the data commands (issue 10): search latency against the CLI's start-up, Parquet export
rate and peak memory, the cost of redaction, the request log's cost per request, the report's size.

    .venv/bin/python -m scripts.bench_data [--quick] [--only search,parquet] [--workdir DIR]

Everything is local (SQLite files built from the stand-in's real answers); nothing is contacted. Timers are
time.perf_counter; peak memory is /usr/bin/time -v (else psutil sampling), as in scripts/bench.py. It
prints figures; the only targets are the issue's: a query well under the CLI's start-up time, and export
memory that does not grow with the row count.
"""

import argparse
import json
import random
import statistics
import subprocess
import sys
import time

from scraper.base.errors import OperationalError
from scraper.db import requestlog, store
from scraper.products import report, search
from scripts.benchkit import (
    Results,
    build_export_db,
    chosen_sections,
    env_for,
    fresh_db,
    label,
    median_s,
    run_sections,
    scraper_cmd,
    timed_peak,
)

QUERIES = ("slack", "google sheets", "node_types:telegram", "openai OR anthropic", "agent*", '"send an email"',
           "invoice NOT gmail", "zebracorn")


def bench_search(work, quick, results):
    n = 2_000 if quick else 13_000
    db = work / f"search{n}.db"
    t0 = time.perf_counter()
    size = build_export_db(db, n)          # through store.upsert: the FTS triggers index every row
    results.note(f"search: {n:,} templates stored and indexed in {time.perf_counter() - t0:.1f} s, database "
         f"{size / 2**20:.0f} MB")
    conn = store.connect(str(db))
    index_kb = sum(r[0] for r in conn.execute(
        "SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'workflows_fts%'")) / 1024 if _has_dbstat(conn) else None
    per_query = {}
    for q in QUERIES:
        hits = conn.execute("SELECT COUNT(*) FROM workflows_fts WHERE workflows_fts MATCH ?", (q,)).fetchone()[0]
        per_query[q] = (median_s(lambda q=q: search.query(conn, q, 20), 15), hits)
    conn.close()
    for q, (s, hits) in per_query.items():
        results.note(f"search {q!r}: {s * 1000:.2f} ms for the top 20 of {hits:,} matches")
    worst = max(s for s, _ in per_query.values())
    typical = statistics.median(s for s, _ in per_query.values())
    env = env_for(db)
    startup = median_s(lambda: subprocess.run(scraper_cmd("--help"), env=env, check=True, capture_output=True), 5)
    whole = median_s(lambda: subprocess.run(scraper_cmd("search", "slack"), env=env, check=True,
                                            capture_output=True), 5)
    results.add(f"search_query_median_{label(n)}", typical * 1000, "ms (in-process, top 20)", "")
    results.add(f"search_query_worst_{label(n)}", worst * 1000, "ms", "")
    results.add("cli_startup", startup * 1000, "ms (scraper --help)", "")
    results.add(f"search_cli_{label(n)}", whole * 1000, "ms (scraper search slack, whole process)", "")
    results.add("search_worst_vs_startup", worst / startup, "query / start-up", "< 0.25", worst / startup < 0.25)
    if index_kb is not None:
        results.add(f"search_index_{label(n)}", index_kb / 1024, "MB (workflows_fts*)", "")
    return db


def _has_dbstat(conn):
    try:
        conn.execute("SELECT 1 FROM dbstat LIMIT 1")
        return True
    except OperationalError:     # SQLite built without the dbstat table
        return False


def bench_parquet(work, quick, results):
    sizes, peaks = (500, 2_000) if quick else (1_000, 10_000), {}
    for n in sizes:
        db = work / f"parquet{n}.db"
        build_export_db(db, n)
        runs = [("parquet", ()), ("jsonl", ()), ("jsonl", ("--no-redact",))]
        for fmt, more in runs:
            out = work / f"out{n}.{fmt}"
            wall, peak = timed_peak(scraper_cmd("export", "--format", fmt, "--output", str(out), *more), env_for(db))
            name = f"export_{fmt}{'_raw' if more else ''}_{label(n)}"
            results.add(name, n / wall, "rows/s", "")
            results.add(name + "_rss", peak, "MB peak", "")
            peaks[(n, fmt, more)] = peak
            if fmt == "parquet":
                results.note(f"parquet {n:,} rows: {out.stat().st_size / 2**20:.1f} MB on disk, "
                     f"database {db.stat().st_size / 2**20:.0f} MB")
            out.unlink()
    growth = peaks[(sizes[1], "parquet", ())] / peaks[(sizes[0], "parquet", ())]
    results.add("export_parquet_rss_growth", growth, f"{label(sizes[1])} / {label(sizes[0])} rows", "< 1.25",
           growth < 1.25)


def bench_request_log(work, quick, results):
    """What one request log row costs a worker: an autocommit INSERT into a WAL database."""
    n = 2_000 if quick else 10_000
    db = work / "reqlog.db"
    conn = fresh_db(db)
    t0 = time.perf_counter()
    for i in range(n):
        requestlog.record(conn, 1_700_000_000 + i / 2, "n8n.io", "ok", None, 120)
    per = (time.perf_counter() - t0) / n
    conn.close()
    results.add("request_log_insert", per * 1e6, "µs per request", "")
    # at the default 2 requests/s a worker pool sends one request every 500 ms
    results.add("request_log_share_at_2_per_s", per / 0.5 * 100, "% of the time between requests", "< 1",
           per / 0.5 * 100 < 1)


def bench_report(work, quick, results):
    """The report of a whole-library run: 13,000 templates stored, one run of 13,500 requests at 2/s."""
    n = 2_000 if quick else 13_000
    db = work / f"report{n}.db"
    build_export_db(db, n)
    conn = store.connect(str(db))
    rng = random.Random(7)
    start = 1_700_000_000.0
    kinds = ["ok"] * 96 + ["http_5xx"] * 2 + ["timeout", "http_4xx"]
    with store.transaction(conn) as c:
        c.executemany("INSERT INTO requests (at, domain, kind, status, ms) VALUES (?, 'n8n.io', ?, ?, ?)",
                      [(start + i / 2, k, None if k == "ok" else 503, int(rng.lognormvariate(5, 0.6)))
                       for i, k in ((i, rng.choice(kinds)) for i in range(n + n // 25))])
        c.executemany("""INSERT INTO jobs (key, site, url, domain, status, created_at, updated_at, started_at,
                         finished_at) VALUES (?, 'n8n', '', 'n8n.io', 'done', ?, ?, ?, ?)""",
                      [(f"n8n:{i}", start, start, start + i / 1.9, start + i / 1.9 + 0.2) for i in range(1, n + 1)])
        c.execute("""INSERT INTO runs (pid, started_at, finished_at, workers, settings, done, failed, invalid,
                     exit_code) VALUES (1, ?, ?, 4, ?, ?, 0, 0, 0)""",
                  (start, start + n / 1.9 + 1, json.dumps({"rate_per_s": 2.0, "burst": 5, "limiter": True}), n))
    t0 = time.perf_counter()
    size = report.write(conn, str(work / "report.html"), time.time())
    wall = time.perf_counter() - t0
    conn.close()
    results.add(f"report_size_{label(n)}", size / 1024, "KB (one self-contained HTML file)", "")
    results.add(f"report_time_{label(n)}", wall, "s", "")


SECTIONS = {"search": bench_search, "parquet": bench_parquet, "request_log": bench_request_log,
            "report": bench_report}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--only", help=f"comma-separated sections: {','.join(SECTIONS)}")
    parser.add_argument("--workdir", help="keep the databases here (default: a temporary folder, deleted)")
    args = parser.parse_args(argv)
    chosen = chosen_sections(parser, SECTIONS, args.only)
    return 1 if run_sections(SECTIONS, chosen, Results(), args.workdir, args.quick) else 0


if __name__ == "__main__":
    sys.exit(main())
