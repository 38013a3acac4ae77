"""Raw answers and versions: every answer that made a `workflows` row, kept compressed, one per version.

A template's version is 1 at its first fetch and goes up by one each time its content changes; view
counters changing alone is not a change. The current version's stored body is the latest one served
(it differs from earlier fetches of that version only in view counters), so `reextract` rebuilds
exactly the row the last fetch wrote.
"""

import hashlib
import json
import zlib

from scraper.db.store import transaction, upsert
from scraper.sites import n8n

API, PAGE = n8n.API, n8n.PAGE
VIEW_COUNTERS = ("views", "totalViews", "recentViews")   # move daily; never a new version
SYNC_COLUMNS = ("version", "first_seen_at", "last_seen_at", "removed_at")   # not from an answer
ZLIB_LEVEL = 9               # answers are small (5-60 KB) and written once per fetch: size wins
REEXTRACT_BATCH = 500        # rows per transaction; a run may be writing beside us


def compress(body):
    return zlib.compress(body, ZLIB_LEVEL)


def decompress(blob):
    return zlib.decompress(blob)


def without_view_counters(obj):
    """The answer with the view counters left out, at its top level and in its `workflow` object."""
    if not isinstance(obj, dict):
        return obj
    out = {k: v for k, v in obj.items() if k not in VIEW_COUNTERS}
    if isinstance(out.get("workflow"), dict):
        out["workflow"] = {k: v for k, v in out["workflow"].items() if k not in VIEW_COUNTERS}
    return out


def content_hash(body):
    """SHA-256 of the answer's JSON without view counters, keys sorted (so key order is no change)."""
    try:
        data = json.loads(body)
    except (ValueError, TypeError):
        return hashlib.sha256(body).hexdigest()
    canonical = json.dumps(without_view_counters(data), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def next_version(current, old_hash, new_hash, old_row_hash=None, new_row_hash=None):
    """(version to store, change or None). `current` None: never stored. Rows stored before answers
    were kept have a version but no answer: their extracted content hash decides."""
    if current is None:
        return 1, "added"
    if old_hash is None:
        return (current, None) if old_row_hash == new_row_hash else (current + 1, "changed")
    return (current, None) if old_hash == new_hash else (current + 1, "changed")


def store(conn, row, raw, fetched_at):
    """Write the `workflows` row and its raw answers (`raw`: {"api": bytes, "page": bytes?}) on `conn`,
    inside the caller's transaction (the job's `done`). Returns the row's version."""
    tid = row["id"]
    api_hash = content_hash(raw[API])
    old = conn.execute("SELECT version, first_seen_at, removed_at, content_hash FROM workflows WHERE id = ?",
                       (tid,)).fetchone()
    last = conn.execute("SELECT content_hash FROM answers WHERE template_id = ? AND kind = 'api' "
                        "ORDER BY version DESC LIMIT 1", (tid,)).fetchone()
    version, change = next_version(old and old["version"], last and last["content_hash"], api_hash,
                                   old and old["content_hash"], row["content_hash"])
    for kind, body in raw.items():
        _keep(conn, tid, version, kind, api_hash if kind == API else content_hash(body), fetched_at, body)
    row = dict(row, version=version, first_seen_at=(old and old["first_seen_at"]) or fetched_at,
               last_seen_at=fetched_at, removed_at=None)
    upsert(conn, "workflows", row, "id")
    if change:
        record_change(conn, tid, change, fetched_at, version)
    if old is not None and old["removed_at"] is not None:
        record_change(conn, tid, "restored", fetched_at, version)
    return version


def _keep(conn, tid, version, kind, digest, fetched_at, body):
    # a new version gets its row; the same version gets the latest body (only counters differ)
    # what came with the body (net.http.Answer); a plain bytes body (a test, an import) has none
    url, status, ctype = (getattr(body, a, None) for a in ("url", "status", "content_type"))
    conn.execute(
        """INSERT INTO answers (template_id, version, kind, content_hash, fetched_at, body_fetched_at, size, body,
                                url, http_status, content_type)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (template_id, version, kind) DO UPDATE SET content_hash = excluded.content_hash,
               body_fetched_at = excluded.body_fetched_at, size = excluded.size, body = excluded.body,
               url = excluded.url, http_status = excluded.http_status, content_type = excluded.content_type""",
        (tid, version, kind, digest, fetched_at, fetched_at, len(body), compress(body), url, status, ctype),
    )


def mark_removed(conn, template_id, at):
    """A confirmed removal (the detail answer is gone): set `removed_at`, keep the data. True when the
    template had been stored and was live."""
    cur = conn.execute("UPDATE workflows SET removed_at = ? WHERE id = ? AND removed_at IS NULL", (at, template_id))
    if cur.rowcount != 1:
        return False
    version = conn.execute("SELECT version FROM workflows WHERE id = ?", (template_id,)).fetchone()[0]
    record_change(conn, template_id, "removed", at, version)
    return True


def record_change(conn, template_id, change, at, version=None):
    conn.execute("INSERT INTO changes (template_id, change, at, version) VALUES (?, ?, ?, ?)",
                 (template_id, change, at, version))


def history(conn, template_id):
    """The template's versions, oldest first: [{version, fetched_at, content_hash}]."""
    return [dict(r) for r in conn.execute(
        "SELECT version, fetched_at, content_hash FROM answers WHERE template_id = ? AND kind = 'api' "
        "ORDER BY version", (template_id,))]


def changes(conn, since=None):
    """What changed, in order: [{id, change, at}], from `since` (ISO 8601 UTC text) on."""
    sql = "SELECT template_id AS id, change, at FROM changes"
    args = ()
    if since is not None:
        sql, args = sql + " WHERE at >= ?", (since,)
    return [dict(r) for r in conn.execute(sql + " ORDER BY at, seq", args)]


def rebuilt_row(api_body, body_fetched_at, page_body, current):
    """The `workflows` row the stored answers give (pure): the extractor's columns, the page's, and the
    sync columns kept from `current`."""
    row = n8n.extract(api_body, body_fetched_at)
    if page_body is not None:
        row.update(n8n.extract_page(page_body.decode("utf-8", "replace")))
    row.update({c: current[c] for c in SYNC_COLUMNS})
    return row


def reextract(conn):
    """Rebuild every `workflows` row that has stored answers, sending nothing. Returns (rebuilt, without
    answers): rows stored before answers were kept cannot be rebuilt and are left as they are."""
    ids = [r[0] for r in conn.execute("SELECT id FROM workflows ORDER BY id")]
    rebuilt = 0
    for start in range(0, len(ids), REEXTRACT_BATCH):
        with transaction(conn) as c:
            for tid in ids[start:start + REEXTRACT_BATCH]:
                rebuilt += _reextract_one(c, tid)
    return rebuilt, len(ids) - rebuilt


def _reextract_one(c, tid):
    current = c.execute("SELECT * FROM workflows WHERE id = ?", (tid,)).fetchone()
    api = c.execute("SELECT body, body_fetched_at FROM answers WHERE template_id = ? AND version = ? "
                    "AND kind = 'api'", (tid, current["version"])).fetchone()
    if api is None:
        return 0
    # the page columns come from the latest page fetched, as a run without --with-page leaves them
    page = c.execute("SELECT body FROM answers WHERE template_id = ? AND kind = 'page' AND version <= ? "
                     "ORDER BY version DESC LIMIT 1", (tid, current["version"])).fetchone()
    row = rebuilt_row(decompress(api["body"]), api["body_fetched_at"],
                      None if page is None else decompress(page["body"]), current)
    upsert(c, "workflows", row, "id")
    # the videos the extractor finds now; the next run queues the transcripts of new ones (youtube's resume)
    c.execute("DELETE FROM template_videos WHERE template_id = ?", (tid,))
    c.executemany("INSERT OR IGNORE INTO template_videos (template_id, video_id) VALUES (?, ?)",
                  [(tid, v) for v in json.loads(row["videos"])])
    return 1
