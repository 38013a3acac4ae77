"""How true the rate is early in a run: a real run at --rate 5 against the local stand-in, and what
`scraper status --json` reports 12 s after the run started (the target: within 30 % of 300/min).

    python -m scripts.early_rate [--at 12] [--rate 5]

Prints its figures; everything stays on 127.0.0.1. It imports nothing from the package: it runs the
CLI as a process, as an operator would."""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts.benchkit import env_for
from scripts.standin import client

PY = sys.executable


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--at", type=float, default=12.0, help="seconds into the run to read the status")
    ap.add_argument("--rate", type=float, default=5.0, help="--rate of the run (and the stand-in's limit)")
    ap.add_argument("--templates", type=int, default=300)
    args = ap.parse_args()
    with client.start(templates=args.templates, rate=args.rate, burst=5) as site, \
            tempfile.TemporaryDirectory() as work:
        env = env_for(Path(work) / "jobs.db", site.url)
        cli = [PY, "-m", "scraper", "--log-level", "WARNING"]
        subprocess.run([*cli, "seed", "--from-search", "--rate", "50"], env=env, check=True, capture_output=True)
        time.sleep(2)                                  # the stand-in's bucket refills after the seed
        run = subprocess.Popen([*cli, "run", "--rate", str(args.rate)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            started = None
            while started is None:
                report = json.loads(subprocess.run([*cli, "status", "--json"], env=env, capture_output=True,
                                                   text=True, check=True).stdout)
                started = (report["run"] or {}).get("started_at")
                time.sleep(0.1)
            time.sleep(max(0.0, started + args.at - time.time()))
            report = json.loads(subprocess.run([*cli, "status", "--json"], env=env, capture_output=True,
                                               text=True, check=True).stdout)
        finally:
            run.terminate()
            run.wait()
    target = args.rate * 60
    rate = report["rate_per_min"]
    print(f"{'seconds into the run':32} {report['rate_window_s']:>8.1f}")
    print(f"{'finished':32} {report['done']:>8d}")
    print(f"{'rate_per_min reported':32} {rate:>8.1f}")
    print(f"{'rate_per_min expected':32} {target:>8.1f}")
    print(f"{'error':32} {100 * (rate - target) / target:>+7.1f}%  (target: within 30%)")
    print(f"{'old 60 s window would show':32} {report['finished_last_1m']:>8.1f}")


if __name__ == "__main__":
    main()
