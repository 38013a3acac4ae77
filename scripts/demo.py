"""`make demo`: start the local stand-in site, scrape it end to end, print `scraper status`, stop the site.

Everything stays on 127.0.0.1; the database is the --db file (removed first, so the demo starts clean).
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--templates", type=int, default=250)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rate", type=float, default=20.0, help="the stand-in's limit and the scraper's rate")
    parser.add_argument("--burst", type=int, default=5)
    parser.add_argument("--faults", default="503:0.02,500x2:0.01,reset:0.01,404:0.01")
    parser.add_argument("--db", default="demo.db")
    args = parser.parse_args()

    for suffix in ("", "-wal", "-shm", "-limiter", "-limiter-wal", "-limiter-shm", "-limiter.lock", "-run.lock"):
        Path(args.db + suffix).unlink(missing_ok=True)
    site = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "standin_site.py"), "--templates", str(args.templates),
         "--rate", str(args.rate), "--burst", str(args.burst), "--latency-ms", "40", "--faults", args.faults],
        stdout=subprocess.PIPE, text=True)
    try:
        line = site.stdout.readline()
        if "listening on" not in line:
            sys.exit(f"the stand-in site did not start: {line.strip()!r}")
        url = line.split()[-1]
        print(f"stand-in site at {url} ({args.templates} templates, {args.rate:g} requests/s, burst {args.burst})")
        env = dict(os.environ, SCRAPER_DB=args.db, SCRAPER_API_URL=url + "/api", SCRAPER_SITE_URL=url)

        def scraper(*argv):
            print("$ scraper " + " ".join(argv), flush=True)
            return subprocess.run([sys.executable, "-m", "scraper", *argv], env=env).returncode

        if scraper("seed", "--from-search") != 0:
            sys.exit("seeding failed")
        code = scraper("run", "--workers", str(args.workers), "--rate", str(args.rate), "--burst", str(args.burst),
                       "--backoff-base", "0.5")
        scraper("status")
        stats = __import__("json").loads(
            __import__("urllib.request").request.urlopen(url + "/_standin/stats", timeout=5).read())
        print(f"the site saw {stats['requests']} requests, {stats['http_429']} answered 429, "
              f"at most {stats['max_in_1s']} in any second")
        print(f"`scraper run` exited {code}; the results are in {args.db} (table workflows)")
    finally:
        site.terminate()
        site.wait(10)


if __name__ == "__main__":
    main()
