"""Does fetching transcripts slow the n8n part of a run? The same run with --no-transcripts and with
--transcripts, against the two local stand-ins; prints the n8n part's wall time and the requests per domain.

    .venv/bin/python -m scripts.bench_transcripts [--templates 200] [--workers 4] [--youtube-rate 0.2]

The n8n part's wall time is from the run's start to the last n8n job's end (jobs.finished_at). Requests,
429s and the busiest second are counted by the stand-ins themselves. Everything stays on 127.0.0.1.
"""

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts.standin import client


def one_run(args, transcripts, workdir):
    site = client.start(templates=args.templates, rate=args.rate, burst=args.burst, latency_ms=args.latency_ms)
    try:
        yt = client.start(youtube=True, rate=args.youtube_rate, burst=args.youtube_burst, latency_ms=args.latency_ms)
    except client.StandinError:
        site.stop()
        raise
    db = Path(workdir) / f"bench-{'on' if transcripts else 'off'}.db"
    env = dict(os.environ, SCRAPER_DB=str(db), SCRAPER_API_URL=site.api_url, SCRAPER_SITE_URL=site.url,
               SCRAPER_YOUTUBE_URL=yt.url)
    try:
        def scraper(*argv):
            done = subprocess.run([sys.executable, "-m", "scraper", "--log-level", "WARNING", *argv], env=env,
                                  capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"scraper {argv[0]} exited {done.returncode}: {done.stderr[-2000:]}")

        scraper("seed", "--from-search")
        started = time.perf_counter()
        scraper("run", "--workers", str(args.workers), "--rate", str(args.rate), "--burst", str(args.burst),
                "--transcripts" if transcripts else "--no-transcripts",
                "--domain-rate", f"youtube.com={args.youtube_rate:g}/{args.youtube_burst}")
        total_s = time.perf_counter() - started
        conn = sqlite3.connect(db)
        run_start = conn.execute("SELECT started_at FROM runs ORDER BY id DESC LIMIT 1").fetchone()[0]
        n8n_end, n8n_done = conn.execute(
            "SELECT MAX(finished_at), SUM(status = 'done') FROM jobs WHERE site = 'n8n'").fetchone()
        yt_done = conn.execute("SELECT COUNT(*) FROM transcripts").fetchone()[0]
        conn.close()
        return {"n8n_part_s": n8n_end - run_start, "run_s": total_s, "n8n_done": n8n_done, "transcripts": yt_done,
                "n8n": site.stats(), "youtube": yt.stats()}
    finally:
        site.stop()
        yt.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--templates", type=int, default=200)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rate", type=float, default=20.0, help="n8n stand-in limit and scraper rate")
    parser.add_argument("--burst", type=int, default=5)
    parser.add_argument("--youtube-rate", type=float, default=0.2, help="YouTube stand-in limit and scraper rate")
    parser.add_argument("--youtube-burst", type=int, default=2)
    parser.add_argument("--latency-ms", type=float, default=40.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        results = {mode: one_run(args, mode == "on", workdir) for mode in ("off", "on")}
    print(f"{args.templates} templates, {args.workers} workers, n8n {args.rate:g}/s burst {args.burst}, "
          f"youtube {args.youtube_rate:g}/s burst {args.youtube_burst}, latency {args.latency_ms:g} ms")
    print(f"{'transcripts':<12}{'n8n part s':>11}{'run s':>9}{'templates':>11}{'transcripts':>13}"
          f"{'n8n req':>9}{'429':>5}{'max/1s':>8}{'yt req':>8}{'429':>5}{'max/1s':>8}")
    for mode, r in results.items():
        n, y = r["n8n"], r["youtube"]
        print(f"{mode:<12}{r['n8n_part_s']:>11.2f}{r['run_s']:>9.2f}{r['n8n_done']:>11}{r['transcripts']:>13}"
              f"{n['requests']:>9}{n['http_429']:>5}{n['max_in_1s']:>8}{y['requests']:>8}{y['http_429']:>5}"
              f"{y['max_in_1s']:>8}")
    off, on = results["off"]["n8n_part_s"], results["on"]["n8n_part_s"]
    print(f"n8n part with transcripts on / off: {on / off:.3f}")


if __name__ == "__main__":
    main()
