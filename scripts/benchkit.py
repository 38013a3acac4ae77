"""What the benchmarks share: a table of results, the CLI's environment, fresh databases, peak memory,
a database of real workflows rows, and the loop over a bench's sections.

Timers are time.perf_counter; memory is psutil (sampled) or /usr/bin/time -v (the kernel's exact peak).
Everything stays on 127.0.0.1.
"""

import dataclasses
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from scraper.base import settings as config
from scraper.base import sources, urls
from scraper.db import store
from scraper.sites import n8n
from scripts.standin import client
from scripts.standin.corpus import DATA_DIR, Corpus

PY = sys.executable
NOWHERE = "http://127.0.0.1:9"      # a closed port: what the CLI reaches when a bench needs no site
TIME_V = "/usr/bin/time"


class Results:
    """The rows of one bench's table and its notes; passed to each section."""

    def __init__(self):
        self.rows, self.notes = [], []

    def add(self, name, value, unit, target="", ok=None):
        """One table row; ok is True/False against the target, None when there is no target."""
        self.rows.append({"name": name, "value": value, "unit": unit, "target": target, "ok": ok})

    def note(self, text):
        self.notes.append(text)
        print("   " + text, flush=True)

    @property
    def failed(self):
        return any(r["ok"] is False for r in self.rows)

    def print_table(self):
        head = ("name", "figure", "unit", "target", "result")
        rows = [(r["name"], fmt(r["value"]), r["unit"], r["target"],
                 {True: "pass", False: "FAIL", None: "-"}[r["ok"]]) for r in self.rows]
        widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]

        def line(cells):
            return "  ".join(str(c).rjust(w) if i == 1 else str(c).ljust(w)
                             for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

        print("\n" + line(head) + "\n" + line(["-" * w for w in widths]))
        for row in rows:
            print(line(row))
        print("\nnotes:\n  " + "\n  ".join(self.notes) if self.notes else "")   # query plans, per-run details

    def write_json(self, path, **extra):
        with open(path, "w", encoding="utf-8") as f:
            json.dump({**extra, "results": self.rows, "notes": self.notes}, f, indent=2)


def fmt(v):
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def median_s(fn, repeat=5):
    """The median of `repeat` timings of `fn()`, in seconds."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def label(n):
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k" if n >= 1000 else str(n)


def run_sections(sections, chosen, results, workdir, quick):
    """Run each chosen section(work, quick, results) in a work folder (a temporary one unless `workdir`),
    print the table and the machine; True when a figure missed its target. One broken section is a
    failed row, not the end: the other figures still print."""
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="scraper-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        for name in chosen:
            t0 = time.perf_counter()
            print(f"== {name}", flush=True)
            try:
                sections[name](work, quick, results)
            except Exception as e:  # any error of a section becomes its failed row
                results.add(name, "error", f"{type(e).__name__}: {str(e)[:60]}", "", False)
            print(f"   ({time.perf_counter() - t0:.1f} s)", flush=True)
    finally:
        if not workdir:
            shutil.rmtree(work, ignore_errors=True)
    results.print_table()
    print(f"\n{'quick' if quick else 'full'} run, {time.perf_counter() - started:.0f} s, {os.cpu_count()} cores, "
          f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}; {PY}")
    return results.failed


def chosen_sections(parser, sections, only):
    """The sections `--only` names (all when None); a parser error for an unknown one."""
    chosen = list(sections) if not only else [s.strip() for s in only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in sections]
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(sections)}")
    return chosen


# --- the CLI and its database --------------------------------------------------------------------

def env_for(db, site_url=NOWHERE):
    """The CLI's environment: our database, and URLs that can only reach this machine. The n8n benches
    measure n8n alone: transcripts off, and YouTube pointed at a closed local port all the same."""
    return {**os.environ, "SCRAPER_DB": str(db), "SCRAPER_API_URL": site_url + "/api",
            "SCRAPER_SITE_URL": site_url, "SCRAPER_YOUTUBE_URL": NOWHERE, "SCRAPER_TRANSCRIPTS": "0"}


def scraper_cmd(*args):
    return [PY, "-m", "scraper", "--log-level", "WARNING", *args]


def remove_db(path):
    """Remove a database and every file beside it (WAL, limiter, locks)."""
    for name in config.build(db_path=str(path)).db_files:
        Path(name).unlink(missing_ok=True)


def fresh_db(path):
    """An empty migrated database at `path` (removing any earlier one and the files beside it)."""
    remove_db(path)
    return store.open_db(str(path))


def build_export_db(path, n):
    """`n` workflows rows made from the stand-in's real detail answers (its 20 definitions), ids and names
    varied; stored through store.upsert, as a run stores them, so each carries its redaction verdict."""
    corpus = Corpus(DATA_DIR, 20, seed=1, faults=[], missing_fraction=0.0)
    templates = [n8n.extract(corpus.detail(tid), "2024-01-01T00:00:00+00:00") for tid in corpus.ids]
    conn = fresh_db(path)
    with store.transaction(conn) as c:
        for i in range(1, n + 1):
            row = dict(templates[i % len(templates)], id=i)
            row["name"] = f"{row['name']} #{i}"
            store.upsert(c, "workflows", row, "id")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return os.path.getsize(path)


# --- memory --------------------------------------------------------------------------------------

class RssSampler(threading.Thread):
    """Peak of the summed RSS of a process and all its children, sampled every `every_s`."""

    def __init__(self, pid, every_s=0.2):
        super().__init__(daemon=True)
        self.proc, self.every_s, self.peak, self.stop = psutil.Process(pid), every_s, 0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                procs = [self.proc, *self.proc.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            total = 0
            for p in procs:
                try:
                    total += p.memory_info().rss
                except psutil.NoSuchProcess:
                    pass  # a worker that just ended or was recycled
            self.peak = max(self.peak, total)
            self.stop.wait(self.every_s)


def timed_peak(cmd, env):
    """(wall s, peak RSS MB) of one command: the kernel's exact peak from /usr/bin/time -v, else psutil."""
    exact = os.access(TIME_V, os.X_OK)
    t0 = time.perf_counter()
    proc = subprocess.Popen([TIME_V, "-v", *cmd] if exact else cmd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    sampler = RssSampler(proc.pid, every_s=0.02)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - t0
    sampler.stop.set()
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd[3:])} exited {proc.returncode}: {err[-500:]}")
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err) if exact else None
    return wall, int(peak.group(1)) / 1024 if peak else sampler.peak / 2**20


# --- several domains at once (issue 21) ------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Domain:
    """One stand-in domain of a multi-domain run: how to start it and the budget the scraper gives it.
    `start(rate, burst, latency_ms)` returns (a client.Standin, {env var: value}); `domain` is the
    politeness domain its jobs get (None: the n8n stand-in's, read from its URL)."""

    name: str
    rate: float
    burst: int
    start: object
    domain: str = None
    walked: bool = False        # its stand-in answers the seed's walk (those requests do not count)


def _n8n(templates, video_every):
    def start(rate, burst, latency_ms):
        site = client.start(templates=templates, rate=rate, burst=burst, latency_ms=latency_ms,
                            video_every=video_every)
        return site, {"SCRAPER_API_URL": site.api_url, "SCRAPER_SITE_URL": site.url}
    return start


def _youtube(rate, burst, latency_ms):
    yt = client.start(youtube=True, rate=rate, burst=burst, latency_ms=latency_ms)
    return yt, {"SCRAPER_YOUTUBE_URL": yt.url}


def _catalogue(events, sources_path):
    """The events calendar on 127.0.0.2 as a catalogue source beside the n8n source, in a sources file
    written at `sources_path` once the stand-in's port is known (plain HTML /events/ pages only)."""
    def start(rate, burst, latency_ms):
        site = client.start(catalogue=True, events=events, rate=rate, burst=burst, latency_ms=latency_ms)
        try:
            _write_sources(sources_path, site.url, rate, burst)
        except BaseException:
            site.stop()     # not yet the caller's to stop
            raise
        return site, {sources.ENV_SOURCES: str(sources_path)}
    return start


def _write_sources(path, url, rate, burst):
    Path(path).write_text(
        '[[source]]\nname = "n8n"\nkind = "n8n"\n\n'
        f'[[source]]\nname = "events"\nkind = "catalogue"\npriority = 2\nrate = {rate:g}\nburst = {burst}\n'
        f'site = "{url}/"\ninclude = ["^/events/"]\ntype = "Event"\nrequired = ["name", "startDate"]\n'
        '[source.fields]\norganizer = "css:.organizer::text"\n')


def default_domains(templates, video_every, n8n_rate=2.0, youtube_rate=0.2, events=None, sources_path=None,
                    events_rate=0.5, events_burst=2):
    """n8n (the templates, every `video_every`th with a video of its own) and YouTube (those videos'
    transcripts, three requests each), at the default rates; with `events` (and a `sources_path` to write
    the sources file at), the events calendar on 127.0.0.2 as a third domain at `events_rate` (about three
    in four of its events are plain /events/ pages, one request each)."""
    domains = [Domain("n8n", n8n_rate, 5, _n8n(templates, video_every), walked=True),
               Domain("youtube", youtube_rate, 2, _youtube, "youtube.com")]
    if events:
        domains.append(Domain("events", events_rate, events_burst, _catalogue(events, sources_path), "127.0.0.2",
                              walked=True))
    return domains


def domains_run(db, domains, workers=4, latency_ms=40.0, transcripts=True):
    """Seed and run the scraper against the stand-ins of `domains`; returns {name: figures}: the
    stand-in's requests, 429s and busiest second, and the times of the requests the run logged."""
    started = []
    try:
        env = {**os.environ, "SCRAPER_DB": str(db), "SCRAPER_TRANSCRIPTS": "1" if transcripts else "0",
               "SCRAPER_YOUTUBE_URL": NOWHERE}
        if transcripts:     # the YouTube stand-in serves YouTube's own robots.txt: ignored knowingly
            env["SCRAPER_ROBOTS_IGNORE"] = "youtube.com"
        for d in domains:
            site, site_env = d.start(d.rate, d.burst, latency_ms)
            started.append(site)
            env.update(site_env)
        remove_db(db)
        budget = [f"--domain-rate={d.domain}={d.rate:g}/{d.burst}" for d in domains if d.domain]
        n8n = domains[0]
        # with a sources file, a bare seed walks every source (n8n's search and the catalogue's sitemaps)
        walk = () if sources.ENV_SOURCES in env else ("--from-search",)
        subprocess.run(scraper_cmd("seed", *walk, "--rate", f"{n8n.rate:g}", "--burst", str(n8n.burst)),
                       env=env, check=True, capture_output=True)
        for d, site in zip(domains, started, strict=True):
            if d.walked:
                site.reset()    # the seed's walk requests do not count
        done = subprocess.run(scraper_cmd("run", "--workers", str(workers), "--rate", f"{n8n.rate:g}",
                                          "--burst", str(n8n.burst), *budget), env=env, capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise RuntimeError(f"scraper run exited {done.returncode}: {done.stderr[-1500:]}")
        conn = store.connect(str(db))
        out = {}
        for d, site in zip(domains, started, strict=True):
            name = d.domain or urls.domain_of(site.url)
            times = [r[0] for r in conn.execute("SELECT at FROM requests WHERE domain = ? ORDER BY at", (name,))]
            spans = conn.execute("SELECT started_at, finished_at FROM jobs WHERE domain = ? "
                                 "AND finished_at IS NOT NULL", (name,)).fetchall()
            out[d.name] = {"rate": d.rate, "burst": d.burst, "times": times, "max_in_flight": most_at_once(spans),
                           **site.stats()}
        conn.close()
        return out
    finally:
        for site in started:
            site.stop()


def most_at_once(spans):
    """The most (start, end) spans open at one time: a domain's most jobs in flight at once (the last
    attempt of each finished job)."""
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def efficiency(times, rate, burst, start=None, end=None):
    """(requests - burst) / rate over the span from the first request to the last (issue 21's measure),
    of the requests between `start` and `end` (a window where every domain had work); a window that
    starts after the first request counts its first as the window's start, no burst taken off."""
    inside = [t for t in times if (start is None or t >= start) and (end is None or t <= end)]
    if len(inside) < 2:
        return None
    spare = burst if start is None else 1
    return (len(inside) - spare) / rate / (inside[-1] - inside[0])


def busy_window(figures):
    """(start, end): from the first request of the last domain to start to the last request of the
    first domain to finish: the time every domain had work."""
    return (max(f["times"][0] for f in figures.values() if f["times"]),
            min(f["times"][-1] for f in figures.values() if f["times"]))
