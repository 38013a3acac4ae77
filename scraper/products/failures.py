"""`scraper failures`: the jobs that ended failed or invalid, and why, newest first."""

import datetime

from scraper.db import reports

FIELDS = reports.FAILURE_FIELDS


def listing(conn, limit=None, with_time=False):
    """[{key, status, error_kind, last_error, attempts, http_status}], the newest end first; `with_time`
    adds `failed_at` (UTC text, when its last attempt ended) for the text listing."""
    found = []
    for r in reports.failures(conn, limit):
        row = {f: r[f] for f in FIELDS}
        if with_time:
            row["failed_at"] = None if r["finished_at"] is None else _iso(r["finished_at"])
        found.append(row)
    return found


def _iso(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def render(rows, total):
    """Lines for people: aligned columns, one job a line; a last line when `--limit` left some out."""
    cells = [(r["failed_at"] or "-", r["key"], r["status"], r["error_kind"] or "-", f"HTTP {r['http_status'] or '-'}",
              f"{r['attempts']} attempt(s)") for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))] if cells else []
    lines = ["  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=True)), r["last_error"] or ""]).rstrip()
             for row, r in zip(cells, rows, strict=True)]
    if not rows:
        lines.append("no job is failed or invalid.")
    elif total > len(rows):
        lines.append(f"... and {total - len(rows)} more (raise --limit to see them).")
    return "\n".join(lines)
