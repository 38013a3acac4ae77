"""A catalogue source's sitemap dates, trusted only when earned (issue 43).

A stored page whose sitemap date did not move is fetched anyway (the job asks with its validators: a 304 costs
few bytes; else the content hash decides) as the source's trust says: once it lied (a page changed under an
unmoved date, or nearly every page carries one day: a generator stamping its build date), every such page, each
walk; until trust is earned, LASTMOD_TRUST_AFTER of them a walk (chosen by a hash that moves each day); once
earned, one in `revalidate_sample`, and a child sitemap whose index date did not move is read from what was kept
of it. Each page so queued is a sample: the next walk settles it (its content unchanged proves the date; changed,
the date lied, which takes the trust away for good). The rules are `policy/revalidate`'s; the rows `db/validators`'."""

import logging

from scraper.db import validators as rows
from scraper.db.store import transaction
from scraper.mirror import sync
from scraper.policy import revalidate as rules
from scraper.politeness import revalidation

log = logging.getLogger(__name__)

DAY_S = 86400


class Dates:
    """One walk's view of a source's dates: `trusted`, and `checks()`, the unmoved pages to fetch anyway."""

    def __init__(self, conn, settings, source, now):
        self.conn, self.s, self.name, self.now = conn, settings, source.name, now
        self.on = revalidation.on(settings, source.name)
        if self.on:
            self._settle()
        sampled, lied = rows.lastmod_trust(conn, self.name)
        self.trusted, self.lied = self.on and rules.lastmod_trusted(sampled, lied), lied > 0

    def _settle(self):
        """The samples fetched since they were queued: each proves the dates or shows a lie."""
        done, proved, lied = [], 0, 0
        for key, then, queued_at, now_hash, fetched_at in rows.samples(self.conn, self.name):
            if now_hash is not None and (fetched_at is None or fetched_at < sync.iso(queued_at)):
                continue        # not fetched again yet
            done.append(key)
            if now_hash is not None:
                proved, lied = proved + (now_hash == then), lied + (now_hash != then)
        if not done:
            return
        with transaction(self.conn) as c:
            rows.lastmod_checked(c, self.name, proved, lied)
            rows.settled(c, self.name, done)
        if lied:
            log.warning("source %s: %d page(s) changed although their sitemap lastmod did not move: its dates are "
                        "not trusted any more", self.name, lied)

    def checks(self, listed, items, moved):
        """The stored, live, listed pages whose date did not move (`moved`: those queued for a moved one) that
        are fetched anyway, each recorded as a sample. None with `revalidate` off (the dates are believed, as
        before)."""
        if not self.on:
            return []
        if rules.build_dated(lastmod for _, lastmod in listed.values()):
            log.warning("source %s: nearly every page of its sitemaps carries the same lastmod day (a build date): "
                        "its dates are not trusted any more", self.name)
            rows.lastmod_checked(self.conn, self.name, 0, 1)
            self.trusted, self.lied = False, True
        unmoved = [path for path in listed if path in items and items[path][1] is None and path not in moved]
        day = int(self.now // DAY_S)
        if self.trusted:
            unmoved = [p for p in unmoved if rules.sampled(listed[p][0], day, self.s.revalidate_sample)]
        elif not self.lied:
            unmoved = rules.first_by_hash(unmoved, day, rules.LASTMOD_TRUST_AFTER)
        rows.sample(self.conn, self.name, unmoved, self.now)
        return unmoved
