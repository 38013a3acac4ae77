"""The mirror core for the items of catalogue sources: one `items` row per (source, key), versioned
through the same raw answers and changes as the templates (scraper/mirror/answers.py).

An item's version goes up when its record changes, the source's `volatile` fields left out (a view
counter moving alone is no change). Its raw page is kept, one per version, so `reextract` rebuilds the
record from what was served. What storing or removing an item writes is decided here, pure (`decided()`,
`removal()`), and written with the rest of its job's result (`mirror/record`).
"""

import hashlib
import json
from typing import NamedTuple

from scraper.db import items as rows
from scraper.db.answers import Answer, Change
from scraper.db.store import transaction
from scraper.mirror import answers

PAGE = "page"                # the kind of raw answer an item keeps
REEXTRACT_BATCH = 500


def record_hash(record, volatile=()):
    """SHA-256 of the record without its volatile fields, keys sorted (key order is no change)."""
    kept = {k: v for k, v in record.items() if k not in set(volatile)}
    return hashlib.sha256(json.dumps(kept, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
                          .encode("utf-8")).hexdigest()


class Decided(NamedTuple):
    """What storing one item writes, and what is stored of it after."""

    answers: tuple[Answer, ...]
    item: rows.Item
    changes: tuple[Change, ...]
    after: rows.State


def decided(old, source, key, url, record, raw, fetched_at, volatile=()):
    """What storing the item and its raw answer(s) ({kind: bytes}) writes, given what is stored of it (`old`, an
    `items.State`): pure."""
    digest = record_hash(record, volatile)
    version, change = answers.next_version(old.version, old.content_hash, digest)
    written = tuple(answers.answer_row(source, key, version, kind, digest, fetched_at, body)
                    for kind, body in raw.items())
    current = answers.current_after(old.current, version, written)
    kinds = ((change,) if change else ()) + (("restored",) if old.removed_at is not None else ())
    changes = tuple(answers.change(source, key, kind, fetched_at, version, current, digest=digest, url=url,
                                   item_url=url) for kind in kinds)
    item = rows.Item(source, key, url, json.dumps(record, ensure_ascii=False, sort_keys=True), version, fetched_at,
                     digest)
    return Decided(written, item, changes, rows.State(True, version, None, digest, url, current))


def removal(old, source, key, at):
    """(change, state after) of a confirmed removal (404/410: `removed_at` set, the record and its versions
    kept), or None when the item is not stored or not live (`old`: an `items.State`)."""
    if not old.stored or old.removed_at is not None:
        return None
    return (answers.change(source, key, "removed", at, old.version, old.current, item_url=old.url),
            old._replace(removed_at=at))


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
