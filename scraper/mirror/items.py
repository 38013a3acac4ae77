"""The mirror core for the items of catalogue sources: one `items` row per (source, key), versioned
through the same raw answers and changes as the templates (scraper/mirror/answers.py).

An item's version goes up when its record changes, the source's `volatile` fields left out (a view
counter moving alone is no change). Its raw page is kept, one per version, so `reextract` rebuilds the
record from what was served.
"""

import hashlib
import json

from scraper.db.store import transaction
from scraper.mirror import answers

PAGE = "page"                # the kind of raw answer an item keeps
REEXTRACT_BATCH = 500


def record_hash(record, volatile=()):
    """SHA-256 of the record without its volatile fields, keys sorted (key order is no change)."""
    kept = {k: v for k, v in record.items() if k not in set(volatile)}
    return hashlib.sha256(json.dumps(kept, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
                          .encode("utf-8")).hexdigest()


def store(conn, source, key, url, record, raw, fetched_at, volatile=()):
    """Write the item and its raw answer(s) ({kind: bytes}) inside the caller's transaction; returns its version."""
    digest = record_hash(record, volatile)
    old = conn.execute("SELECT version, first_seen_at, removed_at, content_hash FROM items "
                       "WHERE source = ? AND key = ?", (source, key)).fetchone()
    version, change = answers.next_version(old and old["version"], old and old["content_hash"], digest)
    for kind, body in raw.items():
        answers.keep(conn, source, key, version, kind, digest, fetched_at, body)
    conn.execute(
        """INSERT INTO items (source, key, url, record, version, first_seen_at, last_seen_at, removed_at,
                              content_hash, fetched_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)
           ON CONFLICT (source, key) DO UPDATE SET url = excluded.url, record = excluded.record,
               version = excluded.version, last_seen_at = excluded.last_seen_at, removed_at = NULL,
               content_hash = excluded.content_hash, fetched_at = excluded.fetched_at""",
        (source, key, url, json.dumps(record, ensure_ascii=False, sort_keys=True), version,
         fetched_at, fetched_at, digest, fetched_at))
    if change:
        answers.record_change(conn, source, key, change, fetched_at, version)
    if old is not None and old["removed_at"] is not None:
        answers.record_change(conn, source, key, "restored", fetched_at, version)
    return version


def mark_removed(conn, source, key, at):
    """A confirmed removal (404/410): set `removed_at`, keep the record and its versions. True when the
    item was stored and live."""
    cur = conn.execute("UPDATE items SET removed_at = ? WHERE source = ? AND key = ? AND removed_at IS NULL",
                       (at, source, key))
    if cur.rowcount != 1:
        return False
    version = conn.execute("SELECT version FROM items WHERE source = ? AND key = ?", (source, key)).fetchone()[0]
    answers.record_change(conn, source, key, "removed", at, version)
    return True


def history(conn, source, key):
    """The item's versions, oldest first: [{version, fetched_at, content_hash}]."""
    return answers.history(conn, source=source, key=key, kind=PAGE)


def find_key(conn, source, url_or_path):
    """The stored key of an item named by its URL or its path, or None."""
    row = conn.execute("SELECT key FROM items WHERE source = ? AND (key = ? OR url = ?)",
                       (source, url_or_path, url_or_path)).fetchone()
    return row and row["key"]


def refresh(conn, source, older_than_days, limit, now):
    """Queue the done, live items of `source` last fetched more than `older_than_days` ago (0: all),
    oldest first. Returns how many were queued."""
    from scraper.db.queue import Queue
    sql = ("SELECT i.source || ':' || i.key FROM items i JOIN jobs j ON j.key = i.source || ':' || i.key "
           "WHERE i.source = ? AND j.status = 'done' AND i.removed_at IS NULL")
    args = [source]
    if older_than_days > 0:
        sql, args = sql + " AND i.fetched_at < ?", args + [answers_iso(now - older_than_days * 86_400)]
    sql += " ORDER BY i.fetched_at, i.key"
    if limit is not None:
        sql, args = sql + " LIMIT ?", args + [limit]
    return Queue(conn).refetch([r[0] for r in conn.execute(sql, args)], now)


def answers_iso(ts):
    import datetime
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(timespec="seconds")


def reextract(conn, sources, extract):
    """Rebuild the record of every item of the `sources` given ({name: Source}) from its stored page,
    sending nothing; `extract(source, url, body)` is the kind's extractor. Returns (rebuilt, skipped):
    items of a source no longer configured are left as they are."""
    keys = [(r["source"], r["key"]) for r in conn.execute("SELECT source, key FROM items ORDER BY source, key")]
    rebuilt = 0
    for start in range(0, len(keys), REEXTRACT_BATCH):
        with transaction(conn) as c:
            for source, key in keys[start:start + REEXTRACT_BATCH]:
                if source in sources:
                    rebuilt += _reextract_one(c, sources[source], key, extract)
    return rebuilt, len(keys) - rebuilt


def _reextract_one(c, source, key, extract):
    current = c.execute("SELECT * FROM items WHERE source = ? AND key = ?", (source.name, key)).fetchone()
    page = c.execute("SELECT body FROM answers WHERE source = ? AND key = ? AND version = ? AND kind = ?",
                     (source.name, key, current["version"], PAGE)).fetchone()
    if page is None:
        return 0
    record = extract(source, current["url"], answers.decompress(page["body"]))
    c.execute("UPDATE items SET record = ? WHERE source = ? AND key = ?",
              (json.dumps(record, ensure_ascii=False, sort_keys=True), source.name, key))
    return 1
