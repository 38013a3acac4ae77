"""The record of the sources' walks (table `source_walks`): what the cadence and `scraper sources` read.

Apart from the walks themselves (scraper.mirror.walks) so that a reader (products) reaches it without
importing anything that sends requests."""

from __future__ import annotations

import datetime
from typing import Protocol

from scraper.base.sources import Source
from scraper.db.backend import Conn
from scraper.db.dialect import same
from scraper.db.store import transaction
from scraper.policy import cadence

Walks = dict[str, tuple[float | None, float | None]]     # `last_walks`: {source: (last finish, last complete finish)}


class WalkResult(Protocol):
    """What `record` reads of a walk: scraper.mirror.walks.WalkResult, which this layer may not import."""

    @property
    def new(self) -> int: ...
    @property
    def changed(self) -> int: ...
    @property
    def removed(self) -> int: ...
    @property
    def restored(self) -> int: ...
    @property
    def requests(self) -> int: ...
    @property
    def complete(self) -> bool: ...


def iso(ts: float) -> str:
    """Unix seconds as ISO 8601 UTC text."""
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(timespec="seconds")


def _epoch(text: str | None) -> float | None:
    return None if text is None else datetime.datetime.fromisoformat(text).timestamp()


def record(conn: Conn, name: str, started_at: float, finished_at: float, result: WalkResult | None = None,
           error: str | None = None) -> None:
    """Add one walk of the source `name` (times in Unix seconds); `result` is a mirror.walks.WalkResult
    (None with an `error`): a walk that failed is never complete."""
    counts = [getattr(result, k, 0) for k in ("new", "changed", "removed", "restored", "requests")]
    complete = bool(result is not None and result.complete and error is None)
    with transaction(conn) as c:
        c.execute(same("INSERT INTO source_walks (source, started_at, finished_at, complete, new, changed, removed, "
                       "restored, requests, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
                  (name, iso(started_at), iso(finished_at), int(complete), *counts, error))


def last_walks(conn: Conn) -> Walks:
    """{source: (last walk's finish, last complete walk's finish)} in Unix seconds (None: never)."""
    out: Walks = {}
    for name, last, complete in conn.execute(
            same("SELECT source, MAX(finished_at), MAX(CASE WHEN complete = 1 THEN finished_at END) FROM source_walks "
                 "GROUP BY source")):
        out[name] = (_epoch(last), _epoch(complete))
    return out


def next_due(conn: Conn, source: Source, now: float, walks: Walks | None = None) -> float:
    """Unix time the source's next walk is due (`now` when it is due already); `walks`: `last_walks`."""
    walks = last_walks(conn) if walks is None else walks
    return max(now, cadence.next_due_at(source.every_s, walks.get(source.name, (None, None))[1], now))
