"""`make demo`: start the local stand-ins (n8n and YouTube), scrape them end to end, print `scraper status`
and the commands that explore the result.

The templates carry YouTube videos; their transcripts come from the YouTube stand-in, which blocks this
address for a few seconds mid-run (--block-s) to show the breaker at work. Everything stays on 127.0.0.1;
the database is the --db file (removed first, so the demo starts clean).
"""

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from scraper.base import settings
from scripts.standin import client


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

    for name in settings.build(db_path=args.db).db_files:
        Path(name).unlink(missing_ok=True)
    try:
        site = client.start(templates=args.templates, rate=args.rate, burst=args.burst, latency_ms=40,
                            faults=args.faults)
    except client.StandinError as e:
        sys.exit(f"the stand-in site did not start: {e}")
    try:
        youtube = client.start(youtube=True, rate=args.youtube_rate, burst=args.youtube_burst, latency_ms=40,
                               block_after=9, block_s=args.block_s)
    except client.StandinError as e:
        site.stop()
        sys.exit(f"the YouTube stand-in did not start: {e}")
    with site, youtube:
        print(f"stand-in site at {site.url} ({args.templates} templates, {args.rate:g} requests/s, "
              f"burst {args.burst})")
        print(f"YouTube stand-in at {youtube.url} ({args.youtube_rate:g} requests/s, burst {args.youtube_burst}, "
              f"blocked for {args.block_s:g} s after 9 requests)")
        env = dict(os.environ, SCRAPER_DB=args.db, SCRAPER_API_URL=site.api_url, SCRAPER_SITE_URL=site.url,
                   SCRAPER_YOUTUBE_URL=youtube.url)

        def scraper(*argv):
            # the command as it really runs: its database and URLs, copyable into a shell
            urls = " ".join(f"{k}={shlex.quote(env[k])}" for k in ("SCRAPER_DB", "SCRAPER_API_URL", "SCRAPER_SITE_URL",
                                                                    "SCRAPER_YOUTUBE_URL"))
            print(f"$ {urls} scraper " + " ".join(shlex.quote(a) for a in argv), flush=True)
            return subprocess.run([sys.executable, "-m", "scraper", *argv], env=env).returncode

        if scraper("seed", "--from-search") != 0:
            sys.exit("seeding failed")
        code = scraper("run", "--workers", str(args.workers), "--rate", str(args.rate), "--burst", str(args.burst),
                       "--backoff-base", "0.5", "--transcripts", "--breaker-open", "2",
                       # the YouTube stand-in serves YouTube's robots.txt, which disallows the transcript
                       # endpoints: the demo ignores it knowingly, as an operator who wants them must
                       "--robots-ignore", "youtube.com",
                       "--domain-rate", f"youtube.com={args.youtube_rate:g}/{args.youtube_burst}")
        scraper("status")
        stats = site.stats()
        print(f"the site saw {stats['requests']} requests, {stats['http_429']} answered 429, "
              f"at most {stats['max_in_1s']} in any second")
        stats = youtube.stats()
        print(f"YouTube saw {stats['requests']} requests, {stats['http_429']} answered 429, "
              f"{stats['blocked']} blocked, at most {stats['max_in_1s']} in any second")
        print(f"`scraper run` exited {code}; the results are in {args.db} (tables workflows, transcripts)")
        print(explore(args.db))


# the README's commands for a mirror, on the demo's database (they read jobs.db unless told another)
EXPLORE = (("status",), ("search", "telegram openai"), ("stats",), ("changes",),
           ("export", "--format", "jsonl", "--output", "demo.jsonl"), ("report", "--output", "demo.html"))


def explore(db):
    """What to type next: the README's commands, pointed at the demo's database."""
    lines = [f"explore it (every command reads {settings.DB_PATH} unless given --db or SCRAPER_DB):"]
    head = f"  .venv/bin/scraper --db {shlex.quote(str(db))} "
    lines += [head + " ".join(map(shlex.quote, argv)) for argv in EXPLORE]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
