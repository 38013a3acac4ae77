"""Browser-mode throughput and memory: N worker processes, each with its own BrowserFetcher (the system's
Chromium), render the catalogue stand-in's script-rendered /live/ pages; prints pages/s and the peak PSS and
RSS of the whole process tree (this process, the workers, Playwright's drivers, Chromium's processes; the
stand-in left out), sampled every 0.2 s.

    .venv/bin/python -m scripts.bench_browser [--workers 4] [--pages 60] [--slots N] [--browser PATH]

By default at most as many browsers are open at once as `chromium.slots_for` allows for the workers
under the default 1 GB ceiling (3 for 4 workers); `--slots 0` gives every worker its own browser.

Bounded: the pages are a fixed number, each under a 30 s deadline; everything started is stopped at the end.
"""

import argparse
import multiprocessing
import os
import tempfile
import threading
import time

from scraper.base import settings
from scraper.net import browser, chromium
from scraper.pool import memory
from scripts.standin import client

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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--pages", type=int, default=60)
    parser.add_argument("--slots", type=int, default=None, help="browsers open at once (0: one per worker)")
    parser.add_argument("--browser", default=settings.BROWSER,
                        help="as --browser-path: a path or a name on PATH (default: chromium, which is Debian's "
                             "chromium-headless-shell when installed)")
    args = parser.parse_args(argv)
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
