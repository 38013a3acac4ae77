"""Keeping the mirror current: compare a listing walk with what is stored, queue what needs a fetch.

`seed --from-search` walks the whole listing; `plan()` (pure) sorts its ids into new, changed (the
listing entry differs in anything but view counters), missing (stored and live but absent from a
complete walk) and restored (marked removed, listed again). Missing ids are only queued for a re-fetch:
the listing is a popularity ranking that can shift during a walk, so an id may slip between two pages.
The worker confirms a removal when the detail answer is 404/410 (`answers.removal`).
"""

import dataclasses
import datetime
import hashlib
import json

from scraper.db import listing, templates
from scraper.db.queue import Queue
from scraper.db.store import transaction
from scraper.mirror import answers, seed
from scraper.policy import revalidate
from scraper.sites import n8n

DAY_S = 86_400


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a walk of a listing (n8n's, or a catalogue's sitemaps) found against the mirror: keys to fetch
    as new, as changed, to confirm as removed (missing from a complete walk), and listed again."""

    new: list
    changed: list
    missing: list
    restored: list


def entry_hash(item):
    """SHA-256 of a listing entry without its view counters, keys sorted."""
    canonical = json.dumps(revalidate.without_view_counters(item), ensure_ascii=False, sort_keys=True,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def paid_of(item):
    """(price or None, purchase URL or None, paid 1/0) of a listing entry (pure): paid when its price is
    above 0 or it has a purchase URL, as n8n's own site decides."""
    price = item.get("price")
    price = float(price) if isinstance(price, (int, float)) and not isinstance(price, bool) and price > 0 else None
    url = item.get("purchaseUrl")
    url = url if isinstance(url, str) and url.strip() else None
    return price, url, int(price is not None or url is not None)


def plan(listed, complete, known, stored_hashes, live, removed):
    """What a walk means. `listed`: {id: entry hash} of this walk; `known`: ids with a job;
    `stored_hashes`: {id: entry hash} of the last walks; `live`/`removed`: ids stored in `workflows`
    and not removed / removed. Only a complete walk can miss anything."""
    return Plan(
        new=[i for i in listed if i not in known],
        changed=[i for i, h in listed.items()
                 if i in known and i not in removed and stored_hashes.get(i, h) != h],
        missing=sorted(set(live) - set(listed)) if complete else [],
        restored=[i for i in listed if i in removed],
    )


def apply(conn, settings, walk, started_at, now):
    """Seed new ids, queue changed, missing and restored ones, and remember the walk. Returns
    (plan, seeded new, already known). Times are Unix seconds."""
    listed = {tid: entry_hash(item) for tid, item in walk.entries.items()}
    known = {int(k.split(":", 1)[1]) for k in templates.job_keys(conn, n8n.SITE)}
    stored = listing.entry_hashes(conn)
    live, removed = templates.live_and_removed_ids(conn)
    p = plan(listed, walk.complete, known, stored, live, removed)
    queue = Queue(conn)
    new, already = queue.seed(seed.job_rows(settings, listed), now)
    # jobs first, the listing's hashes after: a crash in between only makes the next walk queue them again
    queue.refetch([n8n.job_key(i) for i in p.changed + p.missing + p.restored], now)
    at = iso(now)
    with transaction(conn) as c:
        paid = {tid: paid_of(item) for tid, item in walk.entries.items()}
        listing.remember(c, at, [(tid, h, *paid[tid][:2]) for tid, h in listed.items()])
        templates.set_listed(c, at, [(tid, *paid[tid]) for tid in listed])
        for tid in p.restored:
            answers.restored(c, tid, at)
        listing.record_walk(c, iso(started_at), at, walk.complete, walk.pages, len(listed), len(p.new),
                            len(p.changed), len(p.missing), len(p.restored))
    return p, new, already


def refresh(conn, older_than_days, limit, now):
    """Queue done, live templates last fetched more than `older_than_days` ago (0: all), oldest first
    (their claim order follows their fetch time). Returns how many were queued."""
    before = iso(now - older_than_days * DAY_S) if older_than_days > 0 else None
    due = [(n8n.job_key(tid), min(_epoch(fetched_at, now), now))
           for tid, fetched_at in templates.due(conn, n8n.SITE, before, limit)]
    return Queue(conn).refetch(due, now)


def why_none_due(conn, older_than_days, now):
    """The reason a refresh queued nothing, as the end of a sentence."""
    oldest = templates.oldest_done(conn, n8n.SITE)
    if oldest is None:
        return "no live template is stored and done (a pending or failed one is fetched by `scraper run`)"
    age_days = max(0.0, now - _epoch(oldest, now)) / DAY_S
    return (f"none was last fetched more than {older_than_days} day(s) ago (the oldest was fetched "
            f"{age_days:.1f} day(s) ago, at {oldest}); lower --older-than to queue some")


def iso(ts):
    """Unix seconds as the ISO 8601 UTC text every stored time of the mirror uses."""
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(timespec="seconds")


def parse_time(text):
    """ISO 8601 text (a date, or a time with or without an offset; no offset means UTC) as stored text;
    ValueError if it is none of those."""
    t = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    return iso(t.timestamp())


def _epoch(text, default):
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except (TypeError, ValueError):
        return default
