"""The pull feed of the outbox (`scraper changes --after`, the MCP server's changes): pages of events after
a cursor, each page with the cursor to resume from.

A consumer stores `next` and passes it back as the next `after`; it never misses an event and sees each
once, since `seq` is commit-ordered (db/events.py). The compacted form gives only the newest event of each
template, item, job and run (a removal is its tombstone), so a cursor of any age, 0 included, resyncs with
what is live and what was removed without reading every version in between.
"""

import time

from scraper.base.errors import ConfigError
from scraper.db import events

POLL_S = 1.0             # --follow: how often an idle feed asks again
TYPE_FAMILIES = ("template", "item", "job", "run")


def check_types(types):
    """The types as given, or ConfigError naming a bad one (a type is `family.name` or `family.*`)."""
    for t in types:
        family, dot, name = t.partition(".")
        if family not in TYPE_FAMILIES or not dot or not name:
            raise ConfigError(f"{t!r} is not an event type; use e.g. template.updated, item.removed, job.failed, "
                              f"run.finished, or a family as template.* ({', '.join(TYPE_FAMILIES)}).")
    return tuple(types)


def page(conn, after=0, limit=None, compact=False, types=()):
    """{"changes": [event], "next": cursor}: the events after `after` in seq order (compacted: the newest of
    each subject), at most `limit`. `next` is the last seq given, or `after` when there is none."""
    if after < 0:
        raise ConfigError(f"a cursor is 0 or more (got {after}).")
    read = events.compacted if compact else events.after
    rows = [events.as_dict(r) for r in read(conn, after, limit, tuple(types))]
    return {"changes": rows, "next": rows[-1]["seq"] if rows else after}


def newest(conn, limit, types=(), source=None):
    """The newest `limit` events of `types` (of `source` only), newest first, as `page` gives each."""
    return [events.as_dict(r) for r in events.newest(conn, limit, check_types(types), source)]


def follow(conn, after=0, limit=None, compact=False, types=(), poll_s=POLL_S, sleep=time.sleep,
           stop=lambda: False):
    """Pages as `page` gives them, for ever (until `stop()`): each page that has events, waiting `poll_s`
    between reads that found fewer than `limit`. Only the first read is compacted (`compact`): after it
    every event counts."""
    while not stop():
        got = page(conn, after, limit, compact, types)
        compact = False
        after = got["next"]
        if got["changes"]:
            yield got
        if limit is None or len(got["changes"]) < limit:
            sleep(poll_s)
