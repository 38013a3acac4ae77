"""Benchmarks of the scraper: politeness efficiency, queue throughput, seeding, status, claims, export,
several domains at once, a site with ordinary faults and a struggling one (scripts/bench_faults.py).
(The CLI's start-up against sqlite-utils' is scripts/bench_startup.py.)

    .venv/bin/python -m scripts.bench [--quick] [--only efficiency,queue] [--workdir DIR] [--json PATH]

Every request goes to a local stand-in site on 127.0.0.1 (scripts/standin); nothing else is contacted.
Timers are time.perf_counter; memory is psutil (sampled) or /usr/bin/time -v (exact peak).
Exit code 1 when a figure misses its target.
"""

import argparse
import json
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import time

from scraper.base import settings as config
from scraper.db import jobcounts, store
from scraper.db.queue import Queue
from scraper.mirror import seed as seeding
from scraper.products import status
from scripts import bench_faults
from scripts.bench_publish import bench_warc
from scripts.benchkit import (
    Results,
    RssSampler,
    build_export_db,
    busy_window,
    chosen_sections,
    default_domains,
    domains_run,
    efficiency,
    env_for,
    fresh_db,
    label,
    run_sections,
    scraper_cmd,
    timed_peak,
)
from scripts.standin import client

# --- helpers -----------------------------------------------------------------------------------

def bulk_jobs(conn, rows):
    """Insert job tuples in one transaction: the fast path for building big test databases. The kept counts
    take them in (`jobcounts.catch_up`: a GROUP BY over the rows above the mark, as for another tool's rows)."""
    with store.transaction(conn) as c:
        c.executemany(
            """INSERT INTO jobs (key, site, url, domain, status, attempts, available_at, lease_until, worker,
                   error_kind, last_error, http_status, created_at, updated_at, started_at, finished_at,
                   duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""", rows)
        jobcounts.catch_up(c)
    # the build's WAL (its whole size) is checkpointed and emptied here, not by the first timed statement: with
    # journal_size_limit the first write after the reset truncates the file, one ~30 ms stall at 1M rows
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def pending_rows(n, now):
    for i in range(n):
        yield (f"n8n:{i}", "n8n", f"http://127.0.0.1:9/workflows/{i}", "127.0.0.1", "pending", 0, 0.0,
               None, None, None, None, None, now, now, None, None, None)


def small_row(job_id):
    return {"id": job_id, "name": f"w{job_id}", "node_count": 3, "quality_score": 1, "fetched_at": "2024-01-01"}


# --- 1. efficiency: how close a real run comes to the rate limit, and its memory --------------

def clean_run(work, name, site, templates, rate, burst):
    """One seeded `scraper run` (4 workers) against `site`, the stand-in reset after the seed: a dict of its
    efficiency over the whole command, wall s, stand-in stats, peak RSS, and the seconds from the command's
    start to the first request's arrival and from the last arrival to the command's exit (issue 45)."""
    db = work / f"{name}.db"
    fresh_db(db).close()
    env = env_for(db, site.url)
    subprocess.run(scraper_cmd("seed", "--from-search", "--rate", str(rate), "--burst", str(burst)),
                   env=env, check=True, capture_output=True)
    time.sleep(burst / rate)    # our limiter's bucket refills from the seed's requests, as the site's is reset
    site.reset()   # the seed's search requests must not count, bucket full
    t0, t0_epoch = time.perf_counter(), time.time()
    proc = subprocess.Popen(scraper_cmd("run", "--workers", "4", "--rate", str(rate), "--burst", str(burst)),
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sampler = RssSampler(proc.pid)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - t0
    sampler.stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise RuntimeError(f"scraper run exited {proc.returncode}: {err.decode()[-2000:]}")
    stats = site.stats()
    log = site.request_log()
    arrivals = sorted(log["t0_wall"] + t for series in log["by_kind"].values() for t in series)
    conn = store.connect(str(db))
    done = conn.execute("SELECT COUNT(*) FROM jobs WHERE status = 'done'").fetchone()[0]
    conn.close()
    assert done == templates, f"only {done} of {templates} jobs done"
    return {"eff": ((stats["requests"] - burst) / rate) / wall, "wall": wall, "stats": stats, "peak": sampler.peak,
            "first_s": arrivals[0] - t0_epoch, "exit_s": t0_epoch + wall - arrivals[-1]}


def bench_efficiency(work, quick, results):
    # --quick keeps 600 templates: fixed start/stop costs weigh on a shorter run, the target would not compare
    templates, runs, rate, burst = 600, 1 if quick else 3, 20, 5
    site = client.start(templates=templates, latency_ms=40, rate=rate, burst=burst)
    out = []
    try:
        for i in range(runs):
            r = clean_run(work, f"eff{i}", site, templates, rate, burst)
            out.append(r)
            st = r["stats"]
            results.note(f"efficiency run {i + 1}: {st['requests']} requests in {r['wall']:.2f} s -> {r['eff']:.4f}; "
                         f"429s {st['http_429']}, max in 1 s {st['max_in_1s']}, peak RSS {r['peak'] / 2**20:.0f} MB; "
                         f"first request +{r['first_s']:.2f} s, exit {r['exit_s']:.2f} s after the last")
    finally:
        site.stop()
    med = lambda key: statistics.median(r[key] for r in out)  # noqa: E731 - one line, four uses
    eff = med("eff")
    results.add("efficiency", eff, f"median of {runs}", ">= 0.985", eff >= 0.985)
    results.add("efficiency_wall", med("wall"), "s", "")
    r429 = sum(r["stats"]["http_429"] for r in out)
    max1s = max(r["stats"]["max_in_1s"] for r in out)
    results.add("efficiency_429", r429, "responses", "0", r429 == 0)
    results.add("efficiency_max_in_1s", max1s, "requests", f"<= {rate + burst}", max1s <= rate + burst)
    peak = max(r["peak"] for r in out) / 2**20
    results.add("run_peak_rss", peak, "MB (sum)", "<= 300", peak <= 300)
    results.add("run_to_first_request", med("first_s"), "s", "<= 0.5", med("first_s") <= 0.5)
    results.add("last_request_to_exit", med("exit_s"), "s", "<= 0.5", med("exit_s") <= 0.5)


def bench_n8n(work, quick, results):
    """n8n.io's own pace: 150 templates at its default 2/s with a burst of 5 (issue 45: >= 0.99 of the limit
    over the whole command; the first burst and every request's lateness used to cost 0.963)."""
    templates, rate, burst = 150, 2, 5
    site = client.start(templates=templates, latency_ms=40, rate=rate, burst=burst)
    try:
        r = clean_run(work, "n8n", site, templates, rate, burst)
    finally:
        site.stop()
    results.note(f"n8n 150 at 2/s burst 5: {r['wall']:.2f} s -> {r['eff']:.4f}, 429s {r['stats']['http_429']}, "
                 f"first request +{r['first_s']:.2f} s, exit {r['exit_s']:.2f} s after the last")
    results.add("n8n_150_at_2", r["eff"], "efficiency", ">= 0.99", r["eff"] >= 0.99)
    results.add("n8n_150_at_2_429", r["stats"]["http_429"], "responses", "0", r["stats"]["http_429"] == 0)


def _queue_child(path, index, barrier):
    conn = store.connect(path)
    queue, name = Queue(conn), f"bench{index}-{os.getpid()}"
    barrier.wait()
    while (job := queue.claim(name, time.time(), 60.0)) is not None:
        row = small_row(job.id)
        queue.complete(job, name, time.time(), 1, write=lambda c, row=row: store.upsert(c, "workflows", row, "id"))
    conn.close()


def bench_queue(work, quick, results):
    n = 5_000 if quick else 20_000
    ctx = multiprocessing.get_context("fork")
    for k in (1, 4):
        db = work / f"queue{k}.db"
        conn = fresh_db(db)
        Queue(conn).seed(seeding.job_rows(config.Settings(site_url="http://127.0.0.1:9"), range(n)))
        conn.close()
        barrier = ctx.Barrier(k + 1)
        procs = [ctx.Process(target=_queue_child, args=(str(db), i, barrier)) for i in range(k)]
        for p in procs:
            p.start()
        barrier.wait()          # every child has its connection open: time only the work
        t0 = time.perf_counter()
        for p in procs:
            p.join()
        wall = time.perf_counter() - t0
        conn = store.connect(str(db))
        got = (Queue(conn).counts()["done"], conn.execute("SELECT COUNT(*) FROM workflows").fetchone()[0])
        conn.close()
        assert got == (n, n), f"{got} of {n} jobs done/written"
        results.add(f"queue_k{k}", n / wall, "jobs/s", ">= 2,000", n / wall >= 2000)


# --- 3. seed: 1,000,000 new jobs, then the same again (all known) ----------------------------

def bench_seed(work, quick, results):
    n = 100_000 if quick else 1_000_000
    conn = fresh_db(work / "seed.db")
    s, queue = config.Settings(site_url="http://127.0.0.1:9"), Queue(conn)
    for kind in ("new", "known"):
        t0 = time.perf_counter()
        new, known = queue.seed(seeding.job_rows(s, range(1, n + 1)))
        wall = time.perf_counter() - t0
        assert (new, known) == ((n, 0) if kind == "new" else (0, n)), (new, known)
        # issue 31: a million new ids within 8 s
        target = kind == "new" and n == 1_000_000
        results.add(f"seed_{kind}_{label(n)}", wall, "s", "<= 8" if target else "", wall <= 8 if target else None)
        results.add(f"seed_{kind}_rate", n / wall, "rows/s", "")
    conn.close()


# --- 4. status on a big database ------------------------------------------------------------

def build_status_db(path, n, now):
    """A realistic mix: 60% done over the last hour, 30% pending, 5% failed, 4% invalid, 1% running."""
    rng = random.Random(7)
    kinds = ("http_5xx", "network", "timeout", "http_4xx", "parse")

    def rows():
        for i in range(n):
            u, fin, kind = rng.random(), now - rng.random() * 3600, kinds[i % len(kinds)]
            # status attempts | lease_until worker error_kind last_error http_status | updated started finished ms
            if u < 0.60:
                t = ("done", 1, None, None, None, None, 200, fin, fin - 1, fin, 300)
            elif u < 0.90:
                t = ("pending", 0, None, None, None, None, None, now - 7200, None, None, None)
            elif u < 0.95:
                t = ("failed", 3, None, None, kind, f"{kind} error", 503, fin, fin - 1, fin, 900)
            elif u < 0.99:
                t = ("invalid", 1, None, None, "http_4xx", "HTTP 404", 404, fin, fin - 1, fin, 80)
            else:
                t = ("running", 1, now + 60, f"w{i % 4}-1", None, None, None, now, now, None, None)
            yield (f"n8n:{i}", "n8n", f"http://127.0.0.1:9/workflows/{i}", "127.0.0.1", *t[:2], 0.0, *t[2:7],
                   now - 7200, *t[7:])

    conn = fresh_db(path)
    bulk_jobs(conn, rows())
    with store.transaction(conn) as c:
        c.executemany("INSERT INTO counters (name, value) VALUES (?, ?)",
                      [("error:" + k, n // 100) for k in kinds] + [("error:http_429", 0)])
        c.execute("INSERT INTO domains (domain, updated_at) VALUES ('127.0.0.1', ?)", (now,))
    return conn


def bench_status(work, quick, results):
    n = 100_000 if quick else 1_000_000
    path, now = work / "status.db", time.time()
    t0 = time.perf_counter()
    conn = build_status_db(path, n, now)
    results.note(f"status: built {n:,} jobs in {time.perf_counter() - t0:.1f} s")
    cmd_times, lib_times = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        out = subprocess.run(scraper_cmd("status", "--json"), env=env_for(path), check=True, capture_output=True)
        cmd_times.append(time.perf_counter() - t0)
        assert json.loads(out.stdout)["total"] == n
    for _ in range(5):
        t0 = time.perf_counter()
        status.report(Queue(conn), time.time())   # what `status` does between open and print
        lib_times.append(time.perf_counter() - t0)
    for what, times in (("cmd", cmd_times), ("lib", lib_times)):
        med = statistics.median(times)
        results.add(f"status_{what}_{label(n)}", med, "s (median of 5)", "<= 0.2", med <= 0.2)   # issue 31
    # Which index each query of the report reads (and the claim's, the hot path of every worker).
    queries = {
        "counts": ("SELECT site, source, domain, status, n FROM job_counts", ()),
        "above the mark": ("SELECT site, source, domain, status, COUNT(*) FROM jobs WHERE id > "
                           "(SELECT upto FROM job_counts_mark) GROUP BY site, source, domain, status", ()),
        "finished_since": ("SELECT COUNT(*) FROM jobs WHERE finished_at >= ?", (now - 60,)),
        "counters": ("SELECT name, value FROM counters", ()),
        "domains": ("SELECT * FROM domains ORDER BY domain", ()),
        "claim (queue.py)": ("SELECT id FROM jobs INDEXED BY jobs_claim WHERE status = 'pending' "
                             "AND available_at <= ? AND 1 ORDER BY priority DESC, available_at, id LIMIT 1", (now,)),
    }
    for name, (sql, args) in queries.items():
        plan = "; ".join(r["detail"] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, args))
        t0 = time.perf_counter()
        conn.execute(sql, args).fetchall()
        results.note(f"plan {name:16s} {(time.perf_counter() - t0) * 1000:7.1f} ms  {plan}")
    conn.close()


# --- 5. claim cost against the queue's size ---------------------------------------------------

def bench_claim_scale(work, quick, results):
    big = 100_000 if quick else 1_000_000
    calls, budget_s = 2_000, 15.0
    # plain: a claim without sources (as before issue 16); sources: a worker's claim across two priority
    # levels whose first (`events`) has nothing runnable, so every claim reads both levels
    for mode, levels in (("", None), ("sources_", [["events"], ["n8n"]])):
        per_claim = {}
        for pending in (1_000, big):
            conn = fresh_db(work / f"claim{mode}{pending}.db")
            # `calls` more rows than `pending`, so at least `pending` wait during the whole loop
            bulk_jobs(conn, pending_rows(pending + calls, time.time()))
            queue, claim_s, done = Queue(conn), 0.0, 0
            t_all = time.perf_counter()
            # a time budget keeps the whole bench bounded when claims are slow (then fewer calls are timed)
            while done < calls and time.perf_counter() - t_all < budget_s:
                t0 = time.perf_counter()
                job = queue.claim("bench", time.time(), 60.0, sources=levels)
                claim_s += time.perf_counter() - t0
                queue.complete(job, "bench", time.time(), 1)
                done += 1
            pair = (time.perf_counter() - t_all) / done * 1e6
            conn.close()
            (work / f"claim{mode}{pending}.db").unlink()
            per_claim[pending] = claim_s / done * 1e6
            results.add(f"claim_{mode}us_{label(pending)}", per_claim[pending], "us/claim", "")
            results.note(f"claim_scale {mode}{label(pending)} pending: {done} calls, "
                         f"claim {per_claim[pending]:.0f} us, claim+complete {pair:.0f} us")
        ratio = per_claim[big] / per_claim[1_000]
        results.add(f"claim_{mode}ratio", ratio, f"{label(big)} / 1k", "< 2", ratio < 2)


# --- 6. export: rows/s and memory that does not grow with the rows ---------------------------

def decided_rows(db):
    """(clean, with their redacted form saved): the bench's rows whose redaction was decided when stored."""
    from scraper.policy import redact
    conn = store.open_db(str(db))
    try:
        return conn.execute("SELECT SUM(clean_at_rules = ?), SUM(redacted IS NOT NULL) FROM workflows",
                            (redact.RULES_VERSION,)).fetchone()
    finally:
        conn.close()


def bench_export(work, quick, results):
    sizes, peaks = (200, 2_000) if quick else (1_000, 10_000), {}
    for n in sizes:
        db = work / f"export{n}.db"
        size = build_export_db(db, n)
        results.note(f"export: {n:,} rows, database {size / 2**20:.1f} MB")
        for fmt_name in ("jsonl", "csv"):
            out = work / f"export{n}.{fmt_name}"
            wall, peak = timed_peak(scraper_cmd("export", "--format", fmt_name, "--output", str(out)), env_for(db))
            peaks[(n, fmt_name)] = peak
            results.add(f"export_{fmt_name}_{label(n)}", n / wall, "rows/s", "")
            results.add(f"export_{fmt_name}_{label(n)}_rss", peak, "MB peak", "")
            out.unlink()
        # the default redacts credentials (about 1 ms a workflow); as stored, the rate before redaction existed
        out = work / f"export{n}.raw.jsonl"
        raw = scraper_cmd("export", "--format", "jsonl", "--no-redact", "--output", str(out))
        wall, _ = timed_peak(raw, env_for(db))
        results.add(f"export_jsonl_no_redact_{label(n)}", n / wall, "rows/s", "")
        out.unlink()
        # redaction at the speed of export (issue 19): the default within 1.5 times --no-redact; best of 3
        # of each, interleaved, so a busy machine weighs on both alike
        walls = {True: [], False: []}
        for _ in range(3):
            for redact in (True, False):
                cmd = scraper_cmd("export", "--format", "jsonl", *(() if redact else ("--no-redact",)),
                                  "--output", str(out))
                walls[redact].append(timed_peak(cmd, env_for(db))[0])
        best_redacted, best_raw = min(walls[True]), min(walls[False])
        mid_redacted, mid_raw = statistics.median(walls[True]), statistics.median(walls[False])
        results.note(f"export jsonl {label(n)}: redacted {n / best_redacted:,.0f} rows/s, --no-redact "
                     f"{n / best_raw:,.0f} rows/s (best of 3 each); medians {n / mid_redacted:,.0f} and "
                     f"{n / mid_raw:,.0f} rows/s, {mid_redacted / mid_raw:.2f}x; of {n:,} rows, %d stored clean and %d "
                     f"with their redacted form (store.upsert decides, as a run stores them)" % tuple(decided_rows(db)))
        results.add(f"export_redact_cost_{label(n)}", best_redacted / best_raw, "x --no-redact", "< 1.5",
                    best_redacted / best_raw < 1.5)
        out.unlink()
    for fmt_name in ("jsonl", "csv"):
        growth = peaks[(sizes[1], fmt_name)] / peaks[(sizes[0], fmt_name)]
        results.add(f"export_{fmt_name}_rss_growth", growth, f"{label(sizes[1])} / {label(sizes[0])} rows",
               "< 1.25", growth < 1.25)


# --- 7. domains: several domains at once, each against its own rate (issue 21) ---------------

def bench_domains(work, quick, results):
    # full: n8n 150 s of work at 2/s, YouTube about 200 s (15 videos) at 0.2/s, from its first child on, the
    # events calendar about 210 s at 0.5/s (about 105 plain event pages of 140 events)
    templates, every, events = (160, 10, 60) if quick else (300, 20, 140)
    figures = domains_run(work / "domains.db", default_domains(templates, every, events=events,
                                                               sources_path=work / "domains-sources.toml"),
                          workers=4)
    start, end = busy_window(figures)
    results.note(f"domains: {templates} templates, one in {every} with its own video, {events} events, 4 workers; "
                 f"every domain had work for {end - start:.0f} s")
    for name, f in figures.items():
        eff = efficiency(f["times"], f["rate"], f["burst"], start, end)
        results.note(f"domains {name}: {f['requests']} requests at {f['rate']:g}/s, efficiency over its own span "
                     f"{efficiency(f['times'], f['rate'], f['burst']):.3f}, 429s {f['http_429']}, "
                     f"most jobs in flight at once {f['max_in_flight']}")
        least = 0.975 if name == "n8n" else 0.95     # n8n at its default rates: issue 31
        results.add(f"domains_{name}_efficiency", eff if eff is not None else "none", f"of {f['rate']:g}/s, all busy",
                    f">= {least:g}", eff is not None and eff >= least)
        results.add(f"domains_{name}_429", f["http_429"], "responses", "0", f["http_429"] == 0)


SECTIONS = {"efficiency": bench_efficiency, "n8n": bench_n8n, "queue": bench_queue, "seed": bench_seed,
            "status": bench_status,
            "claim_scale": bench_claim_scale, "export": bench_export, "domains": bench_domains, "warc": bench_warc,
            **bench_faults.SECTIONS}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one efficiency run instead of three")
    parser.add_argument("--only", help=f"comma-separated sections: {','.join(SECTIONS)}")
    parser.add_argument("--workdir", help="keep the databases here (default: a temporary folder, deleted)")
    parser.add_argument("--json", dest="json_path", help="also write the results as JSON to this file")
    args = parser.parse_args(argv)
    chosen = chosen_sections(parser, SECTIONS, args.only)
    results = Results()
    failed = run_sections(SECTIONS, chosen, results, args.workdir, args.quick)
    if args.json_path:
        results.write_json(args.json_path, quick=args.quick)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
