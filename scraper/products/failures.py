"""`scraper failures`: the jobs that ended failed or invalid, and why, newest first."""

FIELDS = ("key", "status", "error_kind", "last_error", "attempts", "http_status")


def listing(conn, limit=None):
    """[{key, status, error_kind, last_error, attempts, http_status}], the newest end first."""
    sql = (f"SELECT {', '.join(FIELDS)} FROM jobs WHERE status IN ('failed', 'invalid') "
           "ORDER BY finished_at DESC, id DESC")
    args = ()
    if limit is not None:
        sql, args = sql + " LIMIT ?", (limit,)
    return [dict(r) for r in conn.execute(sql, args)]


def render(rows, total):
    """Lines for people: one per job; a last line when `--limit` left some out."""
    lines = [f"{r['key']}  {r['status']}  {r['error_kind'] or '-'}  HTTP {r['http_status'] or '-'}  "
             f"{r['attempts']} attempt(s)  {r['last_error'] or ''}".rstrip() for r in rows]
    if not rows:
        lines.append("no job is failed or invalid.")
    elif total > len(rows):
        lines.append(f"... and {total - len(rows)} more (raise --limit to see them).")
    return "\n".join(lines)
