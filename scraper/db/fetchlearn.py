"""The store of `fetcher = "auto"`'s learning: one `fetch_patterns` row per source and URL pattern.

The rules are scraper.policy.fetchmode's; this module only reads and writes their result, inside the
caller's transaction (the job's, so a page's learning commits with its record and its `done`)."""

from typing import Any

from scraper.db.backend import Conn
from scraper.db.dialect import same
from scraper.policy import fetchmode


def verdict(conn: Conn, source: str, pattern: str) -> fetchmode.Verdict | None:
    """The pattern's `fetchmode.Verdict`, or None while it has learnt nothing."""
    row = conn.execute(same("SELECT verdict, agreeing FROM fetch_patterns WHERE source = ? AND pattern = ?"),
                       (source, pattern)).fetchone()
    return None if row is None or row[0] == _UNKNOWN else fetchmode.Verdict(row[0], row[1])


def record(conn: Conn, source: str, pattern: str, learned: fetchmode.Learned, by_http: bool, by_browser: bool,
           now: float) -> None:
    """Count a page's fetches (`by_http`, `by_browser`: whether each path was tried) and store what it
    taught (`learned`, a fetchmode.Learned). A pattern that learnt nothing yet still counts its pages."""
    v = learned.verdict
    # the stored row's counts named by their table: PostgreSQL finds a bare column ambiguous, SQLite takes either
    conn.execute(same(
        """INSERT INTO fetch_patterns (source, pattern, verdict, agreeing, by_http, by_browser, rechecks, changes,
                                       updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (source, pattern) DO UPDATE SET
               verdict = excluded.verdict, agreeing = excluded.agreeing,
               by_http = fetch_patterns.by_http + excluded.by_http,
               by_browser = fetch_patterns.by_browser + excluded.by_browser,
               rechecks = fetch_patterns.rechecks + excluded.rechecks,
               changes = fetch_patterns.changes + excluded.changes,
               updated_at = excluded.updated_at"""),
        (source, pattern, v.path if v else _UNKNOWN, v.agreeing if v else 0, int(bool(by_http)),
         int(bool(by_browser)), int(learned.recheck), int(learned.changed), now))


_UNKNOWN = "unknown"    # pages were fetched, but no fetch taught anything yet (failures, fields found by neither)


def summary(conn: Conn) -> dict[str, dict[str, Any]]:
    """Per source, for `sources --json` (key `fetch`), `status` and the report: pages by HTTP and by browser,
    re-checks, verdict changes, and the learnt patterns."""
    out: dict[str, dict[str, Any]] = {}
    for row in conn.execute(same("""SELECT source, pattern, verdict, by_http, by_browser, rechecks, changes
                               FROM fetch_patterns ORDER BY source, pattern""")):
        source, pattern, v, by_http, by_browser, rechecks, changes = row
        s = out.setdefault(source, {"http": 0, "browser": 0, "rechecks": 0, "changes": 0, "patterns": []})
        s["http"] += by_http
        s["browser"] += by_browser
        s["rechecks"] += rechecks
        s["changes"] += changes
        s["patterns"].append({"pattern": pattern, "verdict": v, "http": by_http, "browser": by_browser,
                              "rechecks": rechecks, "changes": changes})
    return out
