"""What hostile answers cost: peak pool RSS with and without them, and the wall time of a trickle.

    .venv/bin/python -m scripts.hostile_bench [--templates 300] [--timeout 2]

Every request goes to the local stand-in (scripts/standin) on 127.0.0.1. The pool's RSS is the
sum over `scraper run` and its children, sampled with psutil every 20 ms. Prints its figures; exit
code 1 when a run breaks the 1 GB ceiling or does not end with the expected code.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

from scripts.benchkit import RssSampler, env_for
from scripts.standin import client

CEILING = 2**30
ORDINARY = "503:0.03,500x2:0.02,reset:0.01,truncate:0.01,404:0.01,403:0.005"


def scraper(url, db, *args, sample=False):
    """Run `scraper ARGS`; (exit code, wall seconds, peak pool RSS in bytes or 0)."""
    env = env_for(db, url)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "scraper", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sampler = RssSampler(proc.pid, every_s=0.02)
    if sample:
        sampler.start()
    code = proc.wait()
    sampler.stop.set()
    if sample:
        sampler.join()
    return code, time.perf_counter() - started, sampler.peak


def pool_run(templates, timeout_s, hostile, workdir):
    extra = {"hostile": hostile, "trickle_s": 0.5} if hostile else {}
    with client.start(templates=templates, rate=100, burst=10, faults=ORDINARY, seed=7, **extra) as site:
        url = site.url
        db = os.path.join(workdir, f"pool-{hostile}.db")
        scraper(url, db, "seed", "--from-search", "--rate", "100", "--burst", "10")
        return scraper(url, db, "run", "--workers", "4", "--rate", "100", "--burst", "10",
                       "--timeout", str(timeout_s), "--backoff-base", "0.1", sample=True)


def trickle_cost(timeout_s, workdir):
    """Wall time of one run of 20 templates, once clean and once with one template that trickles."""
    walls = {}
    for faults in ("", "trickle:0.05"):
        with client.start(templates=20, rate=100, burst=10, trickle_s=0.5, faults=faults) as site:
            url = site.url
            db = os.path.join(workdir, f"trickle-{bool(faults)}.db")
            scraper(url, db, "seed", "--from-search", "--rate", "100", "--burst", "10")
            code, wall, _ = scraper(url, db, "run", "--workers", "2", "--rate", "100", "--burst", "10",
                                    "--timeout", str(timeout_s), "--backoff-base", "0.1")
            walls[faults or "clean"] = (code, wall)
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
