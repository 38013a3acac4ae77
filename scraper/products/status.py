"""What `scraper status` reports: the run holding the database, counts, rate, ETA, errors by kind, 429s,
each domain's breaker."""

import time

from scraper.db import politeness as politeness_rows
from scraper.policy import progress


def report(queue, now, run=None):
    """The status as one dict (the `status --json` object); `run` is `runstate.current()`."""
    counts = queue.counts()
    last_1m, last_5m = queue.finished_since(now - 60), queue.finished_since(now - 300)
    alive = run is not None and run["alive"]
    window = progress.rate_window_s(now, run["started_at"] if alive else None)
    recent = queue.finished_since(now - window) if window else 0
    p = progress.from_counts(counts, recent, window)
    errors = {name.split(":", 1)[1]: n for name, n in sorted(queue.counters().items()) if name.startswith("error:")}
    domains = {
        name: {
            "state": b.state,
            "failures": b.failures,
            "open_for_s": round(max(0.0, b.open_until - now), 1),
            "paused_for_s": round(max(0.0, b.paused_until - now), 1),
            "failed_probes": b.open_cycles,
            "gave_up": b.gave_up,
            **_rates(queue.conn, name),
        }
        for name, b in queue.domains().items()
    }
    return {
        "run": run, "total": p.total, **counts, "stale_running": 0 if alive else counts["running"],
        "finished_last_1m": last_1m, "finished_last_5m": last_5m,
        "rate_window_s": round(window, 1), "rate_per_min": round(p.rate_per_min, 2),
        "eta_s": None if p.eta_s is None else round(p.eta_s, 1),
        "http_429": errors.get("http_429", 0), "errors_by_kind": errors, "domains": domains,
        "sites": queue.counts_by_site(),
        **mirror_fields(queue.conn),
    }


def _rates(conn, domain):
    """The domain's effective and configured rate and why they differ (`robots`, `adaptive` or None), as the
    last run wrote them in its row (None before any run)."""
    r = politeness_rows.rate_row(conn, domain)
    return {"rate_per_s": r.get("rate_per_s"), "configured_rate_per_s": r.get("configured_rate_per_s"),
            "rate_reason": r.get("rate_reason"), "gave_up_reason": r.get("gave_up_reason")}


def _when(ts):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def run_line(r):
    run = r["run"]
    if run is None:
        return "run       none: no run holds this database"
    if run["pid"] is None:
        return "run       starting (it holds the run lock)"
    if run["alive"]:
        return f"run       pid {run['pid']} since {_when(run['started_at'])}, alive"
    return (f"run       pid {run['pid']} since {_when(run['started_at'])} is gone; its orphaned workers still "
            f"hold the database until they finish their job")


def render(r):
    """The status as the lines `scraper status` prints."""
    rate = f"{r['rate_per_min']:.1f}/min over the last {r['rate_window_s']:g} s" if r["rate_window_s"] else \
        "0.0/min (no run is going)"
    lines = [
        run_line(r),
        f"jobs      {r['total']} total: {r['pending']} pending, {r['running']} running, {r['done']} done, "
        f"{r['failed']} failed, {r['invalid']} invalid",
    ]
    if r["stale_running"]:
        lines.append(f"stale     {r['stale_running']} row(s) marked running belong to no live run; "
                     f"the next `scraper run` takes them back")
    lines += [
        f"finished  {r['finished_last_1m']} in the last minute, {r['finished_last_5m']} in the last 5 minutes",
        f"rate      {rate}, ETA {progress.format_duration(r['eta_s'])}",
        "errors    " + (", ".join(f"{k} {v}" for k, v in r["errors_by_kind"].items()) or "none"),
        f"429s      {r['http_429']}",
        f"listing   last complete walk {r['last_complete_walk'] or 'never'}"
        + (f" ({r['listed']} templates)" if r["listed"] is not None else "") + f"; {r['removed']} removed",
    ]
    for name, c in r["sites"].items():
        lines.append(f"site      {name}: {sum(c.values())} total: {c['pending']} pending, {c['running']} running, "
                     f"{c['done']} done, {c['failed']} failed, {c['invalid']} invalid")
    for name, d in r["domains"].items():
        extra = f", open for {d['open_for_s']:g} s more" if d["open_for_s"] else ""
        extra += f", paused for {d['paused_for_s']:g} s more" if d["paused_for_s"] else ""
        extra += (f"; gave up after {d['failed_probes']} failed probes in a row, its jobs stay pending"
                  if d["gave_up"] else "")
        if d["gave_up_reason"]:
            extra += f"; {d['gave_up_reason']}"
        if d["rate_per_s"] is not None:
            extra += f"; rate {d['rate_per_s']:.3g}/s" + (
                f" ({d['rate_reason']}; configured {d['configured_rate_per_s']:.3g}/s)" if d["rate_reason"] else "")
        lines.append(f"domain    {name}: breaker {d['state']} ({d['failures']} consecutive failures){extra}")
    return "\n".join(lines)


def mirror_fields(conn):
    """The mirror's part of `scraper status`: the last complete walk and the removed count."""
    last = conn.execute("SELECT finished_at, listed FROM walks WHERE complete = 1 ORDER BY id DESC LIMIT 1").fetchone()
    removed = conn.execute("SELECT COUNT(*) FROM workflows WHERE removed_at IS NOT NULL").fetchone()[0]
    return {"last_complete_walk": last and last[0], "listed": last[1] if last else None, "removed": removed}
