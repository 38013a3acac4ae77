"""What `scraper status` reports: counts, rate, ETA, errors by kind, 429s, each domain's breaker."""

from . import progress


def report(queue, now):
    """The status as one dict (the `status --json` object)."""
    counts = queue.counts()
    last_1m, last_5m = queue.finished_since(now - 60), queue.finished_since(now - 300)
    p = progress.from_counts(counts, last_1m, last_5m)
    errors = {name.split(":", 1)[1]: n for name, n in sorted(queue.counters().items()) if name.startswith("error:")}
    domains = {
        name: {
            "state": b.state,
            "failures": b.failures,
            "open_for_s": round(max(0.0, b.open_until - now), 1),
            "paused_for_s": round(max(0.0, b.paused_until - now), 1),
            "failed_probes": b.open_cycles,
            "gave_up": b.gave_up,
        }
        for name, b in queue.domains().items()
    }
    return {
        "total": p.total, **counts, "finished_last_1m": last_1m, "finished_last_5m": last_5m,
        "rate_per_min": round(p.rate_per_min, 2),
        "eta_s": None if p.eta_s is None else round(p.eta_s, 1),
        "http_429": errors.get("http_429", 0), "errors_by_kind": errors, "domains": domains,
    }


def render(r):
    """The status as the lines `scraper status` prints."""
    lines = [
        f"jobs      {r['total']} total: {r['pending']} pending, {r['running']} running, {r['done']} done, "
        f"{r['failed']} failed, {r['invalid']} invalid",
        f"finished  {r['finished_last_1m']} in the last minute, {r['finished_last_5m']} in the last 5 minutes",
        f"rate      {r['rate_per_min']:.1f}/min, ETA {progress.format_duration(r['eta_s'])}",
        "errors    " + (", ".join(f"{k} {v}" for k, v in r["errors_by_kind"].items()) or "none"),
        f"429s      {r['http_429']}",
    ]
    for name, d in r["domains"].items():
        extra = f", open for {d['open_for_s']:g} s more" if d["open_for_s"] else ""
        extra += f", paused for {d['paused_for_s']:g} s more" if d["paused_for_s"] else ""
        extra += (f"; gave up after {d['failed_probes']} failed probes in a row, its jobs stay pending"
                  if d["gave_up"] else "")
        lines.append(f"domain    {name}: breaker {d['state']} ({d['failures']} consecutive failures){extra}")
    return "\n".join(lines)
