"""`scraper serve`'s dashboard (`/dashboard`): the live run and the history of one database on one page that
refreshes itself, every figure from a query of `db/` that another command already shows.

- The live run is `scraper status --json`'s object as it is (products/status), so the page and the command
  agree by construction; the rate sent to each domain is counted over the status's own rate window
  (db/requestlog.sent_since), against the rate the run wrote for the domain and the configured one.
- The history is db/dashboard's three statements (runs, changes per day, the catalogue over time), each
  also a canned query of Datasette, linked under its chart with the page's filters; each source's
  freshness and its items are `scraper sources --json`'s (products/sources).
- No dashboard plugin: datasette-dashboards draws charts from SQL it sends to Datasette's `?sql=` API, which
  `serve` refuses (SQL would reach the raw answers and the stored workflows), and the live figures (the
  ETA, the rate window) are policy in Python, not one statement. The report's SVG charts draw both.
- `figures()` is the JSON the page fetches (`/dashboard.json`); `PAGE` draws it with the charts of
  products/charts, inline: the page loads nothing but itself and its JSON from the server.
"""

import datetime
import re

from scraper.base.errors import ConfigError
from scraper.db import dashboard, requestlog, runrecord
from scraper.db import walklog as walks
from scraper.products import charts, sources, status

LIVE_REFRESH_S = 5        # the page asks again this often while a run is live
IDLE_REFRESH_S = 30       # and this often otherwise, to see the next run start
CHANGES = ("added", "changed", "removed", "restored")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def filters(source="", since="", until=""):
    """The page's filters checked: (source, since, until), empty for none; dates as YYYY-MM-DD. A date that
    is not one is a ConfigError of one sentence."""
    for name, value in (("since", since), ("until", until)):
        if value and not (_DAY.fullmatch(value) and _is_date(value)):
            raise ConfigError(f"{name} must be a date as YYYY-MM-DD (or empty), not {value!r}.")
    if since and until and since > until:
        raise ConfigError(f"since ({since}) is after until ({until}).")
    return source.strip(), since, until


def _is_date(text):
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def figures(conn, now, settings, db_name, source="", since="", until=""):
    """Every figure of the page as one JSON-ready dict: `status` (the `status --json` object), `rates` per
    domain, the history (`runs`, `changes`, `catalogue`), `sources` (freshness), and each chart's query."""
    source, since, until = filters(source, since, until)
    st = status.of_database(conn, now, settings)
    live = bool(st["run"] and st["run"]["alive"])
    args = {"source": source, "since": since, "until": until}
    return {
        "generated_at": walks.iso(now),
        "live": live,
        "refresh_s": LIVE_REFRESH_S if live else IDLE_REFRESH_S,
        "filters": args,
        "status": st,
        "workers": sum(r["workers"] or 0 for r in st["runs"]),
        # each live run's pool against its own ceiling (several share a PostgreSQL database)
        "memory": [{"pid": r["pid"], "host": r["host"], "memory_mb": r.get("memory_mb"),
                    "memory_limit_mb": r.get("memory_limit_mb")} for r in st["runs"]],
        "rates": _rates(conn, now, st),
        "runs": [_run(r, now) for r in dashboard.runs(conn, **args)],
        "changes": _changes(dashboard.changes(conn, **args)),
        "catalogue": _catalogue(dashboard.catalogue(conn, **args)),
        "sources": [{k: s[k] for k in ("name", "kind", "enabled", "every", "last_walk_at", "next_due_at", "items")}
                    for s in sources.report(conn, settings, now) if not source or s["name"] == source],
        "queries": queries(db_name, args),
    }


def queries(db_name, args):
    """{chart: {sql, url}}: each history chart's statement and its canned query in Datasette with the page's
    filters; the live charts link the status object itself."""
    from urllib.parse import urlencode
    found = {name: {"title": q["title"], "sql": q["sql"], "url": f"/{db_name}/{name}?{urlencode(args)}"}
             for name, q in dashboard.QUERIES.items()}
    found["status"] = {"title": "scraper status --json", "sql": None, "url": "/dashboard.json"}
    found["walks"] = {"title": "Walks", "sql": None, "url": f"/{db_name}/source_walks?_sort_desc=finished_at"}
    return found


def _rates(conn, now, st):
    """{domain: {sent_per_s, rate_per_s, configured_rate_per_s}}: what was sent to each domain over the
    status's rate window, against the run's effective rate and the configured one."""
    window = st["rate_window_s"]
    sent = requestlog.sent_since(conn, now - window) if window else {}
    names = sorted(set(st["domains"]) | set(sent))
    return {d: {"sent_per_s": round(sent.get(d, 0) / window, 3) if window else 0.0,
                "rate_per_s": st["domains"].get(d, {}).get("rate_per_s"),
                "configured_rate_per_s": st["domains"].get(d, {}).get("configured_rate_per_s")} for d in names}


def _run(r, now):
    end = r["finished_at"]
    if end is None:         # live or died: up to its last heartbeat
        end = max(r["heartbeat_at"] or r["started_at"], r["started_at"])
    return {**r, "started": walks.iso(r["started_at"]), "duration_s": round(end - r["started_at"], 1),
            "status": runrecord.status(r["exit_code"], r["finished_at"], r["heartbeat_at"], now)}


def _changes(rows):
    """{days, added, changed, removed, restored}: each kind's count per day, the sources summed."""
    days = sorted({r["day"] for r in rows})
    at = {d: i for i, d in enumerate(days)}
    out = {"days": days, **{c: [0] * len(days) for c in CHANGES}}
    for r in rows:
        out[r["change"]][at[r["day"]]] += r["n"]
    return out


def _catalogue(rows):
    """{days, series: {source: [live at the end of each day]}}, each source's count carried over the days it
    did not change (None before its first)."""
    days = sorted({r["day"] for r in rows})
    at = {d: i for i, d in enumerate(days)}
    series = {}
    for r in rows:
        series.setdefault(r["source"], [None] * len(days))[at[r["day"]]] = r["live"]
    for values in series.values():
        for i in range(1, len(values)):
            if values[i] is None:
                values[i] = values[i - 1]
    return {"days": days, "series": series}


def page():
    """The dashboard's HTML: the filters, the charts' boxes and the script that fetches /dashboard.json and
    draws it, again every `refresh_s`."""
    return PAGE.replace("@@CHART_STYLE@@", charts.STYLE).replace("@@CHART_SCRIPT@@", charts.SCRIPT)


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>scraper dashboard</title>
<link rel="icon" href="data:,">
<style>
@@CHART_STYLE@@
.tiles { display: flex; flex-wrap: wrap; gap: 12px; margin: 12px 0; }
.tile { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 90px; }
.tile b { display: block; font-size: 22px; } .tile span { font-size: 12px; color: #666; }
form { margin: 8px 0; } label { margin-right: 12px; }
details { font-size: 12px; margin-top: 4px; } pre { white-space: pre-wrap; font-size: 11px; }
</style></head>
<body>
<h1>scraper dashboard</h1>
<p class="muted"><span id="when">loading…</span> <span id="live"></span> Read-only; the figures of the live run are
<a href="/dashboard.json">scraper status --json</a>'s own.</p>
<h2>Live run</h2>
<div class="tiles" id="tiles"></div>
<div class="grid">
<figure><h2>Jobs by status</h2><div class="chart" id="chart-jobs"></div>
<figcaption>Jobs of the database by status (<code>status --json</code>: pending, running, done, failed, invalid). <a class="q" data-q="status">query</a></figcaption></figure>
<figure><h2>Rate per domain against its limit</h2><div class="chart" id="chart-rate"></div>
<figcaption id="rate-caption">Requests per second sent to each domain over the status's rate window, against the rate the run uses and the configured one. <a class="q" data-q="status">query</a></figcaption></figure>
<figure><h2>Errors of this run by kind</h2><div class="chart" id="chart-errors"></div>
<figcaption>Failed requests of the latest run by kind (429s among them). <a class="q" data-q="status">query</a></figcaption></figure>
</div>
<h2>Domains: breaker and slow-down</h2>
<table id="domains-table"><thead><tr><th>domain</th><th>breaker</th><th>failures</th><th>open for</th><th>paused for</th><th>in flight</th><th>rate</th><th>why</th><th>gave up</th></tr></thead><tbody></tbody></table>
<h2>Proxies</h2>
<table id="proxies-table"><thead><tr><th>proxy</th><th>state</th><th>until</th><th>requests</th><th>failures</th><th>banned for</th></tr></thead><tbody></tbody></table>
<h2>History</h2>
<form id="filters">
<label>source <select name="source" id="f-source"><option value="">all</option></select></label>
<label>since <input type="date" name="since" id="f-since"></label>
<label>until <input type="date" name="until" id="f-until"></label>
<button type="submit">apply</button> <span id="filter-error" class="muted"></span>
</form>
<div class="grid">
<figure><h2>Runs over time</h2><div class="chart" id="chart-runs"></div>
<figcaption>Jobs each run finished (done, failed), by its start. <a class="q" data-q="dashboard_runs">query</a><details><summary>SQL</summary><pre data-sql="dashboard_runs"></pre></details></figcaption></figure>
<figure><h2>Run durations</h2><div class="chart" id="chart-durations"></div>
<figcaption>Seconds each run lasted (a live one: so far). <a class="q" data-q="dashboard_runs">query</a></figcaption></figure>
<figure><h2>Changes per day</h2><div class="chart" id="chart-changes"></div>
<figcaption>Templates and items added, changed and removed each day (UTC). <a class="q" data-q="dashboard_changes">query</a><details><summary>SQL</summary><pre data-sql="dashboard_changes"></pre></details></figcaption></figure>
<figure><h2>Catalogue over time</h2><div class="chart" id="chart-catalogue"></div>
<figcaption>Live templates or items of each source, from the change records. <a class="q" data-q="dashboard_catalogue">query</a><details><summary>SQL</summary><pre data-sql="dashboard_catalogue"></pre></details></figcaption></figure>
</div>
<h2>Runs</h2>
<p class="muted" id="runs-shown"></p>
<table id="runs-table"><thead><tr><th>run</th><th>started</th><th>duration</th><th>workers</th><th>done</th><th>failed</th><th>invalid</th><th>exit</th><th>status</th></tr></thead><tbody></tbody></table>
<h2>Sources: freshness</h2>
<table id="sources-table"><thead><tr><th>source</th><th>kind</th><th>every</th><th>last walk</th><th>next due</th><th>live</th><th>removed</th></tr></thead><tbody></tbody></table>
<p><a class="q" data-q="walks">every walk in Datasette</a></p>
<script>
"use strict";
@@CHART_SCRIPT@@
const RUNS_SHOWN = 100;     // rows of the runs table; the charts and the query have them all
function dur(s) {
  if (s === null || s === undefined) return "unknown";
  s = Math.round(s);
  return s >= 3600 ? Math.floor(s / 3600) + " h " + Math.floor(s % 3600 / 60) + " min" : s >= 60 ? Math.floor(s / 60) + " min " + s % 60 + " s" : s + " s";
}
function fill(id, rows) {
  const tb = document.querySelector("#" + id + " tbody");
  tb.replaceChildren();
  for (const cells of rows) {
    const tr = tb.insertRow();
    for (const c of cells) tr.insertCell().textContent = c === null || c === undefined ? "-" : String(c);
  }
  if (!rows.length) tb.insertRow().insertCell().textContent = "none";
}
function tile(label, value, id) {
  const t = document.createElement("div"), b = document.createElement("b"), s = document.createElement("span");
  t.className = "tile"; b.textContent = String(value); s.textContent = label; b.id = "tile-" + id;
  t.append(b, s); return t;
}
function clear(ids) { for (const id of ids) document.getElementById(id).replaceChildren(); }
function params() {
  const p = new URLSearchParams(location.search), out = new URLSearchParams();
  for (const k of ["source", "since", "until"]) if (p.get(k)) out.set(k, p.get(k));
  return out;
}
function draw(D) {
  const S = D.status;
  document.body.dataset.live = D.live ? "yes" : "no";
  document.getElementById("when").textContent = "Figures of " + D.generated_at + ".";
  document.getElementById("live").textContent = D.live ? "A run is live: refreshing every " + D.refresh_s + " s." : "No run is live (checked every " + D.refresh_s + " s).";
  const tiles = document.getElementById("tiles");
  tiles.replaceChildren(tile("done", S.done, "done"), tile("pending", S.pending, "pending"), tile("running", S.running, "running"),
    tile("failed", S.failed, "failed"), tile("invalid", S.invalid, "invalid"), tile("per minute", S.rate_per_min, "rate"),
    tile("ETA", S.eta_s === null ? "-" : dur(S.eta_s), "eta"), tile("429s this run", (S.errors_this_run || {}).http_429 || 0, "429"), tile("429s all time", S.http_429, "429-all"),
    tile("workers", D.live ? D.workers : 0, "workers"),
    ...D.memory.map((m, i) => tile("memory (PSS) of the ceiling" + (D.memory.length > 1 ? ", pid " + m.pid : ""),
      (m.memory_mb === null ? "-" : Math.round(m.memory_mb)) + " / " + (m.memory_limit_mb === null ? "-" : m.memory_limit_mb) + " MB", "memory" + (i || ""))));
  clear(["chart-jobs", "chart-rate", "chart-errors", "chart-runs", "chart-durations", "chart-changes", "chart-catalogue"]);
  const st = ["pending", "running", "done", "failed", "invalid"];
  barChart("chart-jobs", st, st.map(k => S[k]));
  const doms = Object.keys(D.rates);
  groupChart("chart-rate", doms, {"sent /s": doms.map(d => D.rates[d].sent_per_s), "run's rate /s": doms.map(d => D.rates[d].rate_per_s || 0),
                                  "configured /s": doms.map(d => D.rates[d].configured_rate_per_s || 0)});
  barChart("chart-errors", Object.keys(S.errors_this_run || {}), Object.values(S.errors_this_run || {}), "error");
  fill("domains-table", Object.entries(S.domains).map(([d, x]) => [d, x.state, x.failures, x.open_for_s ? x.open_for_s + " s" : "", x.paused_for_s ? x.paused_for_s + " s" : "",
    x.in_flight, x.rate_per_s === null ? null : x.rate_per_s + "/s", x.rate_reason, x.gave_up ? (x.gave_up_reason || "yes") : ""]));
  fill("proxies-table", S.proxies.map(p => [p.url, p.state, p.until, p.requests, p.failures, p.banned_domains.join(", ")]));
  const R = D.runs;
  groupChart("chart-runs", R.map(r => "run " + r.id), {done: R.map(r => r.done), failed: R.map(r => r.failed)});
  barChart("chart-durations", R.map(r => "run " + r.id), R.map(r => r.duration_s), "run");
  const C = D.changes;
  groupChart("chart-changes", C.days, {added: C.added, changed: C.changed, removed: C.removed});
  linesChart("chart-catalogue", D.catalogue.days, D.catalogue.series);
  document.getElementById("runs-shown").textContent = R.length > RUNS_SHOWN ? "The newest " + RUNS_SHOWN + " of " + R.length + "; the query lists every one." : "";
  fill("runs-table", R.slice(-RUNS_SHOWN).reverse().map(r => [r.id, r.started, dur(r.duration_s), r.workers, r.done, r.failed, r.invalid, r.exit_code, r.status]));
  fill("sources-table", D.sources.map(s => [s.name, s.kind, s.every, s.last_walk_at || "never", s.next_due_at, s.items.live, s.items.removed]));
  const sel = document.getElementById("f-source"), have = new Set([...sel.options].map(o => o.value));
  for (const name of [...Object.keys(S.sources), ...D.sources.map(s => s.name)])
    if (!have.has(name)) { have.add(name); const o = document.createElement("option"); o.value = o.textContent = name; sel.append(o); }
  sel.value = D.filters.source; document.getElementById("f-since").value = D.filters.since; document.getElementById("f-until").value = D.filters.until;
  for (const a of document.querySelectorAll("a.q")) a.href = D.queries[a.dataset.q].url;
  for (const pre of document.querySelectorAll("pre[data-sql]")) pre.textContent = D.queries[pre.dataset.sql].sql;
  document.body.dataset.drawn = String(Number(document.body.dataset.drawn || 0) + 1);
}
let timer = null;
async function load() {
  clearTimeout(timer);
  let wait = 30;
  try {
    const r = await fetch("/dashboard.json?" + params().toString());
    const D = await r.json();
    if (!r.ok) { document.getElementById("filter-error").textContent = D.error; }
    else { draw(D); wait = D.refresh_s; }
  } catch (e) {
    document.getElementById("when").textContent = "The server did not answer; trying again.";
  }
  timer = setTimeout(load, wait * 1000);
}
document.getElementById("filters").addEventListener("submit", ev => {
  ev.preventDefault();
  const f = new FormData(ev.target), p = new URLSearchParams();
  for (const [k, v] of f) if (v) p.set(k, v);
  history.replaceState(null, "", "?" + p.toString());
  load();
});
load();
</script>
</body></html>
"""  # noqa: E501 - the page's CSS and script, one rule or statement a line
