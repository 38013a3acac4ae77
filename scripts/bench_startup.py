"""Start-up time of `scraper status` against `sqlite-utils tables` on the same small database.

Both are whole processes started from their console scripts, timed with Python's own clock over
repeated runs (interleaved, so a busy machine slows both alike); prints the median of each and their
ratio. The target (issue 26): `scraper status` takes at most 0.7 times as long.

    .venv/bin/python -m scripts.bench_startup --runs 30
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

TARGET = 0.7


def tool(name):
    """The console script `name` beside this Python (the virtualenv's), else on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), name)
    return here if os.path.exists(here) else name


def timed(cmd, env):
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def small_database(folder):
    """A database with the schema and a few jobs, made by scraper itself (no network)."""
    db = os.path.join(folder, "small.db")
    ids = os.path.join(folder, "ids.txt")
    with open(ids, "w") as f:
        f.write("\n".join(str(i) for i in range(1, 21)) + "\n")
    subprocess.run([tool("scraper"), "--db", db, "seed", "--ids", ids], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return db


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs of each command")
    args = parser.parse_args()
    # as installed: with bytecode caches (the warm-up run writes ours; a shell with PYTHONDONTWRITEBYTECODE
    # would make every timed run compile scraper's sources, while sqlite-utils' caches came with pip)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as folder:
        db = small_database(folder)
        commands = {"scraper status": [tool("scraper"), "--db", db, "status"],
                    "sqlite-utils tables": [tool("sqlite-utils"), "tables", db]}
        for cmd in commands.values():       # warm the page cache and the bytecode caches
            timed(cmd, env)
        times = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, cmd in commands.items():
                times[name].append(timed(cmd, env))
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        print(f"{name:<20} median {medians[name] * 1000:7.1f} ms  min {min(t) * 1000:7.1f} ms  "
              f"({args.runs} runs)")
    ratio = medians["scraper status"] / medians["sqlite-utils tables"]
    print(f"ratio                {ratio:.2f} (target <= {TARGET}): {'ok' if ratio <= TARGET else 'MISSED'}")


if __name__ == "__main__":
    main()
