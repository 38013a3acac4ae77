"""What `scraper status` reports: the run holding the database, counts, rate, ETA, errors by kind, 429s,
each domain's breaker."""

import time

from scraper.db import domains as domain_rows
from scraper.db import jobcounts, requestlog, store
from scraper.policy import breaker, progress
from scraper.products import dbstate
from scraper.products import sources as sources_mod

SLOT_WAIT_WINDOW_S = 60     # `slot_wait_s` sums the waits of the requests sent in the last minute


def report(queue, now, run=None, runs=None, settings=None, requests_per_job=None):
    """The status as one dict (the `status --json` object); `run` is `runstate.current()` (the newest live
    run), `runs` is `runstate.runs()` (every live run: several share a PostgreSQL database). `settings`
    (its sources) decides whether the n8n library and its domains are spoken of (scraper.products.scope);
    `requests_per_job` ({domain: n}) sharpens the ETA's floor (the jobs left at their domains' rates)."""
    from scraper.products import scope as scope_mod
    scope = scope_mod.of(queue.conn, settings)
    counted = jobcounts.rows(queue.conn)
    by_status, by_site, by_source = grouped_counts(counted)
    counts = by_status
    last_1m, last_5m = queue.finished_since(now - 60), queue.finished_since(now - 300)
    alive = run is not None and run["alive"]
    window = progress.rate_window_s(now, run["started_at"] if alive else None)
    recent = queue.finished_since(now - window) if window else 0
    from scraper.db import sources_report
    floor = progress.eta_floor_s(sources_report.remaining_by_domain(queue.conn),
                                 sources_report.rates_by_domain(queue.conn), requests_per_job) if alive else 0.0
    p = progress.from_counts(counts, recent, window, floor)
    every = queue.counters()
    errors = {name.split(":", 1)[1]: n for name, n in sorted(every.items()) if name.startswith("error:")}
    from scraper.db import runrecord, sources_report
    latest = runrecord.latest_id(queue.conn)
    errors_run = sources_report.run_errors(queue.conn, latest) if latest is not None else {}
    breakers = queue.domains()
    in_flight = {d: c["running"] for d, c in jobcounts.by(counted, "domain").items() if c["running"]}
    waits = requestlog.slot_waits(queue.conn, now - SLOT_WAIT_WINDOW_S)
    domains = {}
    for name in sorted(d for d in {*breakers, *in_flight, *waits} if scope.domains is None or d in scope.domains):
        b = breakers.get(name, breaker.Breaker())
        domains[name] = {
            "state": b.state,
            "failures": b.failures,
            "open_for_s": round(max(0.0, b.open_until - now), 1),
            "paused_for_s": round(max(0.0, b.paused_until - now), 1),
            "failed_probes": b.open_cycles,
            "gave_up": b.gave_up,
            "in_flight": in_flight.get(name, 0),
            "slot_wait_s": round(waits.get(name, 0.0), 1),
            **_rates(queue.conn, name),
        }
    return {
        "run": run, "runs": runs if runs is not None else [],
        "total": p.total, **counts, "stale_running": 0 if alive else counts["running"],
        "finished_last_1m": last_1m, "finished_last_5m": last_5m,
        "rate_window_s": round(window, 1), "rate_per_min": round(p.rate_per_min, 2),
        "eta_s": None if p.eta_s is None else round(p.eta_s, 1),
        "http_429": errors.get("http_429", 0), "errors_by_kind": errors, "domains": domains,
        "errors_this_run": errors_run,
        "sites": by_site,
        "sources": by_source,
        "fetch": _fetch_summary(queue.conn),
        **mirror_fields(queue.conn, _active(by_site.get("n8n"))),
        "last_notification": store.last_notification(queue.conn),
        "n8n": scope.n8n, "items": scope.items,
        "proxies": proxies(queue.conn, now, settings),
        "endpoints": endpoints(queue.conn, now, settings),
        # per source: what validators earned, as `sources --json` shows it
        "validators": sources_mod.revalidation(queue.conn)[0],
        "browser_sessions": browser_sessions(queue.conn, latest, now),
        "clock_skew_s": clock_skew_s(queue.conn),
        "db_outages": every.get("db_outages", 0), "db_outage_s": every.get("db_outage_s", 0),
        "database": dbstate.report(queue, now, settings, run),
    }


def of_database(conn, now, settings):
    """The `status --json` object of the database behind `conn` at `now`: its live runs found by the run lock
    beside it (`settings.lock_path`) or, on PostgreSQL, by their heartbeats."""
    from scraper.db import runstate
    from scraper.db.queue import Queue
    return report(Queue(conn), now, runstate.current(conn, settings.lock_path, now),
                  runstate.runs(conn, settings.lock_path, now), settings=settings)


def browser_sessions(conn, run_id, now):
    """The remote browser sessions of run `run_id` (the current or the last), as `status --json` shows them:
    [{provider, endpoint (as shown), session (the provider's id), worker, open, uptime_s, pages, errors (the
    session's own: crash, disconnect, protocol), errors_by_kind, load (pages under way, of 1)}]."""
    from scraper.db import browsersessions
    if run_id is None:
        return []
    out = []
    for r in browsersessions.of_run(conn, run_id):
        is_open = r["closed_at"] is None
        errors = {kind: r[f"errors_{kind}"] for kind in browsersessions.ERRORS}
        out.append({"provider": r["provider"], "endpoint": r["endpoint"], "session": r["provider_session"],
                    "worker": r["worker"], "open": is_open,
                    "uptime_s": round(max(0.0, (now if is_open else r["closed_at"]) - r["opened_at"]), 1),
                    "pages": r["pages"], "errors": sum(errors.values()), "errors_by_kind": errors,
                    "load": float(r["active"]) if is_open else 0.0})
    return out


def clock_skew_s(conn):
    """How far this machine's wall clock is ahead of the database's (PostgreSQL; None on SQLite, whose one
    machine has one clock). The run decides on the database's clock, so a skew is shown, not suffered."""
    return round(conn.skew(), 1) if store.is_postgres(conn) else None


def skew_line(skew_s):
    """The `clock` line of a PostgreSQL database's status."""
    if abs(skew_s) < 1.0:
        return "clock     this machine's clock agrees with the database's (within 1 s)"
    way = "ahead of" if skew_s > 0 else "behind"
    return (f"clock     this machine's clock is {progress.format_duration(abs(skew_s))} {way} the database's; "
            f"leases, pauses and rate slots follow the database's")


def endpoints(conn, now, settings=None):
    """The webhook endpoints, then the ETL API, as `status --json` shows them (db/deliveries.report): [{url
    (without credentials), cursor, backlog, oldest_s, last_error, disabled, ...}]."""
    from scraper.db import deliveries, schema
    if settings is None or not (settings.webhooks or settings.etl_url) \
            or not schema.has_table(conn, "webhook_endpoints"):
        return []
    shown = [e.shown for e in settings.webhooks]
    if settings.etl_url:
        from scraper.mirror import etl  # imports requests: only where an ETL API is configured (startup)
        shown.append(etl.endpoint(settings).shown)
    return deliveries.report(conn, shown, now)


def proxies(conn, now, settings=None):
    """The proxy pool as `status --json` shows it: [{url, state, requests, failures, until, banned_domains}],
    each URL as shown (credentials as ***): those of the settings, and any other the database has seen."""
    from scraper.db import proxies as proxy_rows
    listed = [] if settings is None else [str(p) for p in
                                          (*settings.proxies, *(p for src in settings.sources for p in src.proxies))
                                          if not p.direct]
    health = proxy_rows.read(conn, listed or None) if listed else proxy_rows.read(conn)
    return [{"url": url, "state": h.state, "requests": h.requests, "failures": h.failures,
             "until": _iso(h.until) if h.state != "good" else None,
             "banned_domains": sorted(d for d, until in h.bans.items() if until > now)}
            for url, h in sorted(health.items())]


def grouped_counts(counted):
    """({status: rows}, {site: {status: rows}}, {source: {status: rows}}), every status present (zero when
    none), of `jobcounts.rows` (kept counts on SQLite: no walk of a million jobs)."""
    return (jobcounts.by_status(counted), dict(sorted(jobcounts.by(counted, "site").items())),
            dict(sorted(jobcounts.by(counted, "source").items())))


def _active(counts):
    return None if counts is None else counts["pending"] + counts["running"]


def _rates(conn, domain):
    """The domain's effective and configured rate and why they differ (`robots`, `adaptive` or None), as the
    last run wrote them in its row (None before any run)."""
    r = domain_rows.rate_row(conn, domain)
    return {"rate_per_s": r.get("rate_per_s"), "configured_rate_per_s": r.get("configured_rate_per_s"),
            "rate_reason": r.get("rate_reason"), "gave_up_reason": r.get("gave_up_reason")}


def _iso(ts):
    """ISO 8601 in UTC, as the JSON of other commands writes times."""
    import datetime
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(timespec="seconds")


def _when(ts):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def run_line(r):
    if len(r.get("runs") or ()) > 1:
        return "runs      " + "; ".join(f"pid {x['pid']} on {x['host']} since {_when(x['started_at'])}, "
                                        f"{x['workers']} workers" for x in r["runs"])
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
    n8n = r.get("n8n", True)
    lines = [run_line(r)]
    if n8n:
        lines.append(f"stored    {r['stored']['live'] + r['stored']['removed']} template(s) in the mirror: "
                     f"{r['stored']['live']} live, {r['stored']['removed']} removed (kept whatever their jobs do)")
    for name, c in (r.get("items") or {}).items():
        lines.append(f"stored    {c['live'] + c['removed']} item(s) of {name}: {c['live']} live, "
                     f"{c['removed']} removed")
    lines.append(f"jobs      {r['total']} total: {r['pending']} pending, {r['running']} running, {r['done']} done, "
                 f"{r['failed']} failed, {r['invalid']} invalid")
    if r["refreshing"]:
        lines.append(f"refresh   {r['refreshing']} pending or running job(s) re-fetch a stored template; "
                     f"its stored data stays until the new answer replaces it")
    if r["stale_running"]:
        lines.append(f"stale     {r['stale_running']} row(s) marked running belong to no live run; "
                     f"the next `scraper run` takes them back")
    lines += [
        f"finished  {r['finished_last_1m']} in the last minute, {r['finished_last_5m']} in the last 5 minutes",
        f"rate      {rate}, ETA {progress.format_duration(r['eta_s'])}",
        "errors    " + _errors_line(r),
        f"429s      {r['http_429']}",
    ]
    if n8n:
        lines.append(f"listing   last complete walk {r['last_complete_walk'] or 'never'}"
                     + (f" ({r['listed']} templates)" if r["listed"] is not None else "") + f"; {r['removed']} removed")
    n = r.get("last_notification")
    if r.get("clock_skew_s") is not None:
        lines.append(skew_line(r["clock_skew_s"]))
    if r.get("db_outages"):
        lines.append(f"database  {r['db_outages']} outage(s) of the database lived through by runs, "
                     f"{progress.format_duration(r['db_outage_s'])} in all (restarts, failovers, a silent network: "
                     f"see the run's log)")
    lines.append("notified  " + ("none sent" if n is None else
                                 f"{n['kind']} at {_when(n['at'])}, {'delivered' if n['ok'] else 'FAILED'}"))
    for name, c in r["sites"].items():
        lines.append(f"site      {name}: {sum(c.values())} total: {c['pending']} pending, {c['running']} running, "
                     f"{c['done']} done, {c['failed']} failed, {c['invalid']} invalid")
    for name, c in r["sources"].items():
        lines.append(f"source    {name}: {sum(c.values())} total: {c['pending']} pending, {c['running']} running, "
                     f"{c['done']} done, {c['failed']} failed, {c['invalid']} invalid")
    for name, v in (r.get("validators") or {}).items():
        lines.append(f"validate  {name}: {v['state']}; {v['not_modified']} of {v['conditional']} conditional "
                     f"request(s) answered 304, {v['unchanged_200']} unchanged 200(s), {v['bytes_saved']:,} bytes "
                     f"saved")
    for name, f in r.get("fetch", {}).items():
        learnt = ", ".join(f"{p['pattern']} {p['verdict']}" for p in f["patterns"])
        lines.append(f"fetch     {name}: {f['http']} page(s) by HTTP, {f['browser']} by browser, {f['rechecks']} "
                     f"re-check(s), {f['changes']} verdict change(s); {learnt}")
    pool = r.get("proxies") or []
    if pool:
        states = {}
        for p in pool:
            states[p["state"]] = states.get(p["state"], 0) + 1
        banned = sum(1 for p in pool if p["banned_domains"])
        lines.append(f"proxies   {len(pool)}: " + ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
                     + (f"; {banned} banned for some domain" if banned else ""))
        for p in pool:
            extra = f" until {p['until'].replace('T', ' ')}" if p["until"] else ""
            extra += f"; banned for {', '.join(p['banned_domains'])}" if p["banned_domains"] else ""
            lines.append(f"proxy     {p['url']}: {p['state']}{extra}; {p['requests']} request(s), "
                         f"{p['failures']} failure(s)")
    sessions = r.get("browser_sessions") or []
    if sessions:
        shown = ", ".join(dict.fromkeys(b["endpoint"] for b in sessions))
        lines.append(f"browser   {len(sessions)} remote session(s) of the run on {shown}: "
                     f"{sum(b['open'] for b in sessions)} open, {sum(b['pages'] for b in sessions)} page(s), "
                     f"{sum(b['errors'] for b in sessions)} session error(s)")
    for e in r.get("endpoints") or []:
        lines.append(f"webhook   {e['url']}: " + ("DISABLED; " if e["disabled"] else "")
                     + f"cursor {e['cursor']}, {e['backlog']} event(s) waiting"
                     + (f" (oldest {e['oldest_s']} s)" if e["oldest_s"] is not None else "")
                     + (f"; last error: {e['last_error']}" if e["last_error"] else ""))
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
        lines.append(f"domain    {name}: {d['in_flight']} in flight, {d['slot_wait_s']:g} s waiting for its slot in "
                     f"the last minute; breaker {d['state']} ({d['failures']} consecutive failures){extra}")
    lines += dbstate.lines(r.get("database"))
    return "\n".join(lines)


def _errors_line(r):
    """This run's failed requests by kind (the latest run's, live or not), then the all-time counts."""
    every = ", ".join(f"{k} {v}" for k, v in r["errors_by_kind"].items()) or "none"
    if "errors_this_run" not in r:
        return every
    this = ", ".join(f"{k} {v}" for k, v in r["errors_this_run"].items()) or "none"
    return f"latest run: {this}; all time: {every}"


def mirror_fields(conn, active=None):
    """The mirror's part of `scraper status`: the last complete walk and the removed count. `active`: the
    n8n jobs pending or running, when known."""
    from scraper.db import listing, templates
    last = listing.last_complete_walk(conn)
    # a pending or running job whose template is stored already re-fetches it: its data stays meanwhile
    live, removed, refreshing = templates.stored_and_refreshing(conn, active)
    return {"last_complete_walk": last and last[0], "listed": last[1] if last else None, "removed": removed,
            "stored": {"live": live, "removed": removed}, "refreshing": refreshing}


def _fetch_summary(conn):
    # imported here: the `auto` rules it loads cost `status` a tenth of its start-up (bench_startup)
    from scraper.db import fetchlearn
    return fetchlearn.summary(conn)
