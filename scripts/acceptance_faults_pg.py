"""Issue 44's figures for PostgreSQL faults, as the "Done when" states them:

- a 3,000-template run with 4 workers that lives through 3 restarts of the server (fast and immediate) at
  random moments: exit 0, every job done once, one version per template, no 429, no breaker opened, and the
  time each restart cost (the completions' gap around it, and the run's wall time against a run without);
- the network to PostgreSQL silent for 60 s mid-run (tests/faults/relay.py: a relay that stops forwarding and
  forgets its connections): how long after the silence each process works again, and nothing lost.

    .venv/bin/python -m scripts.acceptance_faults_pg [--templates 3000] [--rate 100] [--silence 60] [--seed 44]

PostgreSQL is a throw-away server started like the tests' (tests/pg.py); every request goes to the n8n stand-in
on 127.0.0.1. It prints its figures and exits 1 when one of the promises does not hold.
"""

import argparse
import os
import random
import re
import subprocess
import sys
import threading
import time

from scraper.db import store
from scripts.standin import client
from tests.faults.relay import SilentRelay
from tests.helpers import check_every_row
from tests.pg import Server, why_not

WORKERS = 4
BURST = 5
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) WARNING (.+?): the database answers again")


def env_for(site, url):
    return {**os.environ, "SCRAPER_API_URL": site.api_url, "SCRAPER_SITE_URL": site.url, "SCRAPER_DB": url,
            "SCRAPER_YOUTUBE_URL": "http://127.0.0.1:9", "SCRAPER_TRANSCRIPTS": "0"}


def scraper(*args):
    return [sys.executable, "-m", "scraper", *args]


class Completions:
    """The done count, polled every 50 ms in a thread: when each job finished, as seen from outside."""

    def __init__(self, url):
        self.url, self.times, self.stopped = url, [], False
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self):
        conn = store.connect(self.url)
        seen = 0
        try:
            while not self.stopped:
                try:
                    n = conn.execute("SELECT COUNT(*) FROM jobs WHERE status = 'done'").one()[0]
                except Exception:       # the server restarting: the poller has no link; open it again
                    time.sleep(0.05)
                    try:
                        conn.close()
                        conn = store.connect(self.url)
                    except Exception:
                        pass
                    continue
                now = time.monotonic()
                self.times += [now] * (n - seen)
                seen = max(seen, n)
                time.sleep(0.05)
        finally:
            conn.close()

    def done(self):
        return len(self.times)

    def gap_around(self, at):
        """Seconds without a completion around `at` (the last before it to the first after it)."""
        before = [t for t in self.times if t <= at]
        after = [t for t in self.times if t > at]
        if not before or not after:
            return None
        return after[0] - before[-1]

    def stop(self):
        self.stopped = True
        self.thread.join(5)


def seeded(server, templates, rate, seed):
    url = server.durable_url()
    site = client.start(templates=templates, rate=rate, burst=BURST, seed=seed)
    subprocess.run(scraper("seed", "--from-search", "--rate", str(rate), "--burst", str(BURST)),
                   env=env_for(site, url), check=True, capture_output=True)
    time.sleep(BURST / rate)
    site.reset()
    return site, url


def run_cmd(rate):
    return scraper("run", "--workers", str(WORKERS), "--rate", str(rate), "--burst", str(BURST))


def verdict(site, url, code, stderr, ok, rate):
    """Every promise of a faulty run; each failure printed, `ok` returned and-ed."""
    checks = {"exit 0": code == 0, "no traceback": "Traceback" not in stderr}
    try:
        check_every_row(site, url)
        checks["every job done as the site says"] = True
    except AssertionError as e:
        checks[f"every job done as the site says ({e})"] = False
    conn = store.connect(url)
    try:
        twice = conn.execute("SELECT COUNT(*) FROM (SELECT template_id FROM answers GROUP BY template_id, kind "
                             "HAVING COUNT(*) > 1) AS t").one()[0]
        spent = conn.execute("SELECT COUNT(*) FROM jobs WHERE attempts > 1").one()[0]
        opened = conn.execute("SELECT COUNT(*) FROM domains WHERE state <> 'closed' OR failures > 0").one()[0]
    finally:
        conn.close()
    stats = site.stats()
    checks.update({f"one version per template ({twice} twice)": twice == 0,
                   f"no attempt spent ({spent} jobs with 2 or more)": spent == 0,
                   f"no breaker opened ({opened})": opened == 0,
                   f"0 429s ({stats['http_429']})": stats["http_429"] == 0,
                   f"at most rate + burst in a second ({stats['max_in_1s']})": stats["max_in_1s"] <= rate + BURST})
    for what, held in checks.items():
        print(f"  {'ok  ' if held else 'FAIL'} {what}")
    if not checks["exit 0"]:
        print(stderr[-3000:])
    return ok and all(checks.values())


def restarts(server, templates, rate, rng):
    print(f"== {templates} templates, {WORKERS} workers, {rate}/s: a run without faults, then one with 3 restarts")
    site, url = seeded(server, templates, rate, rng.randrange(1000))
    began = time.monotonic()
    subprocess.run(run_cmd(rate), env=env_for(site, url), check=True, capture_output=True)
    base = time.monotonic() - began
    site.stop()
    print(f"  without faults: {base:.1f} s")

    site, url = seeded(server, templates, rate, rng.randrange(1000))
    moments = sorted(rng.uniform(0.1, 0.9) for _ in range(3))
    modes = [rng.choice(("fast", "immediate")) for _ in range(2)]
    modes.insert(rng.randrange(3), "immediate" if "immediate" not in modes else "fast")
    seen = Completions(url)
    began = time.monotonic()
    run = subprocess.Popen(run_cmd(rate), env=env_for(site, url), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
    stderr_parts = []
    reader = threading.Thread(target=lambda: stderr_parts.append(run.stderr.read()), daemon=True)
    reader.start()
    downs = []
    for moment, mode in zip(moments, modes, strict=True):
        while seen.done() < moment * templates and run.poll() is None:
            time.sleep(0.02)
        at = time.monotonic()
        downs.append((mode, at, server.restart(mode)))
    code = run.wait()
    wall = time.monotonic() - began
    reader.join(10)
    seen.stop()
    stderr = "".join(stderr_parts)
    for mode, at, down in downs:
        gap = seen.gap_around(at)
        print(f"  restart {mode:9s} at {at - began:5.1f} s: the server down {down:.2f} s, no job finished for "
              f"{gap:.2f} s around it" if gap is not None else f"  restart {mode} at {at - began:.1f} s")
    print(f"  with 3 restarts: {wall:.1f} s, {(wall - base) / 3:+.2f} s a restart against the run without; exit {code}")
    ok = verdict(site, url, code, stderr, True, rate)
    site.stop()
    return ok


def silence(server, templates, rate, silent_s, rng):
    print(f"== {templates} templates, {WORKERS} workers, {rate}/s: the network to PostgreSQL silent for "
          f"{silent_s:.0f} s (default db_keepalive and db_statement_timeout)")
    site, url = seeded(server, templates, rate, rng.randrange(1000))
    relay = SilentRelay(server.port).start()
    via = url.replace(f":{server.port}/", f":{relay.port}/")
    seen = Completions(url)
    run = subprocess.Popen(run_cmd(rate), env=env_for(site, via), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
    stderr_parts = []
    reader = threading.Thread(target=lambda: stderr_parts.append(run.stderr.read()), daemon=True)
    reader.start()
    while seen.done() < templates * 0.2:
        time.sleep(0.05)
    relay.silence()
    silenced = time.monotonic()
    time.sleep(silent_s)
    during = seen.done()
    relay.resume()
    spoke, spoke_wall = time.monotonic(), time.time()
    while seen.done() <= during and run.poll() is None:
        time.sleep(0.02)
    first = time.monotonic() - spoke
    code = run.wait()
    reader.join(10)
    seen.stop()
    relay.stop()
    stderr = "".join(stderr_parts)
    back = {}
    for line in stderr.splitlines():
        m = _STAMP.match(line)
        if m:
            at = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000
            back[m.group(3)] = at - spoke_wall
    print(f"  silent for {spoke - silenced:.0f} s: {during} done before it spoke again; the first job finished "
          f"{first:.1f} s after it spoke")
    latest = max(back.values(), default=None)
    for name, after in sorted(back.items()):
        print(f"  {name}: working again {after:+.1f} s after the silence ended")
    print(f"  every process working again within {latest:.1f} s of the silence's end; exit {code}"
          if latest is not None else "  no process reported an outage")
    ok = verdict(site, url, code, stderr, latest is not None and latest <= 30, rate)
    site.stop()
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--templates", type=int, default=3000)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--silence", type=float, default=60.0)
    parser.add_argument("--silence-templates", type=int, default=2000)
    parser.add_argument("--silence-rate", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=44)
    args = parser.parse_args()
    reason = why_not()
    if reason:
        sys.exit(f"cannot run: {reason}")
    rng = random.Random(args.seed)
    server = Server().start()
    try:
        ok = restarts(server, args.templates, args.rate, rng)
        ok = silence(server, args.silence_templates, args.silence_rate, args.silence, rng) and ok
    finally:
        server.stop()
    print("all promises held" if ok else "SOME PROMISES FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
