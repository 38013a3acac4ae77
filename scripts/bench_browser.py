"""Browser-mode throughput and memory: N worker processes, each with its own BrowserFetcher (the system's
Chromium), render the catalogue stand-in's script-rendered /live/ pages; prints pages/s and the peak PSS and
RSS of the whole process tree (this process, the workers, Playwright's drivers, Chromium's processes; the
stand-in left out), sampled every 0.2 s.

    .venv/bin/python -m scripts.bench_browser [--workers 4] [--pages 60] [--slots N] [--browser PATH]
    .venv/bin/python -m scripts.bench_browser --compare [--workers 4] [--events 20] [--sessions 3] [--latency-ms 250]

By default at most as many browsers are open at once as `chromium.slots_for` allows for the workers
under the default 1 GB ceiling (3 for 4 workers); `--slots 0` gives every worker its own browser.

`--compare` runs the tool itself (`scraper seed`, then `scraper run --workers N`) three times on the same two
events catalogues (one on 127.0.0.2, one on 127.0.0.1, `--events` each, every page rendered: `fetcher =
"browser"`, each answer after `--latency-ms`: a real site's, so a page waits on the network as well as on the
CPU): both sources on the local browser, both through a CDP endpoint (Debian's Chromium started here in
a session of its own, outside the tool's process tree, `--sessions` sessions), and one of each side by side.
For each it prints the pages per second (pages over the run's wall time, its start included), the tool's peak
PSS (the run's whole process tree, sampled every 0.25 s) and the most local browsers open at once, then the
mixed run's pages per second against the local browser's alone.

Bounded: the pages are a fixed number, each under a 30 s deadline; everything started is stopped at the end.
"""

import argparse
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

import psutil

from scraper.base import settings
from scraper.net import browser, chromium
from scraper.pool import memory
from scripts.standin import cdp, client

DEADLINE_S = 30.0


def _worker(executable, urls, slots, done):
    fetcher = browser.BrowserFetcher(executable, slots=slots and browser.BrowserSlots(*slots),
                                     pages_per_browser=max(1, len(urls) // 2))
    try:
        for url in urls:
            status, _, html = fetcher.render(url, lambda u: None, DEADLINE_S, 10 * 2**20)
            with done.get_lock():
                done.value += status == 200 and "ld+json" in html
    finally:
        fetcher.close()


def _sample(stop, peaks, skip):
    while not stop.is_set():
        procs = [p for p in memory.tree(os.getpid()) if p.pid not in skip]
        pss, rss = memory.usage(procs)
        peaks["pss"], peaks["rss"] = max(peaks["pss"], pss), max(peaks["rss"], rss)
        peaks["procs"] = max(peaks["procs"], len(procs))
        stop.wait(0.2)


RUN_RATE, RUN_BURST = 50, 10       # the sources' own rate in --compare: the browsers, not the rate, bound the runs


def _source(name, url, endpoint, sessions):
    remote = "" if endpoint is None else f'browser_endpoint = "cdp:{endpoint}"\nbrowser_sessions = {sessions}\n'
    return (f'[[source]]\nname = "{name}"\nkind = "catalogue"\nsite = "{url}/"\nrate = {RUN_RATE}\n'
            f'burst = {RUN_BURST}\ninclude = ["^/(events|live)/"]\ntype = "Event"\nrequired = ["name", "startDate"]\n'
            f'fetcher = "browser"\nsettle = ".organizer"\n{remote}\n')


def _run_sampled(folder, text, workers):
    """`scraper seed` then `scraper run --workers N` on a fresh database with the sources `text`: (pages done,
    the run's wall time in s, its tree's peak PSS in bytes, the most local browsers open at once)."""
    with open(os.path.join(folder, "sources.toml"), "w") as f:
        f.write(text)
    db = os.path.join(folder, "jobs.db")
    env = {**os.environ, "SCRAPER_DB": db, "SCRAPER_SOURCES": f.name, "SCRAPER_TRANSCRIPTS": "0",
           "SCRAPER_API_URL": client.LOOPBACK_URL + "9/api", "SCRAPER_SITE_URL": client.LOOPBACK_URL + "9"}
    subprocess.run([sys.executable, "-m", "scraper", "seed"], env=env, check=True, capture_output=True)
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "scraper", "run", "--workers", str(workers)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    peak = browsers = 0
    while proc.poll() is None:
        procs = memory.tree(proc.pid)
        peak = max(peak, memory.usage(procs)[0])
        leaders = 0
        for p in procs:     # a browser: a live Chromium process (not an exited one, unreaped) whose parent is not
            try:
                leaders += "chrom" in p.name().lower() and p.status() != psutil.STATUS_ZOMBIE \
                    and "chrom" not in psutil.Process(p.ppid()).name().lower()
            except psutil.Error:
                continue
        browsers = max(browsers, leaders)
        time.sleep(0.25)
    elapsed = time.monotonic() - started
    with sqlite3.connect(db) as conn:
        pages = conn.execute("SELECT COUNT(*) FROM jobs WHERE status = 'done'").fetchone()[0]
    os.remove(db)
    return pages, elapsed, peak, browsers


def compare(args):
    """The tool's runs: both sources local, both through the CDP endpoint, one of each (see the docstring)."""
    executable = browser.require(args.browser)
    folder = tempfile.mkdtemp(prefix="bench-browser-")
    figures = {}
    with cdp.endpoint(executable, folder) as (endpoint, _), \
            client.start(catalogue=True, events=args.events, seed=1, latency_ms=args.latency_ms) as here, \
            client.start(catalogue=True, events=args.events, seed=2, host="127.0.0.1", latency_ms=args.latency_ms) \
            as there:
        plans = {"local": (None, None), "cdp": (endpoint, endpoint), "mixed": (None, endpoint)}
        for mode, (first, second) in plans.items():
            text = _source("here", here.url, first, args.sessions) + _source("there", there.url, second, args.sessions)
            figures[mode] = _run_sampled(folder, text, args.workers)
    print(f"| run ({args.workers} workers, {2 * args.events} pages) | pages done | pages/s | tool's peak PSS (MB) "
          f"| local browsers at once |")
    print("|---|---|---|---|---|")
    for mode, (pages, elapsed, peak, browsers) in figures.items():
        print(f"| {mode} | {pages} | {pages / elapsed:.2f} | {peak / 2**20:.0f} | {browsers} |")
    rate = {mode: pages / elapsed for mode, (pages, elapsed, _, _) in figures.items()}
    below = (figures["local"][2] - figures["cdp"][2]) / 2**20
    print(f"\nmixed against the local browser alone: {rate['mixed'] / rate['local']:.2f}x the pages per second; "
          f"the CDP run's peak PSS {abs(below):.0f} MB {'below' if below >= 0 else 'above'} the local run's")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--pages", type=int, default=60)
    parser.add_argument("--compare", action="store_true",
                        help="the tool's runs: local, through a CDP endpoint, and one source of each")
    parser.add_argument("--events", type=int, default=20, help="--compare: events of each of the two catalogues")
    parser.add_argument("--sessions", type=int, default=3, help="--compare: browser_sessions of the CDP sources")
    parser.add_argument("--latency-ms", type=float, default=250.0,
                        help="--compare: the catalogues' delay before each answer (a site's, not loopback's)")
    parser.add_argument("--slots", type=int, default=None, help="browsers open at once (0: one per worker)")
    parser.add_argument("--browser", default=settings.BROWSER,
                        help="as --browser-path: a path or a name on PATH (default: chromium, which is Debian's "
                             "chromium-headless-shell when installed)")
    args = parser.parse_args(argv)
    if args.compare:
        compare(args)
        return
    if args.slots is None:
        args.slots = chromium.slots_for(settings.MEMORY_LIMIT_MB, args.workers)
    lock = os.path.join(tempfile.mkdtemp(prefix="bench-browser-"), "slots.lock")
    executable = browser.require(args.browser)
    site = client.start(catalogue=True, events=60, seed=1)
    try:
        live = [e["url"] for e in site.truth()["events"] if "/live/" in e["url"]]
        urls = [live[i % len(live)] for i in range(args.pages)]
        done = multiprocessing.get_context("fork").Value("i", 0)
        peaks = {"pss": 0, "rss": 0, "procs": 0}
        stop = threading.Event()
        sampler = threading.Thread(target=_sample, args=(stop, peaks, {site.proc.pid}), daemon=True)
        sampler.start()
        ctx = multiprocessing.get_context("fork")
        started = time.monotonic()
        slots = args.slots and (lock, args.slots)
        procs = [ctx.Process(target=_worker, args=(executable, urls[i::args.workers], slots, done))
                 for i in range(args.workers)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        elapsed = time.monotonic() - started
        stop.set()
        sampler.join()
    finally:
        site.proc.terminate()
        site.proc.wait()
    slots = args.slots or args.workers
    print("| workers | browsers at once | pages rendered | pages/s | peak PSS (MB) | peak RSS summed (MB) "
          "| processes |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {args.workers} | {slots} | {done.value}/{args.pages} | {done.value / elapsed:.2f} "
          f"| {peaks['pss'] / 2**20:.0f} | {peaks['rss'] / 2**20:.0f} | {peaks['procs']} |")


if __name__ == "__main__":
    main()
