"""Pure: counts and recent completions -> rate and ETA, and how to show them."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    total: int
    finished: int           # done + failed + invalid
    remaining: int          # pending + running
    last_1m: int
    last_5m: int

    @property
    def rate_per_min(self):
        """Completions per minute: the last minute when it has any, else the 5-minute mean."""
        if self.last_1m:
            return float(self.last_1m)
        return self.last_5m / 5.0

    @property
    def eta_s(self):
        """Seconds until the remaining jobs finish at the current rate (None when unknown)."""
        if self.remaining == 0:
            return 0.0
        rate = self.rate_per_min
        return None if rate <= 0 else self.remaining * 60.0 / rate


def from_counts(counts, last_1m, last_5m):
    finished = counts.get("done", 0) + counts.get("failed", 0) + counts.get("invalid", 0)
    remaining = counts.get("pending", 0) + counts.get("running", 0)
    return Progress(finished + remaining, finished, remaining, last_1m, last_5m)


def format_duration(seconds):
    if seconds is None:
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
