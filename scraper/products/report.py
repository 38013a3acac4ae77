"""`scraper report`: one self-contained HTML file with charts of the runs and the data.

`gather()` reads the figures from the database (the `requests` log, `runs`, `jobs`, `counters`,
`workflows`); `render()` puts them into the page, where inline JavaScript draws each chart as SVG.
Nothing is fetched from the network to view it: no external script, style, font or image.
"""

import datetime
import html
import json
import math

from scraper.base.errors import ConfigError
from scraper.base.urls import domain_of
from scraper.db import counters, fetchlearn, reports, runrecord, sources_report, store
from scraper.db.queue import Queue
from scraper.products import charts, output, stats

MAX_BUCKETS = 120            # points of a time series; the bucket width follows the run's length
TOP_NODE_TYPES = 20
ANSWERED = ("ok", "robots_4xx")   # a robots.txt that answered 4xx (no rules) is an answer, not an error
LATENCY_BINS_MS = (10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)    # upper edges; one more bin above


def gather(conn, now, run_id=None, settings=None):
    """Every figure of the report, as one JSON-ready dict. `run_id`: the run the time charts show
    (default the latest); ConfigError if there is no such run. `settings` (its sources) decides whether the
    n8n library is spoken of (scraper.products.scope)."""
    from scraper.products import scope as scope_mod
    scope = scope_mod.of(conn, settings)
    runs = [_run_figures(conn, r, now) for r in runrecord.every(conn)]
    for run, later in zip(runs, runs[1:], strict=False):
        if run["state"] == "killed":
            run["resumed_by"] = later["id"]     # its jobs came back to the next run (leases, orphans)
    chosen = None
    if run_id is not None:
        chosen = next((r for r in runs if r["id"] == run_id), None)
        if chosen is None:
            raise ConfigError(f"there is no run {run_id} in this database; `scraper report` without --run "
                              f"shows the latest.")
    elif runs:
        chosen = runs[-1]
    st = stats.report(conn)
    return {
        "generated_at": _iso(now),
        "jobs": Queue(conn).counts(),
        "jobs_by_source": sources_report.jobs_by_source(conn),
        "fetch": fetchlearn.summary(conn),
        "templates": st["templates"],
        "runs": runs,
        "run": chosen and _run_series(conn, chosen),
        "errors_all_time": {name.split(":", 1)[1]: n for name, n in sorted(counters.every(conn).items())
                            if name.startswith("error:")},
        "quality": st["quality_score"],
        "node_types": st["node_types"][:TOP_NODE_TYPES],
        "node_types_total": len(st["node_types"]),
        "last_notification": store.last_notification(conn),
        "n8n": scope.n8n,
        "items": scope.items,
    }


def render(data):
    """The HTML page: the figures as JSON inside it, drawn by the inline script."""
    # "<" as \u003c: no text from the site can close the script element or open a comment in it
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    run = data["run"]
    heading = (f"Run {run['id']}, started {html.escape(run['started'])}" if run else "No run recorded yet")
    # the data goes in last: text from the site must not be read as one of the other slots
    return (_PAGE.replace("@@CHART_STYLE@@", charts.STYLE).replace("@@CHART_SCRIPT@@", charts.SCRIPT)
                 .replace("@@GENERATED@@", html.escape(data["generated_at"]))
                 .replace("@@RUN@@", heading)
                 .replace("@@RUNS_TABLE@@", _runs_table(data["runs"]))
                 .replace("@@NOTIFICATION@@", html.escape(notification_line(data["last_notification"])))
                 .replace("@@FETCH_TABLE@@", _fetch_table(data.get("fetch", {})))
                 .replace("@@DATA@@", payload))


def notification_line(n):
    """The last ping or notification sent to the operator's monitoring, in words (report and status)."""
    if n is None:
        return "Last notification: none sent (no --ping-url or --notify-url yet)."
    return f"Last notification: {n['kind']} at {_iso(n['at'])}, {'delivered' if n['ok'] else 'FAILED to arrive'}."


def write(conn, path, now, run_id=None, settings=None):
    """Write the report to `path` (through a temporary file and a rename); returns its size in bytes."""
    output.check_folder(path, "report")
    page = render(gather(conn, now, run_id, settings)).encode("utf-8")
    output.put(path, page, "report")
    return len(page)


# --- figures --------------------------------------------------------------------------------------


def _run_figures(conn, r, now):
    """One run's row of the history: its settings, its window, what its requests and jobs did, and its
    state: finished, running (its heartbeat is fresh at `now`) or killed (it stopped beating unfinished)."""
    try:
        settings = json.loads(r["settings"] or "{}")
    except ValueError:
        settings = {}
    # every figure comes from the run's own record (its requests, the jobs it finished): never from
    # today's job states, which later runs change
    run_id, start = r["id"], r["started_at"]
    # a run that died keeps finished_at empty: its window ends at its last trace
    end = r["finished_at"]
    if end is None:
        end = max(reports.last_trace(conn, run_id) or start, start)
    # a robots.txt that answered 4xx (no rules) is an answer, not an error
    req = reports.request_counts(conn, run_id, ANSWERED)
    ms = reports.latencies_ms(conn, run_id)
    done = len(reports.done_at(conn, run_id))
    duration = max(end - start, 0.0)
    domain, rate = _chart_domain(conn, run_id, settings)
    return {
        "id": r["id"], "started": _iso(start), "started_at": start, "end_at": end,
        "finished": r["finished_at"] is not None, "duration_s": round(duration, 1),
        "state": "finished" if r["finished_at"] is not None else
                 "running" if (r["heartbeat_at"] or 0) >= now - runrecord.RUN_DEAD_AFTER_S else "killed",
        "resumed_by": None,
        "workers": r["workers"], "rate_per_s": rate if settings.get("limiter", True) else None,
        "domain": domain,
        "burst": settings.get("burst"), "exit_code": r["exit_code"],
        "done_in_run": done, "requests": req[0], "ok": req[1], "http_429": req[2],
        "errors": req[0] - req[1],
        "requests_per_s": round(req[0] / duration, 2) if duration > 0 else None,
        "latency_p50_ms": _percentile(ms, 50), "latency_p95_ms": _percentile(ms, 95),
        "totals_at_end": {"done": r["done"], "failed": r["failed"], "invalid": r["invalid"]},
    }


def _chart_domain(conn, run_id, settings):
    """(domain, configured rate) the rate chart shows: n8n's site when the run sent to it, else the domain
    the run sent most requests to, with the rate its settings gave that domain (--domain-rate, else the
    lowest of the sources on it, else --rate)."""
    n8n = domain_of(settings.get("site_url") or "")
    sent = sources_report.requests_by_domain(conn, run_id)
    if not sent or sent.get(n8n) or max(sent.values()) == 0:
        return n8n, settings.get("rate_per_s")
    domain = max(sorted(sent), key=lambda d: sent[d])
    for name, rate, _ in settings.get("domain_rates") or ():
        if name == domain:
            return domain, rate
    rates = [src.get("rate") or settings.get("rate_per_s") for src in settings.get("sources") or ()
             if domain_of(dict(src.get("options") or ()).get("site") or "") == domain]
    return domain, min(rates) if rates else settings.get("rate_per_s")


def _run_series(conn, run):
    """The time charts of one run: templates done and requests per bucket, errors, latency."""
    start, end = run["started_at"], run["end_at"]
    width = max(1.0, math.ceil((end - start) / MAX_BUCKETS))
    n = max(1, math.ceil((end - start) / width))
    done = [0] * n
    for t in reports.done_at(conn, run["id"]):
        done[max(0, min(int((t - start) // width), n - 1))] += 1
    requests = [0] * n
    latency = [0] * (len(LATENCY_BINS_MS) + 1)
    errors = {}
    for at, domain, kind, ms in reports.requests(conn, run["id"]):
        if domain == run["domain"]:     # --rate is that domain's budget (youtube.com has its own)
            requests[max(0, min(int((at - start) // width), n - 1))] += 1
        latency[next((i for i, edge in enumerate(LATENCY_BINS_MS) if ms < edge), len(LATENCY_BINS_MS))] += 1
        if kind not in ANSWERED:
            errors[kind] = errors.get(kind, 0) + 1
    cumulative, total = [], 0
    for d in done:
        total += d
        cumulative.append(total)
    return {
        **{k: run[k] for k in ("id", "started", "duration_s", "rate_per_s", "burst", "domain", "workers", "requests",
                               "latency_p50_ms", "latency_p95_ms", "done_in_run")},
        "bucket_s": width,
        "t": [round(i * width, 1) for i in range(1, n + 1)],
        "done_cumulative": cumulative,
        "request_rate": [round(c / width, 3) for c in requests],
        "errors": dict(sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))),
        "latency_bins": [f"<{_ms(e)}" for e in LATENCY_BINS_MS] + [f"≥{_ms(LATENCY_BINS_MS[-1])}"],
        "latency": latency,
    }


def _percentile(sorted_values, p):
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p / 100))]


def _ms(edge):
    return f"{edge // 1000} s" if edge >= 1000 else f"{edge} ms"


def _iso(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ending(run):
    """The runs table's last cell: the exit code, or what became of a run that has none."""
    if run["exit_code"] is not None:
        return run["exit_code"]
    if run["state"] != "killed":
        return run["state"]
    return f"killed; run {run['resumed_by']} resumed it" if run["resumed_by"] else "killed; the next run resumes it"


def _runs_table(runs):
    head = ("run", "started", "duration", "workers", "rate limit", "done in run", "requests", "errors", "429s",
            "p50 latency", "exit")
    rows = []
    for r in reversed(runs):
        cells = (r["id"], r["started"], f"{r['duration_s']:g} s", r["workers"],
                 "off" if r["rate_per_s"] is None else f"{r['rate_per_s']:g}/s, burst {r['burst']}",
                 r["done_in_run"], r["requests"], r["errors"], r["http_429"],
                 "-" if r["latency_p50_ms"] is None else f"{r['latency_p50_ms']} ms",
                 _ending(r))
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    if not rows:
        rows.append(f'<tr><td colspan="{len(head)}">no run recorded yet</td></tr>')
    return ("<table id=\"runs-table\"><thead><tr>" + "".join(f"<th>{h}</th>" for h in head)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _fetch_table(fetch):
    """Per source with a browser fetcher: pages by HTTP and by browser, re-checks, verdict changes, and
    each URL pattern's learnt path (`fetcher = "auto"`)."""
    head = ("source", "pages by HTTP", "pages by browser", "re-checks", "verdict changes", "learnt patterns")
    rows = []
    for name, f in fetch.items():
        learnt = "; ".join(f"{p['pattern']}: {p['verdict']} ({p['http']} by HTTP, {p['browser']} by browser)"
                           for p in f["patterns"])
        cells = (name, f["http"], f["browser"], f["rechecks"], f["changes"], learnt or "-")
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    if not rows:
        rows.append(f'<tr><td colspan="{len(head)}">no page fetched with fetcher = "auto" yet</td></tr>')
    return ("<table id=\"fetch-table\"><thead><tr>" + "".join(f"<th>{h}</th>" for h in head)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>scraper report</title>
<style>
@@CHART_STYLE@@
</style></head>
<body>
<h1>scraper report</h1>
<p class="muted">Generated @@GENERATED@@. <span id="summary"></span></p>
<h2>@@RUN@@</h2>
<div class="grid">
<figure><h2 id="done-title">Templates done over time</h2><div class="chart" id="chart-done"></div>
<figcaption id="done-caption">Templates stored during this run, cumulative, against seconds since its start.</figcaption></figure>
<figure><h2>Request rate against the limit</h2><div class="chart" id="chart-rate"></div>
<figcaption id="rate-caption">Requests per second the workers sent to the site's domain; the dashed line is the configured --rate.</figcaption></figure>
<figure><h2>Errors by kind</h2><div class="chart" id="chart-errors"></div>
<figcaption>Failed requests of this run by kind (all-time counts are in the table below the charts).</figcaption></figure>
<figure><h2>Answer latency</h2><div class="chart" id="chart-latency"></div>
<figcaption id="latency-caption">Requests of this run by the time their answer (or failure) took.</figcaption></figure>
<figure class="n8n"><h2>Quality scores</h2><div class="chart" id="chart-quality"></div>
<figcaption>Stored templates by quality score (0-100), in bins of ten.</figcaption></figure>
<figure class="n8n"><h2>Top node types</h2><div class="chart" id="chart-nodes"></div>
<figcaption id="nodes-caption">Node types by the number of templates that use them.</figcaption></figure>
<figure><h2>History of runs</h2><div class="chart" id="chart-runs"></div>
<figcaption id="runs-caption">Templates done in each run.</figcaption></figure>
</div>
<h2>Runs</h2>
@@RUNS_TABLE@@
<p id="last-notification">@@NOTIFICATION@@</p>
<h2>Fetchers: plain HTTP and the browser, per source</h2>
@@FETCH_TABLE@@
<h2>Errors, all time</h2>
<table id="errors-table"><tbody></tbody></table>
<noscript><p>The charts are drawn by the page's own script; the tables above show the same runs.</p></noscript>
<script type="application/json" id="report-data">@@DATA@@</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("report-data").textContent);
@@CHART_SCRIPT@@
const R = D.run;
document.getElementById("summary").textContent = "Jobs: " + Object.entries(D.jobs).map(e => e[1] + " " + e[0]).join(", ")
  + Object.entries(D.jobs_by_source).map(([n, c]) => "; " + n + ": " + Object.entries(c).map(e => e[1] + " " + e[0]).join(", ")).join("")
  + (D.n8n ? ". Templates stored: " + D.templates : "")
  + Object.entries(D.items || {}).map(([n, c]) => ". Items of " + n + ": " + c.live + " live, " + c.removed + " removed").join("")
  + ". Runs: " + D.runs.length + ".";
const WHAT = D.n8n ? "templates" : "pages";
if (!D.n8n) {
  document.getElementById("done-title").textContent = "Pages done over time";
  document.getElementById("done-caption").textContent = "Jobs (pages) done during this run, cumulative, against seconds since its start.";
  document.getElementById("runs-caption").textContent = "Jobs done in each run.";
  for (const f of document.querySelectorAll("figure.n8n")) f.remove();
}
if (R) {
  lineChart("chart-done", R.t, R.done_cumulative, null, WHAT + " done");
  lineChart("chart-rate", R.t, R.request_rate, R.rate_per_s, "requests/s, " + R.bucket_s + " s buckets");
  document.getElementById("rate-caption").textContent += " Domain: " + R.domain + "."
    + (R.rate_per_s ? " Limit: " + R.rate_per_s + "/s, burst " + R.burst + "." : " The limiter was off for this run.");
  barChart("chart-errors", Object.keys(R.errors), Object.values(R.errors), "error");
  barChart("chart-latency", R.latency_bins, R.latency);
  if (R.latency_p50_ms !== null)
    document.getElementById("latency-caption").textContent += " Median " + R.latency_p50_ms + " ms, 95th percentile " + R.latency_p95_ms + " ms.";
} else {
  for (const id of ["chart-done", "chart-rate", "chart-errors", "chart-latency"]) empty(svgIn(id, 560, 120), 560, 120, "no run recorded yet");
}
if (D.n8n) {
  barChart("chart-quality", D.quality.histogram.map(b => b.from + "-" + b.to), D.quality.histogram.map(b => b.templates));
  hbarChart("chart-nodes", D.node_types.map(n => n.type), D.node_types.map(n => n.templates));
  document.getElementById("nodes-caption").textContent += " Top " + D.node_types.length + " of " + D.node_types_total + ".";
}
barChart("chart-runs", D.runs.map(r => "run " + r.id), D.runs.map(r => r.done_in_run), "run");
const tb = document.querySelector("#errors-table tbody");
const errs = Object.entries(D.errors_all_time);
for (const [k, v] of errs.length ? errs : [["none", 0]]) {
  const tr = tb.insertRow(); tr.insertCell().textContent = k; tr.insertCell().textContent = String(v);
}
document.body.dataset.drawn = "yes";
</script>
</body></html>
"""  # noqa: E501 - the page's CSS and script, one rule or statement a line
