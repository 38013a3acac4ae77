"""The mirror core for the items of catalogue sources: one `items` row per (source, key), versioned
through the same raw answers and changes as the templates (scraper/mirror/answers.py).

An item's version goes up when its record changes, the source's `volatile` fields left out (a view
counter moving alone is no change). Its raw page is kept, one per version, so `reextract` rebuilds the
record from what was served.
"""

import hashlib
import json

from scraper.db import items as rows
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
    old = rows.version_state(conn, source, key)
    version, change = answers.next_version(old and old["version"], old and old["content_hash"], digest)
    for kind, body in raw.items():
        answers.keep(conn, source, key, version, kind, digest, fetched_at, body)
    rows.put(conn, source, key, url, json.dumps(record, ensure_ascii=False, sort_keys=True), version, fetched_at,
             digest)
    if change:
        answers.record_change(conn, source, key, change, fetched_at, version, digest=digest, url=url)
    if old is not None and old["removed_at"] is not None:
        answers.record_change(conn, source, key, "restored", fetched_at, version, digest=digest, url=url)
    return version


def mark_removed(conn, source, key, at):
    """A confirmed removal (404/410): set `removed_at`, keep the record and its versions. True when the
    item was stored and live."""
    version = rows.mark_removed(conn, source, key, at)
    if version is None:
        return False
    answers.record_change(conn, source, key, "removed", at, version)
    return True


def history(conn, source, key):
    """The item's versions, oldest first: [{version, fetched_at, content_hash}]."""
    return answers.history(conn, source=source, key=key, kind=PAGE)


def find_key(conn, source, url_or_path):
    """The stored key of an item named by its URL or its path, or None."""
    return rows.find_key(conn, source, url_or_path)


def refresh(conn, source, older_than_days, limit, now):
    """Queue the done, live items of `source` last fetched more than `older_than_days` ago (0: all),
    oldest first. Returns how many were queued."""
    from scraper.db.queue import Queue
    before = answers_iso(now - older_than_days * 86_400) if older_than_days > 0 else None
    return Queue(conn).refetch(rows.due(conn, source, before, limit), now)


def answers_iso(ts):
    import datetime
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(timespec="seconds")


def reextract(conn, sources, extract):
    """Rebuild the record of every item of the `sources` given ({name: Source}) from its stored page,
    sending nothing; `extract(source, url, body)` is the kind's extractor. Returns (rebuilt, skipped):
    items of a source no longer configured are left as they are."""
    keys = rows.keys(conn)
    rebuilt = 0
    for start in range(0, len(keys), REEXTRACT_BATCH):
        with transaction(conn) as c:
            for source, key in keys[start:start + REEXTRACT_BATCH]:
                if source in sources:
                    rebuilt += _reextract_one(c, sources[source], key, extract)
    return rebuilt, len(keys) - rebuilt


def _reextract_one(c, source, key, extract):
    from scraper.db import answers as stored
    current = rows.row(c, source.name, key)
    page = stored.body(c, source.name, key, current["version"], PAGE)
    if page is None:
        return 0
    record = extract(source, current["url"], answers.decompress(page["body"]))
    rows.set_record(c, source.name, key, json.dumps(record, ensure_ascii=False, sort_keys=True))
    return 1
