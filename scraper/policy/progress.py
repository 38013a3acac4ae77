"""Pure: counts and recent completions -> rate and ETA, and how to show them."""

import math
from dataclasses import dataclass

RATE_WINDOW_S = 60.0        # the rate looks at most this far back
MIN_WINDOW_S = 1.0          # a run a few ms old would otherwise show a rate from one or two jobs


def rate_window_s(now, run_started_at):
    """Seconds the rate looks back over: the shorter of the last minute and the time since the live run
    started (so a run 12 s old is not measured over 60 s); 0 when no run is alive (no rate)."""
    if run_started_at is None:
        return 0.0
    return min(RATE_WINDOW_S, max(MIN_WINDOW_S, now - run_started_at))


@dataclass(frozen=True)
class Progress:
    total: int
    finished: int           # done + failed + invalid
    remaining: int          # pending + running
    recent: int             # finished within the last `window_s` seconds
    window_s: float         # 0: no run is alive, so no rate
    floor_s: float = 0.0    # the least time the remaining jobs need at their domains' rates (`eta_floor_s`)

    @property
    def rate_per_min(self):
        """Completions per minute over the window."""
        return self.recent * 60.0 / self.window_s if self.window_s > 0 else 0.0

    @property
    def eta_s(self):
        """Seconds until the remaining jobs finish at the current rate (None when unknown)."""
        if self.remaining == 0:
            return 0.0
        rate = self.rate_per_min
        if rate <= 0:
            return self.floor_s or None
        # the run's recent pace says little when the jobs left wait on a slow domain (youtube.com at 0.2/s)
        return max(self.remaining * 60.0 / rate, self.floor_s)


def from_counts(counts, recent, window_s, floor_s=0.0):
    finished = counts.get("done", 0) + counts.get("failed", 0) + counts.get("invalid", 0)
    remaining = counts.get("pending", 0) + counts.get("running", 0)
    return Progress(finished + remaining, finished, remaining, recent, window_s, floor_s)


def of_run(own, left, recent, window_s, floor_s=0.0):
    """This run's work, not the database's: `own` {status: jobs} the run finished (done, failed, invalid),
    `left` {status: jobs} of the sources it works (their pending and running jobs are what remains)."""
    finished = own.get("done", 0) + own.get("failed", 0) + own.get("invalid", 0)
    remaining = left.get("pending", 0) + left.get("running", 0)
    return Progress(finished + remaining, finished, remaining, recent, window_s, floor_s)


def eta_floor_s(remaining_by_domain, rates, requests_per_job=None):
    """The least seconds the remaining jobs need: for each domain, its jobs left times the requests a job
    sends there, over its rate (requests/s); the slowest domain decides (domains work side by side).
    `rates`: {domain: requests/s} (a domain without a known rate counts for nothing)."""
    per_job = requests_per_job or {}
    floor = 0.0
    for domain, left in remaining_by_domain.items():
        rate = rates.get(domain)
        if left > 0 and rate and rate > 0:
            floor = max(floor, left * per_job.get(domain, 1) / rate)
    return floor


def format_duration(seconds):
    if seconds is None or not math.isfinite(seconds):
        return "unknown"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def domains_note(domains, now):
    """What the progress line says about domains that are not taking jobs: '' when all are."""
    notes = []
    for name, b in domains.items():
        if b.gave_up:
            notes.append(f"{name}: breaker open, gave up after {b.open_cycles} failed probes (jobs left pending)")
        elif b.state != "closed":
            wait = max(0.0, b.open_until - now)
            notes.append(f"{name}: breaker {b.state.replace('_', '-')}"
                         + (f", next probe in {format_duration(wait)}" if wait else ""))
        elif b.paused_until > now:
            notes.append(f"{name}: paused for {format_duration(b.paused_until - now)} (429)")
    return "; ".join(notes)


def line(p, width=30):
    """`[#####.....] 120/600 (20%) 118.0/min ETA 4m04s`, a bar when width > 0."""
    share = p.finished / p.total if p.total else 1.0
    bar = ""
    if width:
        filled = int(share * width)
        bar = "[" + "#" * filled + "." * (width - filled) + "] "
    return f"{bar}{p.finished}/{p.total} ({share:.0%}) {p.rate_per_min:.1f}/min ETA {format_duration(p.eta_s)}"


def failures_summary(before, after):
    """`12 failed attempts: http_5xx ×8, network ×4` from two readings of the `error:<kind>` counters
    (None when nothing failed in between)."""
    grew = {name.split(":", 1)[1]: after[name] - before.get(name, 0) for name in after}
    grew = {kind: n for kind, n in sorted(grew.items(), key=lambda kv: (-kv[1], kv[0])) if n > 0}
    if not grew:
        return None
    return f"{sum(grew.values())} failed attempts: " + ", ".join(f"{kind} ×{n}" for kind, n in grew.items())
