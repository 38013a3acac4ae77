"""Raw answers and versions: the mirror core of every kind (templates here, catalogue items in
scraper/mirror/items.py), each answer kept compressed, one per version, keyed by (source, key).

A template's version is 1 at its first fetch and goes up by one each time its content changes; view
counters changing alone is not a change. The current version's stored body is the latest one served
(it differs from earlier fetches of that version only in view counters), so `reextract` rebuilds
exactly the row the last fetch wrote.

What a result writes is decided here, pure, from what is stored (`db/results.state`): `decided()` for a
template's row and answers, `removal()` for a confirmed removal; `mirror/record` gathers them into the one
`db/results.Plan` the job's transaction writes.
"""

import json
import zlib
from typing import NamedTuple

from scraper.db import answers as rows
from scraper.db import templates
from scraper.db.answers import Answer as Stored
from scraper.db.answers import Change, Current
from scraper.db.results import Workflow
from scraper.db.store import transaction, upsert
from scraper.net.http import Answer
from scraper.policy import revalidate
from scraper.sites import n8n

API, PAGE = n8n.API, n8n.PAGE
N8N = n8n.SITE                # the source of the templates (at most one source of kind n8n)
SYNC_COLUMNS = ("version", "first_seen_at", "last_seen_at", "removed_at")   # not from an answer
REJECTED, REJECTED_VERSION = "rejected", 0    # a refused answer (not a graph), kept apart from the versions
ZLIB_LEVEL = 9               # answers are small (5-60 KB) and written once per fetch: size wins
REEXTRACT_BATCH = 500        # rows per transaction; a run may be writing beside us


def compress(body):
    return body.blob if isinstance(body, Packed) else zlib.compress(body, ZLIB_LEVEL)


class Packed(Answer):
    """A raw answer made ready to store: its content hash and compressed form computed once, by the worker
    before the job's transaction (`mirror.record.prepare`), not inside it under the write lock every worker
    shares. Still the served answer (`net.http.Answer`: bytes, URL, status, Content-Type)."""

    digest: str = ""
    blob: bytes = b""


def pack(body, hashed=True):
    """`body` with its compressed form and, when `hashed`, its content hash (a `Packed`; an item's answer is
    versioned by its record's hash instead); a Packed one as it is."""
    if isinstance(body, Packed):
        return body
    out = Packed(body)
    out.url, out.status, out.content_type = (getattr(body, a, None) for a in ("url", "status", "content_type"))
    out.digest, out.blob = content_hash(body) if hashed else "", compress(body)
    return out


def decompress(blob):
    return zlib.decompress(blob)


def content_hash(body):
    """SHA-256 of the answer's JSON without view counters, keys sorted (so key order is no change)."""
    if isinstance(body, Packed) and body.digest:
        return body.digest
    return revalidate.digest(body)


def next_version(current, old_hash, new_hash, old_row_hash=None, new_row_hash=None):
    """(version to store, change or None). `current` None: never stored. Rows stored before answers
    were kept have a version but no answer: their extracted content hash decides."""
    if current is None:
        return 1, "added"
    if old_hash is None:
        return (current, None) if old_row_hash == new_row_hash else (current + 1, "changed")
    return (current, None) if old_hash == new_hash else (current + 1, "changed")


class Decided(NamedTuple):
    """What storing one template writes, and what is stored of it after."""

    answers: tuple[Stored, ...]
    workflow: Workflow
    changes: tuple[Change, ...]
    after: templates.State


def decided(old, row, raw, fetched_at):
    """What storing the `workflows` row and its raw answers (`raw`: {"api": bytes, "page": bytes?}) writes,
    given what is stored of the template (`old`, a `templates.State`): pure."""
    tid = row["id"]
    api_hash = content_hash(raw[API])
    if row.get("hollow") and old.stored and old.version is not None:
        # a hollow answer (a paid template's shape only) is never a new version: a complete stored
        # version stays as it is; a hollow one gets the latest body under its own version
        if not old.hollow:
            return Decided((), Workflow(tid, seen_at=fetched_at), _restored(old, tid, fetched_at, old.current),
                           old._replace(removed_at=None))
        version, change_kind = old.version, None
    else:
        version, change_kind = next_version(old.version, old.last_hash, api_hash, old.content_hash,
                                            row["content_hash"])
    written = tuple(answer_row(N8N, str(tid), version, kind, api_hash if kind == API else content_hash(body),
                               fetched_at, body, template_id=tid) for kind, body in raw.items())
    row = dict(row, version=version, first_seen_at=old.first_seen_at or fetched_at, last_seen_at=fetched_at,
               removed_at=None)
    # the price is on the listing only: the last walk's, when one listed the id (else left as stored)
    if old.listed is not None:
        price, purchase_url = old.listed
        row.update(price=price, purchase_url=purchase_url, paid=int(price is not None or purchase_url is not None))
    current = current_after(old.current, version, written)
    changes = ()
    if change_kind:
        changes = (change(N8N, str(tid), change_kind, fetched_at, version, current, template_id=tid, digest=api_hash,
                          url=getattr(raw[API], "url", None)),)
    after = old._replace(stored=True, version=version, first_seen_at=row["first_seen_at"], removed_at=None,
                         content_hash=row.get("content_hash", old.content_hash), hollow=bool(row.get("hollow")),
                         last_hash=api_hash, current=current)
    return Decided(written, Workflow(tid, row), changes + _restored(old, tid, fetched_at, current, version), after)


def _restored(old, tid, fetched_at, current, version=None):
    if old.removed_at is None:
        return ()
    return (change(N8N, str(tid), "restored", fetched_at, version or old.version, current, template_id=tid),)


def removal(old, template_id, at):
    """(change, state after) of a confirmed removal (the detail answer is gone: `removed_at` set, the data
    kept), or None when the template is not stored or not live (`old`: a `templates.State`)."""
    if not old.stored or old.removed_at is not None:
        return None
    return (change(N8N, str(template_id), "removed", at, old.version, old.current, template_id=template_id),
            old._replace(removed_at=at))


# --- the generic core: raw answers, versions and changes of any item, keyed by (source, key) ----------

def answer_row(source, key, version, kind, digest, fetched_at, body, template_id=None):
    """One raw answer as stored, compressed: a new version gets its row; the same version gets the latest body
    (only volatile fields differ). The URL, HTTP status and Content-Type it came with (`net.http.Answer`; a
    plain bytes body, from a test or an import, has none) are kept for the WARC export."""
    url, status, ctype = (getattr(body, a, None) for a in ("url", "status", "content_type"))
    return Stored(source, key, template_id, version, kind, digest, fetched_at, len(body), compress(body), url, status,
                  ctype)


def current_after(current, version, written):
    """The first answer (by kind, refused ones left out) of `version` once the answers `written` are stored
    over the stored one (`current`, when known)."""
    kinds = {current.kind: current} if current is not None and current.version == version else {}
    kinds.update((a.kind, Current(version, a.kind, a.digest, a.url)) for a in written if a.kind != REJECTED)
    return kinds[min(kinds)] if kinds else None


def change(source, key, kind, at, version, current, template_id=None, digest=None, url=None, item_url=None):
    """A change to record with its event; the content hash and URL the event names, when not given, are the
    version's first stored answer's (`current`; `item_url` where that answer kept no URL)."""
    if (digest is None or url is None) and version is not None and current is not None and current.version == version:
        digest, url = digest or current.digest, url or (current.url if current.url is not None else item_url)
    return Change(source, key, kind, at, version, template_id, digest, url)


def restored(conn, tid, at):
    """A removed template listed again (a walk): live again, its `restored` change and event recorded."""
    version = templates.restore(conn, tid)
    rows.add_changes(conn, (change(N8N, str(tid), "restored", at, version, rows.current(conn, N8N, str(tid), version),
                                   template_id=tid),))


def history(conn, template_id=None, source=N8N, key=None, kind=API):
    """An item's versions, oldest first: [{version, fetched_at, content_hash}] (a template by its id)."""
    key = str(template_id) if key is None else key
    return rows.versions(conn, source, key, kind)


def changes(conn, since=None, kinds=(), limit=None):
    """What changed, ordered by time then key: a template as {id, change, at}, an item as {source, key,
    change, at} (its key is `SOURCE:PATH`); from `since` (ISO 8601 UTC text) on, of `kinds` only (default
    all); `limit`: the newest that many, still oldest first."""
    out = []
    for r in rows.changes(conn, since, kinds, limit):
        if r["template_id"] is not None:
            out.append({"id": r["template_id"], "change": r["change"], "at": r["at"]})
        else:
            out.append({"source": r["source"], "key": f"{r['source']}:{r['key']}", "change": r["change"],
                        "at": r["at"]})
    return out


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
    ids = templates.ids(conn)
    rebuilt = 0
    for start in range(0, len(ids), REEXTRACT_BATCH):
        with transaction(conn) as c:
            for tid in ids[start:start + REEXTRACT_BATCH]:
                rebuilt += _reextract_one(c, tid)
    return rebuilt, len(ids) - rebuilt


def _reextract_one(c, tid):
    current = templates.row(c, tid)
    api = rows.body(c, N8N, str(tid), current["version"], API)
    if api is None:
        return 0
    # the page columns come from the latest page fetched, as a run without --with-page leaves them
    page = rows.latest_body(c, N8N, str(tid), PAGE, current["version"])
    row = rebuilt_row(decompress(api["body"]), api["body_fetched_at"],
                      None if page is None else decompress(page), current)
    upsert(c, "workflows", row, "id")
    # the videos the extractor finds now; the next run queues the transcripts of new ones (youtube's resume)
    templates.replace_videos(c, tid, json.loads(row["videos"]))
    return 1
