#!/usr/bin/env python3
"""What hostile answers cost: peak pool RSS with and without them, and the wall time of a trickle.

    .venv/bin/python scripts/hostile_bench.py [--templates 300] [--timeout 2]

Every request goes to the local stand-in (scripts/standin_site.py) on 127.0.0.1. The pool's RSS is the
sum over `scraper run` and its children, sampled with psutil every 20 ms. Prints its figures; exit
code 1 when a run breaks the 1 GB ceiling or does not end with the expected code.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "scripts" / "standin_site.py"
CEILING = 2**30
ORDINARY = "503:0.03,500x2:0.02,reset:0.01,truncate:0.01,404:0.01,403:0.005"


def start_standin(*args):
    proc = subprocess.Popen([sys.executable, str(STANDIN), *args], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"the stand-in did not start: {line!r}")
    return proc, line.split()[-1]


def scraper(url, db, *args, sample=False):
    """Run `scraper ARGS`; (exit code, wall seconds, peak pool RSS in bytes or 0)."""
    env = dict(os.environ, SCRAPER_API_URL=url + "/api", SCRAPER_SITE_URL=url, SCRAPER_DB=db, PYTHONPATH=str(ROOT))
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "scraper", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = [0]
    stop = threading.Event()

    def sampler():
        root = psutil.Process(proc.pid)
        while not stop.wait(0.02):
            try:
                family = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            total = 0
            for p in family:
                try:
                    total += p.memory_info().rss
                except psutil.NoSuchProcess:
                    pass
            peak[0] = max(peak[0], total)

    thread = threading.Thread(target=sampler, daemon=True)
    if sample:
        thread.start()
    code = proc.wait()
    stop.set()
    if sample:
        thread.join()
    return code, time.perf_counter() - started, peak[0]


def pool_run(templates, timeout_s, hostile, workdir):
    extra = ["--hostile", str(hostile), "--trickle-s", "0.5"] if hostile else []
    site, url = start_standin("--templates", str(templates), "--rate", "100", "--burst", "10",
                              "--faults", ORDINARY, "--seed", "7", *extra)
    try:
        db = os.path.join(workdir, f"pool-{hostile}.db")
        scraper(url, db, "seed", "--from-search", "--rate", "100", "--burst", "10")
        return scraper(url, db, "run", "--workers", "4", "--rate", "100", "--burst", "10",
                       "--timeout", str(timeout_s), "--backoff-base", "0.1", sample=True)
    finally:
        site.terminate()
        site.wait()


def trickle_cost(timeout_s, workdir):
    """Wall time of one run of 20 templates, once clean and once with one template that trickles."""
    walls = {}
    for faults in ("", "trickle:0.05"):
        site, url = start_standin("--templates", "20", "--rate", "100", "--burst", "10", "--trickle-s", "0.5",
                                  *(["--faults", faults] if faults else []))
        try:
            db = os.path.join(workdir, f"trickle-{bool(faults)}.db")
            scraper(url, db, "seed", "--from-search", "--rate", "100", "--burst", "10")
            code, wall, _ = scraper(url, db, "run", "--workers", "2", "--rate", "100", "--burst", "10",
                                    "--timeout", str(timeout_s), "--backoff-base", "0.1")
            walls[faults or "clean"] = (code, wall)
        finally:
            site.terminate()
            site.wait()
    return walls


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--templates", type=int, default=300)
    parser.add_argument("--timeout", type=float, default=2.0, help="--timeout of the runs, in seconds")
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as workdir:
        for hostile in (0.0, 0.01):
            code, wall, peak = pool_run(args.templates, args.timeout, hostile, workdir)
            label = "with hostile answers" if hostile else "without hostile answers"
            print(f"pool of 4 workers, {args.templates} templates {label}: exit {code}, {wall:.1f} s, "
                  f"peak pool RSS {peak / 2**20:.0f} MB")
            ok = ok and code == 1 and 0 < peak < CEILING
        walls = trickle_cost(args.timeout, workdir)
        (clean_code, clean), (trickle_code, trickled) = walls["clean"], walls["trickle:0.05"]
        print(f"20 templates, 2 workers: clean run {clean:.1f} s (exit {clean_code}); with one trickling "
              f"answer {trickled:.1f} s (exit {trickle_code}): the trickle cost {trickled - clean:.1f} s "
              f"(3 attempts of at most --timeout {args.timeout:g} s each, plus backoff)")
        ok = ok and clean_code == 0 and trickle_code == 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
