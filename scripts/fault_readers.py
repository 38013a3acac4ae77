"""Issue 44, a reader holding a read transaction during a SQLite run: the run's efficiency with and without
the reader, and the WAL's size (its peak while the reader holds it, then once the reader has let go, and at
the end). Prints the figures; every request goes to the local stand-in on 127.0.0.1.

    .venv/bin/python -m scripts.fault_readers [--rate 100] [--hold 120] [--workdir DIR]

The reader is a process of its own (`BEGIN; SELECT COUNT(*) FROM jobs`, then it sleeps `--hold` seconds and
commits), started 10 s into the run, as an analyst's `sqlite3` or a Datasette page left open would be. The
stand-in serves at most 6,022 templates (a minute at 100/s): the run goes over them again, as a refresh
does (`Queue.refetch` of the jobs done, queued while the last of a pass are still pending), as many times
as it takes to outlast the reader by 20 s.
"""

import argparse
import os
import resource
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from scraper.db import store
from scraper.db.queue import Queue
from scripts.benchkit import PY, env_for, fresh_db, scraper_cmd
from scripts.standin import client

READER_AFTER_S = 10.0
MAX_TEMPLATES = 6022    # the stand-in's corpus
AFTER_S = 20.0          # the run goes on this long after the reader lets go
HOLD = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN")
conn.execute("SELECT COUNT(*) FROM jobs").fetchone()
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


class WalSampler(threading.Thread):
    """The WAL file's size every 0.1 s: [(seconds since start, MB)]."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path, self.samples, self.stop = path, [], threading.Event()
        self.t0 = time.monotonic()

    def run(self):
        while not self.stop.wait(0.1):
            try:
                mb = os.stat(self.path).st_size / 2**20
            except OSError:
                mb = 0.0
            self.samples.append((time.monotonic() - self.t0, mb))

    def peak(self, since=0.0, until=float("inf")):
        return max((mb for t, mb in self.samples if since <= t <= until), default=0.0)

    def at(self, t):
        return next((mb for s, mb in self.samples if s >= t), self.samples[-1][1] if self.samples else 0.0)


def refetcher(db, templates, passes, stop):
    """Queue every job done again when a pass is nearly over (its last 300 still to do), `passes - 1` times."""
    conn = store.connect(str(db))
    try:
        queue, left = Queue(conn), passes - 1
        while left and not stop.wait(0.2):
            done = conn.execute("SELECT COUNT(*) FROM jobs WHERE status = 'done'").fetchone()[0]
            if done >= templates - 300:
                keys = [r[0] for r in conn.execute("SELECT key FROM jobs WHERE status = 'done'")]
                queue.refetch(keys, time.time())
                left -= 1
    finally:
        conn.close()


def one_run(work, name, templates, rate, burst, hold_s, passes):
    """A seeded run (4 workers) at `rate` over `templates`, `passes` times; with `hold_s`, a reader holds a read
    transaction meanwhile. A dict of its efficiency, wall time, 429s and WAL figures."""
    site = client.start(templates=templates, latency_ms=20, rate=rate * 1.5, burst=burst * 2)
    try:
        db = work / f"{name}.db"
        fresh_db(db).close()
        env = env_for(db, site.url)
        subprocess.run(scraper_cmd("seed", "--from-search", "--rate", str(rate * 1.5), "--burst", str(burst)),
                       env=env, check=True, capture_output=True)
        site.reset()
        wal = WalSampler(str(db) + "-wal")
        t0, cpu0 = time.perf_counter(), _children_cpu()
        proc = subprocess.Popen(scraper_cmd("run", "--workers", "4", "--rate", str(rate), "--burst", str(burst)),
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wal.start()
        stop = threading.Event()
        again = threading.Thread(target=refetcher, args=(db, templates, passes, stop), daemon=True)
        again.start()
        reader = None
        if hold_s:
            time.sleep(READER_AFTER_S)
            reader = subprocess.Popen([PY, "-c", HOLD, str(db), str(hold_s)], stdout=subprocess.PIPE, text=True)
            reader.stdout.readline()
            held_from = wal.samples[-1][0] if wal.samples else READER_AFTER_S
        _, err = proc.communicate()
        wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0     # the run's processes, reaped
        stop.set()
        again.join()
        wal.stop.set()
        wal.join()
        if reader is not None:
            reader.wait()
        if proc.returncode != 0:
            raise RuntimeError(f"scraper run exited {proc.returncode}: {err[-2000:]}")
        stats = site.stats()
        conn = store.connect(str(db))
        done = conn.execute("SELECT COUNT(*) FROM jobs WHERE status = 'done'").fetchone()[0]
        conn.close()
        assert done == templates, f"only {done} of {templates} done"
        fetched = conn_count(db, "SELECT COUNT(*) FROM requests WHERE kind = 'ok'")
        out = {"eff": ((stats["requests"] - burst) / rate) / wall, "wall": wall, "429": stats["http_429"],
               "requests": stats["requests"], "fetched": fetched, "cpu_ms": cpu * 1000 / max(1, fetched),
               "wal_peak": wal.peak(), "warned": [ln[24:] for ln in err.splitlines() if "WAL has grown" in ln]}
        if hold_s:
            let_go = held_from + hold_s
            out.update(wal_held_peak=wal.peak(held_from, let_go), wal_before=wal.peak(0, held_from),
                       wal_5s_after=wal.at(let_go + 5), wal_end=wal.samples[-1][1] if wal.samples else 0.0)
        return out
    finally:
        site.stop()


def _children_cpu():
    """CPU seconds of this process's children that ended (the run: its supervisor and, through it, its
    workers): what the run cost, whatever else the machine was doing."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def conn_count(db, sql):
    conn = store.connect(str(db))
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--hold", type=float, default=120.0, help="seconds the reader holds its transaction")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="fault-readers-"))
    burst = max(5, int(args.rate / 10))
    # the run lasts the reader's hold, the time before it and AFTER_S after it
    jobs = int(args.rate * (READER_AFTER_S + args.hold + AFTER_S))
    templates = min(jobs, MAX_TEMPLATES)
    passes = -(-jobs // templates)
    print(f"{templates} templates, {passes} pass(es), at {args.rate:g}/s (burst {burst}), 4 workers; a reader holds "
          f"a read transaction {args.hold:g} s from {READER_AFTER_S:g} s into the run")
    plain = one_run(work, "plain", templates, args.rate, burst, 0, passes)
    print(f"without a reader: efficiency {plain['eff']:.4f}, {plain['requests']} requests in {plain['wall']:.1f} s, "
          f"429s {plain['429']}, {plain['cpu_ms']:.2f} ms of CPU a request, WAL peak {plain['wal_peak']:.1f} MB")
    held = one_run(work, "held", templates, args.rate, burst, args.hold, passes)
    print(f"with the reader:  efficiency {held['eff']:.4f}, {held['requests']} requests in {held['wall']:.1f} s, "
          f"429s {held['429']}, {held['cpu_ms']:.2f} ms of CPU a request, "
          f"WAL {held['wal_before']:.1f} MB before it, peak {held['wal_held_peak']:.1f} MB while it held, "
          f"{held['wal_5s_after']:.1f} MB 5 s after it let go, {held['wal_end']:.1f} MB at the end")
    print(f"efficiency difference: {plain['eff'] - held['eff']:+.4f} (issue 44 asks within 0.02); "
          f"WAL growth while held: {(held['wal_held_peak'] - held['wal_before']) / args.hold:.2f} MB/s")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (efficiency is the rate kept; "
          "the CPU a request is what the reader cost, whatever else ran)")
    print("the run said:", held["warned"] or "nothing of the WAL (under scraper.pool.supervisor.WAL_WARN_MB)")


if __name__ == "__main__":
    main()
