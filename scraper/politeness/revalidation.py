"""Cheap refreshes, the polite client's side (issue 43): before a request, the URL's kept validators become
`If-None-Match` / `If-Modified-Since` (verbatim, and only under the Accept-Encoding they came with); after it,
a 304 hands back the kept answer, its headers freshened and its validation time moved, and a 200 with a
validator is kept for the next time. Each answer is counted per source and endpoint kind, and the verdict
(`policy/revalidate.next_state`) stops the validators where a server ignores them or lies: a sample of the
304s is fetched again in full, and a 304 whose content had changed marks the endpoint unreliable.

A 304 still took the domain's rate slot (it is a request like any other); a failure (a 5xx during a
revalidation) raises as before and leaves the kept answer as it was. `revalidate = false` (the run's, or a
source's) sends no validator and keeps nothing."""

from __future__ import annotations

import dataclasses
import logging
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from scraper.db import validators as rows
from scraper.db.store import transaction
from scraper.net import http
from scraper.policy import revalidate as rules

if TYPE_CHECKING:
    from scraper.base.clock import Clock
    from scraper.base.settings import Settings
    from scraper.db.backend import Conn

log = logging.getLogger(__name__)

ZLIB_LEVEL = 6      # a kept body is written on every changed answer: speed over the last percent of size
NOT_MODIFIED, IDENTICAL = "server-not-modified", "identical-payload-digest"     # WARC revisit profiles


@dataclasses.dataclass(frozen=True)
class Ask:
    """One request's revalidation: the URL's kept answer (None: none, or not to be used) and the validators
    sent with it ({}: an unconditional request)."""

    source: str
    endpoint: str
    url: str
    stored: rows.Stored | None
    headers: dict[str, str]
    state: str


def on(settings: Settings, source: str | None) -> bool:
    """Whether revalidation is on for `source`'s requests (the run's `revalidate` and the source's own)."""
    if not settings.revalidate:
        return False
    src = settings.source(source) if source else None
    return src is None or bool(src.revalidate)


class Revalidation:
    """One process's revalidations, over its connection (the request log's)."""

    def __init__(self, settings: Settings, conn: Conn, clock: Clock, encoding: Callable[[], str]) -> None:
        self.s, self.conn, self.clock = settings, conn, clock
        self.encoding = encoding        # the Accept-Encoding the session sends now (the validators depend on it)

    def ask(self, source: str, endpoint: str, url: str) -> Ask:
        """The validators to send for `url` (none where the endpoint's verdict says they are not worth it)."""
        counts = rows.counts(self.conn, source, endpoint)
        state = counts.state if counts is not None else rules.UNKNOWN
        stored = rows.load(self.conn, url) if rules.sends(state) else None
        headers = rules.conditional(stored.headers, stored.accept_encoding, self.encoding()) if stored else {}
        return Ask(source, endpoint, url, stored, headers, state)

    def answered(self, ask: Ask, body: bytes, refetch: Callable[[], bytes]) -> bytes:
        """The answer to hand back for `body` (a 304: the kept one), the kept row and the counts brought up to
        date; `refetch()` sends the request again without validators (the sample that checks a 304)."""
        now = self.clock()
        status = getattr(body, "status", None)
        if status == 304 and ask.stored is not None:
            return self._not_modified(ask, ask.stored, body, now, refetch)
        unchanged = bool(ask.headers) and ask.stored is not None and rules.digest(body) == ask.stored.digest
        with self._writing():
            if unchanged:
                assert ask.stored is not None
                self._revisit(ask, now, IDENTICAL, ask.stored)
            self._keep(ask, body, now)
            self._count(ask, conditional=int(bool(ask.headers)), unchanged_200=int(unchanged))
        return body

    def _writing(self) -> transaction:
        """The rows of one answer written together, in a transaction: on SQLite a run's transaction waits out
        an outsider's lock (`db/sqlite.Connection.begin`), where a lone statement would fail after the busy
        timeout; shared: the rows are upserts of this URL's and counters, no claim's business."""
        return transaction(self.conn, shared=True)

    def _not_modified(self, ask: Ask, stored: rows.Stored, answer: bytes, now: float,
                      refetch: Callable[[], bytes]) -> bytes:
        headers = rules.merged(stored.headers, getattr(answer, "headers", {}))
        with self._writing():
            rows.freshened(self.conn, ask.url, headers, now)
        if rules.sampled(ask.url, stored.checks, self.s.revalidate_sample):
            fresh = refetch()
            lied = rules.digest(fresh) != stored.digest
            if lied:
                log.warning("%s answered 304 Not Modified for %s, but its content had changed: its validators are "
                            "not trusted any more (%s)", ask.source, ask.url, ask.endpoint)
            with self._writing():
                if not lied:
                    self._revisit(ask, now, NOT_MODIFIED, stored)
                self._keep(ask, fresh, now)
                # two requests, and the full one spent the bytes the 304 saved
                self._count(ask, requests=2, conditional=1, not_modified=1, sampled=1, lied=int(lied))
            return fresh
        with self._writing():
            self._revisit(ask, now, NOT_MODIFIED, stored)
            self._count(ask, conditional=1, not_modified=1, bytes_saved=stored.size)
        out = http.answer(zlib.decompress(stored.body), stored.final_url, stored.status, stored.content_type,
                          headers)
        out.not_modified = True
        return out

    def kept_sitemap(self, url: str, lastmod: str | None) -> bytes | None:
        """The kept sitemap file at `url` when its index still gives it the date it had when fetched (None:
        fetch it); what it saved is counted, no request is."""
        stored = rows.load(self.conn, url) if lastmod else None
        if stored is None or stored.lastmod != lastmod:
            return None
        with self._writing():
            rows.count(self.conn, stored.source, stored.endpoint, bytes_saved=stored.size)
        return zlib.decompress(stored.body)

    def dated(self, url: str, lastmod: str | None) -> None:
        """The date the index gave the sitemap file just fetched from `url`."""
        with self._writing():
            rows.dated(self.conn, url, lastmod)

    def _keep(self, ask: Ask, body: bytes, now: float) -> None:
        """Keep a full answer with its validators for the next time (a sitemap file even without: its index's
        date may spare the next request); one without any forgets the URL's (they would revalidate an answer
        that is not the latest)."""
        headers = rules.kept(getattr(body, "headers", {}))
        worth = rules.has_validator(headers) or (ask.endpoint == rules.SITEMAP and not rules.varies_always(headers))
        if not worth or not rules.sends(ask.state):
            if ask.stored is not None:
                rows.forget(self.conn, ask.url)
            return
        checks = ask.stored.checks + 1 if ask.stored is not None else 0
        rows.save(self.conn, rows.Stored(
            ask.url, ask.source, ask.endpoint, headers.get("etag"), headers.get("last-modified"), self.encoding(),
            headers, getattr(body, "status", None) or 200, getattr(body, "url", None),
            getattr(body, "content_type", None), rules.digest(body), len(body), zlib.compress(body, ZLIB_LEVEL),
            now, now, checks))

    def _revisit(self, ask: Ask, now: float, profile: str, stored: rows.Stored) -> None:
        """A job's item only: its answers are the mirror's, which the WARC export writes (a walk's are not)."""
        if ask.endpoint == rules.ITEM:
            rows.revisit(self.conn, ask.url, now, profile, stored.digest, stored.fetched_at, stored.etag,
                         stored.last_modified)

    def _count(self, ask: Ask, requests: int = 1, **counted: int) -> None:
        counts = rows.count(self.conn, ask.source, ask.endpoint, requests=requests, **counted)
        state = rules.next_state(counts)
        if state != counts.state:
            log.info("validators at %s (%s): %s", ask.source, ask.endpoint, state)
            rows.set_state(self.conn, ask.source, ask.endpoint, state)
            if not rules.sends(state):      # nothing will be sent: the kept answers are dead weight
                rows.forget_endpoint(self.conn, ask.source, ask.endpoint)
