"""`make demo`: start the local stand-ins (n8n and YouTube), scrape them end to end, print `scraper status`.

The templates carry YouTube videos; their transcripts come from the YouTube stand-in, which blocks this
address for a few seconds mid-run (--block-s) to show the breaker at work. Everything stays on 127.0.0.1;
the database is the --db file (removed first, so the demo starts clean).
"""

import argparse
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--templates", type=int, default=250)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rate", type=float, default=20.0, help="the stand-in's limit and the scraper's rate")
    parser.add_argument("--burst", type=int, default=5)
    parser.add_argument("--faults", default="503:0.02,500x2:0.01,reset:0.01,404:0.01")
    parser.add_argument("--youtube-rate", type=float, default=2.0, help="YouTube's limit and the scraper's rate")
    parser.add_argument("--youtube-burst", type=int, default=2)
    parser.add_argument("--block-s", type=float, default=3.0, help="YouTube's blocked phase (after 9 requests)")
    parser.add_argument("--db", default="demo.db")
    args = parser.parse_args()

    for suffix in ("", "-wal", "-shm", "-limiter", "-limiter-wal", "-limiter-shm", "-limiter.lock", "-run.lock"):
        Path(args.db + suffix).unlink(missing_ok=True)
    site = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "standin_site.py"), "--templates", str(args.templates),
         "--rate", str(args.rate), "--burst", str(args.burst), "--latency-ms", "40", "--faults", args.faults],
        stdout=subprocess.PIPE, text=True)
    youtube = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "standin_youtube.py"), "--rate", str(args.youtube_rate),
         "--burst", str(args.youtube_burst), "--latency-ms", "40", "--block-after", "9", "--block-s",
         str(args.block_s)], stdout=subprocess.PIPE, text=True)
    try:
        line = site.stdout.readline()
        if "listening on" not in line:
            sys.exit(f"the stand-in site did not start: {line.strip()!r}")
        url = line.split()[-1]
        line = youtube.stdout.readline()
        if "listening on" not in line:
            sys.exit(f"the YouTube stand-in did not start: {line.strip()!r}")
        yt_url = line.split()[-1]
        print(f"stand-in site at {url} ({args.templates} templates, {args.rate:g} requests/s, burst {args.burst})")
        print(f"YouTube stand-in at {yt_url} ({args.youtube_rate:g} requests/s, burst {args.youtube_burst}, "
              f"blocked for {args.block_s:g} s after 9 requests)")
        env = dict(os.environ, SCRAPER_DB=args.db, SCRAPER_API_URL=url + "/api", SCRAPER_SITE_URL=url,
                   SCRAPER_YOUTUBE_URL=yt_url)

        def scraper(*argv):
            print("$ scraper " + " ".join(argv), flush=True)
            return subprocess.run([sys.executable, "-m", "scraper", *argv], env=env).returncode

        if scraper("seed", "--from-search") != 0:
            sys.exit("seeding failed")
        code = scraper("run", "--workers", str(args.workers), "--rate", str(args.rate), "--burst", str(args.burst),
                       "--backoff-base", "0.5", "--transcripts",
                       "--domain-rate", f"youtube.com={args.youtube_rate:g}/{args.youtube_burst}", "--breaker-open", "2")
        scraper("status")
        stats = json.loads(urllib.request.urlopen(url + "/_standin/stats", timeout=5).read())
        print(f"the site saw {stats['requests']} requests, {stats['http_429']} answered 429, "
              f"at most {stats['max_in_1s']} in any second")
        stats = json.loads(urllib.request.urlopen(yt_url + "/_standin/stats", timeout=5).read())
        print(f"YouTube saw {stats['requests']} requests, {stats['http_429']} answered 429, "
              f"{stats['blocked']} blocked, at most {stats['max_in_1s']} in any second")
        print(f"`scraper run` exited {code}; the results are in {args.db} (tables workflows, transcripts)")
    finally:
        for proc in (site, youtube):
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
