"""Cheap refreshes (issue 43): validators kept exactly as received and sent back verbatim through the one polite
client, a 304 handed back as the kept answer, and the traps (a weak tag, a 304 without its ETag, strict dates,
a server that ignores validators, one that lies, a 5xx during a revalidation). The pure rules first; then
in-process, the network faked by `responses`, a real SQLite database (and the counts on PostgreSQL)."""

import json
import time
import types

import pytest
import responses
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st

from scraper.base import settings
from scraper.base.clock import FakeClock
from scraper.base.errors import FetchError
from scraper.db import store
from scraper.db import validators as rows
from scraper.db.queue import Queue
from scraper.policy import revalidate as rules
from scraper.politeness import client

URL = "http://site.test/sitemap.xml"
BODY = b"<urlset><url><loc>http://site.test/a</loc></url></urlset>"


# --- the pure rules ------------------------------------------------------------------------------

def test_a_304_freshens_the_stored_fields_but_never_their_coding_or_length_and_keeps_an_etag_it_omits():
    stored = {"etag": 'W/"a"', "content-encoding": "gzip", "content-length": "10", "date": "old"}
    out = rules.merged(stored, {"Date": "new", "Content-Encoding": "br", "Content-Length": "0", "X-Other": "y"})
    assert out == {"etag": 'W/"a"', "content-encoding": "gzip", "content-length": "10", "date": "new"}


def test_validators_are_sent_verbatim_only_under_the_accept_encoding_they_came_with():
    lm = "Sun, 06 Nov 1994 08:49:37 GMT"
    headers = {"etag": 'W/"a-gzip"', "last-modified": lm}
    assert rules.conditional(headers, "gzip, deflate", "gzip, deflate") == {
        "If-None-Match": 'W/"a-gzip"', "If-Modified-Since": lm}
    assert rules.conditional(headers, "gzip, deflate, br", "gzip, deflate") == {}
    assert rules.conditional({**headers, "vary": "Accept, *"}, "gzip", "gzip") == {}


def test_the_verdict_of_an_endpoint():
    assert rules.next_state(rules.Counts(unchanged_200=rules.IGNORED_AFTER - 1)) == rules.UNKNOWN
    assert rules.next_state(rules.Counts(unchanged_200=rules.IGNORED_AFTER)) == rules.IGNORED
    assert rules.next_state(rules.Counts(not_modified=1, unchanged_200=9)) == rules.USED
    assert rules.next_state(rules.Counts(not_modified=5, lied=1, state=rules.USED)) == rules.UNRELIABLE
    assert rules.next_state(rules.Counts(not_modified=5, state=rules.IGNORED)) == rules.IGNORED
    assert rules.source_state([rules.USED, rules.UNKNOWN]) == rules.USED
    assert rules.source_state([rules.USED, rules.UNRELIABLE]) == rules.UNRELIABLE
    assert not rules.sends(rules.IGNORED) and not rules.sends(rules.UNRELIABLE) and rules.sends(rules.USED)


def test_the_sample_takes_each_url_in_its_turn_one_in_every_and_none_early():
    urls = [f"http://site.test/{i}" for i in range(200)]
    assert not any(rules.sampled(u, n, 0) for u in urls for n in range(30))
    assert all(rules.sampled(u, n, 1) for u in urls for n in range(3))
    assert not any(rules.sampled(u, n, 10) for u in urls for n in range(9))     # none before the 10th
    for u in urls:
        taken = [n for n in range(9, 109) if rules.sampled(u, n, 10)]
        assert len(taken) == 10 and all(b - a == 10 for a, b in zip(taken, taken[1:], strict=False))
    assert 5 < len({u for u in urls if rules.sampled(u, 15, 10)}) < 40        # a run's samples are spread


def test_a_view_count_is_no_change_of_content():
    assert rules.digest(b'{"workflow": {"id": 1, "views": 3}}') == rules.digest(b'{"workflow": {"views": 9, "id": 1}}')
    assert rules.digest(b'{"workflow": {"id": 1}}') != rules.digest(b'{"workflow": {"id": 2}}')


def test_a_sitemap_stamped_with_its_build_date_is_not_trusted():
    assert rules.build_dated(["2026-11-27T10:00:00Z"] * 25 + ["2026-01-01"])
    assert not rules.build_dated([f"2026-10-{d:02d}" for d in range(1, 26)])
    assert not rules.lastmod_trusted(rules.LASTMOD_TRUST_AFTER - 1, 0)
    assert rules.lastmod_trusted(rules.LASTMOD_TRUST_AFTER, 0) and not rules.lastmod_trusted(99, 1)


FIELDS = st.sampled_from(["ETag", "etag", "Last-Modified", "Date", "Cache-Control", "Content-Encoding",
                           "Content-Length", "Content-Type", "Vary", "X-Other"])
VALUES = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=12)


@given(st.dictionaries(FIELDS, VALUES), st.dictionaries(FIELDS, VALUES))
@examples(max_examples=80, deadline=None)
def test_a_304_never_moves_the_coding_or_length_and_never_loses_a_field(stored, answer):
    kept = rules.kept(stored)
    out = rules.merged(kept, answer)
    for field in rules.NEVER_FROM_304:
        assert out.get(field) == kept.get(field)
    assert set(kept) <= set(out) and set(out) <= set(rules.KEPT)
    for name, value in rules.kept(answer).items():
        if name not in rules.NEVER_FROM_304:
            assert out[name] == value


@given(st.builds(rules.Counts, st.integers(0, 9), st.integers(0, 9), st.integers(0, 9), st.integers(0, 9),
                 st.integers(0, 99), st.integers(0, 3), st.integers(0, 3), st.sampled_from(rules.STATES)))
@examples(max_examples=80, deadline=None)
def test_the_verdict_never_sends_again_once_ignored_or_unreliable(c):
    state = rules.next_state(c)
    assert state in rules.STATES
    if c.lied:
        assert state == rules.UNRELIABLE
    if c.state in (rules.IGNORED, rules.UNRELIABLE):
        assert not rules.sends(state)


# --- through the polite client ---------------------------------------------------------------------

class Server:
    """The stand-in's validators (scripts/standin/validators.py, in one of its trap modes) behind a `responses`
    callback: what it was sent, and what it answers; `failing`: a 503 instead."""

    def __init__(self, net, mode="strong", body=BODY):
        from scripts.standin.validators import Validators
        self.validators, self.body, self.sent, self.failing = Validators(mode), body, [], False
        net.add_callback(responses.GET, URL, callback=self)

    def __call__(self, request):
        self.sent.append((request.headers.get("If-None-Match"), request.headers.get("If-Modified-Since")))
        if self.failing:
            return 503, {}, b"down"
        status, headers = self.validators.answer(request.headers, self.body, path="/sitemap.xml")
        return status, headers, b"" if status == 304 else self.body


def _walk(backend, clock, **options):
    s = settings.build(db_path=backend, backoff_base_s=0.01, no_limit=True, **options)
    conn = store.open_db(s.db_path)
    return s, conn


def _get(s, conn, clock, url=URL):
    with client.opened(s, conn, "walk", clock) as polite:
        get = polite.walk(source="cat")
        return get(url)


@pytest.mark.parametrize("mode", ["weak", "no-etag-304", "dates"])
def test_each_kind_of_validator_is_echoed_exactly_and_gets_its_304(tmp_path, net, mode):
    clock = FakeClock(time.time())
    s, conn = _walk(str(tmp_path / "jobs.db"), clock)
    server = Server(net, mode)
    first = _get(s, conn, clock)
    kept = rows.load(conn, URL)
    assert first == BODY and kept is not None and kept.accept_encoding == "gzip, deflate"
    for _ in range(2):      # after a 304 without its ETag, the next request is still conditional
        clock.sleep(60)
        again = _get(s, conn, clock)
        assert again == BODY and again.not_modified
    echoed = (kept.etag, kept.last_modified)        # exactly as received
    shape = {"weak": lambda: kept.etag.startswith('W/"'),
             "no-etag-304": lambda: kept.etag.startswith('"') and kept.last_modified is not None,
             "dates": lambda: kept.etag is None and kept.last_modified.endswith(" GMT")}[mode]
    assert shape()
    assert server.sent == [(None, None), echoed, echoed]
    after = rows.load(conn, URL)
    assert after.validated_at == pytest.approx(kept.validated_at + 120) and after.fetched_at == kept.fetched_at
    assert (after.etag, after.last_modified) == (kept.etag, kept.last_modified)
    assert rows.counts(conn, "cat", rules.SITEMAP) == rules.Counts(
        requests=3, conditional=2, not_modified=2, bytes_saved=2 * len(BODY), state=rules.USED)
    # each 304 was a request like any other: its rate slot taken, its line in the request log
    assert conn.execute("SELECT COUNT(*) FROM requests WHERE kind = 'ok'").fetchone()[0] == 3
    conn.close()


def test_a_server_that_ignores_validators_is_noticed_and_sent_them_no_more(tmp_path, net):
    clock = FakeClock(time.time())
    s, conn = _walk(str(tmp_path / "jobs.db"), clock)
    server = Server(net, "ignore")
    for _ in range(rules.IGNORED_AFTER + 3):
        assert _get(s, conn, clock) == BODY
    conditional = [sent for sent in server.sent if sent != (None, None)]
    assert len(conditional) == rules.IGNORED_AFTER      # then as today: plain requests, nothing kept
    counts = rows.counts(conn, "cat", rules.SITEMAP)
    assert counts.state == rules.IGNORED and counts.unchanged_200 == rules.IGNORED_AFTER
    assert rows.load(conn, URL) is None
    conn.close()


def test_a_304_although_the_content_changed_is_caught_by_the_sample(tmp_path, net):
    clock = FakeClock(time.time())
    s, conn = _walk(str(tmp_path / "jobs.db"), clock, revalidate_sample=1)
    server = Server(net, "lie")
    assert _get(s, conn, clock) == BODY
    server.body = BODY.replace(b"/a<", b"/b<")      # changed; the server still says 304 to its one tag
    assert _get(s, conn, clock) == server.body      # the sample's full answer, not the kept one
    counts = rows.counts(conn, "cat", rules.SITEMAP)
    assert counts.lied == 1 and counts.state == rules.UNRELIABLE
    assert (counts.requests, counts.conditional, counts.not_modified, counts.bytes_saved) == (3, 1, 1, 0)
    sent_before = len(server.sent)
    assert _get(s, conn, clock) == server.body and server.sent[sent_before:] == [(None, None)]
    conn.close()


def test_a_5xx_during_a_revalidation_leaves_the_kept_answer_untouched(tmp_path, net):
    clock = FakeClock(time.time())
    s, conn = _walk(str(tmp_path / "jobs.db"), clock, max_attempts=1)
    server = Server(net)
    _get(s, conn, clock)
    kept = rows.load(conn, URL)
    server.failing = True
    with pytest.raises(FetchError) as e:
        _get(s, conn, clock)
    assert e.value.status == 503 and rows.load(conn, URL) == kept
    server.failing = False          # tried again later, as today: conditional, and the 304 holds
    assert _get(s, conn, clock).not_modified
    conn.close()


def test_revalidate_off_sends_and_keeps_nothing(tmp_path, net):
    clock = FakeClock(time.time())
    s, conn = _walk(str(tmp_path / "jobs.db"), clock, revalidate=False)
    server = Server(net)
    _get(s, conn, clock)
    _get(s, conn, clock)
    assert server.sent == [(None, None), (None, None)] and rows.load(conn, URL) is None
    assert rows.by_source(conn) == {}
    conn.close()


def test_the_counts_on_each_backend(backend, net):
    clock = FakeClock(time.time())
    s, conn = _walk(backend, clock)
    Server(net, "weak")
    _get(s, conn, clock)
    assert _get(s, conn, clock).not_modified
    assert rows.by_source(conn)["cat"][rules.SITEMAP].not_modified == 1
    assert rows.load(conn, URL).body and rows.revisits_of(conn, URL) == []     # a walk's: not in the WARC
    rows.revisit(conn, URL, 2.0, "server-not-modified", "d", 1.0, '"t"', None)
    assert [tuple(r) for r in rows.revisits_of(conn, URL)] == [(2.0, "server-not-modified", "d", 1.0, '"t"', None)]
    rows.dated(conn, URL, "2026-11-01")
    assert rows.load(conn, URL).lastmod == "2026-11-01"
    rows.lastmod_checked(conn, "cat", 2, 0)
    rows.lastmod_checked(conn, "cat", 1, 1)
    assert rows.lastmod_trust(conn, "cat") == (3, 1) and rows.all_lastmod_trust(conn) == {"cat": (3, 1)}
    rows.sample(conn, "cat", ["/nowhere"], 1.0)         # not a stored page: nothing to check
    assert rows.samples(conn, "cat") == []
    rows.forget_endpoint(conn, "cat", rules.SITEMAP)
    assert rows.load(conn, URL) is None
    conn.close()


# --- the n8n mirror against the stand-in (in-process: its server thread and one worker) --------------------

def _n8n(tmp_path, site, ids, **options):
    from scraper.mirror import seed
    from scraper.net import http
    from scraper.politeness import limiter
    from scraper.pool import worker

    s = settings.build(db_path=str(tmp_path / "jobs.db"), api_url=site.url + "/api", site_url=site.url,
                       transcripts=False, **options)
    conn = store.open_db(s.db_path)
    q = Queue(conn)
    q.seed(list(seed.job_rows(s, ids)), time.time())
    w = worker.Worker(s, "w1", q, limiter.NoLimiter(), http.make_session(s.user_agent))
    return s, conn, q, w


def _work(w):
    while w.step():
        pass


def test_a_refresh_of_templates_whose_detail_validators_ignore_views_is_mostly_304s(tmp_path):
    """The issue's 300 with 10 edited, scaled down (make bench prints the 300): the edited become version 2,
    the others stay version 1 with a later validation time; the view counts moved for all."""
    from scraper.mirror import sync
    from scripts.standin.server import StandinSite

    with StandinSite(templates=30, rate=0, validators="views") as site:
        ids = site.corpus.ids[:30]
        s, conn, q, w = _n8n(tmp_path, site, ids, revalidate_sample=0)
        _work(w)
        first = {r[0]: r[1] for r in conn.execute("SELECT url, validated_at FROM validators")}
        assert len(first) == 30
        edited = ids[:3]
        site.change_library(edit=edited, views=1)
        site.reset()
        assert sync.refresh(conn, 0, None, time.time()) == 30
        _work(w)
        versions = dict(conn.execute("SELECT template_id, MAX(version) FROM answers GROUP BY template_id").fetchall())
        assert {t for t, v in versions.items() if v == 2} == set(edited)
        assert all(versions[t] == 1 for t in ids[3:])
        stats = site.stats()
        assert stats["validators"]["not_modified"] == {"detail": 27} and stats["by_status"] == {"200": 3, "304": 27}
        later = {r[0]: r[1] for r in conn.execute("SELECT url, validated_at FROM validators")}
        assert all(later[u] > first[u] for u in later)
        counts = rows.counts(conn, "n8n", rules.ITEM)
        assert (counts.not_modified, counts.conditional, counts.state) == (27, 30, rules.USED)
        _warc_has_a_revisit_per_304(tmp_path, conn, s, 27)
        conn.close()
        w.client.session.close()


def _warc_has_a_revisit_per_304(tmp_path, conn, s, count):
    """The WARC export: a revisit record (server-not-modified) per 304, pointing at its version's response."""
    pytest.importorskip("warcio")
    from warcio.archiveiterator import ArchiveIterator
    from warcio.checker import Checker

    from scraper.products import warc
    out = tmp_path / "mirror.warc.gz"
    summary = warc.write_file(conn, str(out), (s.api_url, s.site_url))
    with open(out, "rb") as fh:
        records = [(r.rec_type, dict(r.rec_headers.headers)) for r in ArchiveIterator(fh)]
    responses_ = {h["WARC-Record-ID"]: h for t, h in records if t == "response"}
    revisits = [h for t, h in records if t == "revisit"]
    assert summary.revisits == len(revisits) == count
    for h in revisits:
        assert h["WARC-Profile"] == "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
        target = responses_[h["WARC-Refers-To"]]
        assert h["WARC-Refers-To-Target-URI"] == target["WARC-Target-URI"] == h["WARC-Target-URI"]
        assert h["WARC-Refers-To-Date"] == target["WARC-Date"] and "WARC-Payload-Digest" not in h
    assert Checker(types.SimpleNamespace(inputs=[str(out)], verbose=False)).process_all() == 0


def test_the_n8n_listing_whose_view_counts_move_costs_the_same_requests_and_reports_no_304(tmp_path):
    """As the real API behaves: every listing page carries view counts that move, so its tag moves too: the
    walk sends what it sent before (conditional, no HEAD, nothing more) and reports a 304 share of 0."""
    from scraper.mirror import seed
    from scraper.products import sources
    from scripts.standin.server import StandinSite
    from tests.helpers import in_process

    with StandinSite(templates=150, rate=0, validators="strong") as site:
        s = settings.build(db_path=str(tmp_path / "jobs.db"), api_url=site.url + "/api", site_url=site.url,
                           no_limit=True)
        conn = store.open_db(s.db_path)
        first = seed.discover(s)
        before = site.stats()["by_kind"]["search"]
        site.change_library(views=1)
        again = seed.discover(s)
        assert again.complete and again.pages == first.pages == 2
        assert site.stats()["by_kind"]["search"] == 2 * before and site.stats()["validators"]["not_modified"] == {}
        report = sources.report(conn, s, time.time())
        assert "; validators unknown: 0 of 2 conditional request(s) answered 304, 0 unchanged 200(s)" in \
            sources.render(report)
        shown = {r["name"]: r for r in report}["n8n"]["validators"]
        assert {k: shown[k] for k in ("requests", "conditional", "not_modified", "unchanged_200", "state")} == {
            "requests": 4, "conditional": 2, "not_modified": 0, "unchanged_200": 0, "state": "unknown"}
        where = types.SimpleNamespace(api_url=s.api_url, url=site.url)
        status = json.loads(in_process(where, tmp_path / "jobs.db", "status", "--json", check=0).stdout)
        assert status["validators"]["n8n"]["conditional"] == 2
        text = in_process(where, tmp_path / "jobs.db", "status", check=0).stdout
        assert "validate  n8n: unknown; 0 of 2 conditional request(s) answered 304" in text
        conn.close()


def test_an_unchanged_listing_page_answered_304_is_read_from_what_was_kept_and_counts_as_seen(tmp_path):
    from scraper.mirror import seed, sync
    from scripts.standin.server import StandinSite

    with StandinSite(templates=150, rate=0, validators="strong") as site:
        s = settings.build(db_path=str(tmp_path / "jobs.db"), api_url=site.url + "/api", site_url=site.url,
                           no_limit=True)
        conn = store.open_db(s.db_path)
        first = seed.discover(s)
        sync.apply(conn, s, first, time.time(), time.time())
        again = seed.discover(s)
        assert site.stats()["validators"]["not_modified"] == {"search": 2}
        assert again.complete and list(again.entries) == list(first.entries)
        sync.apply(conn, s, again, time.time(), time.time())
        walked = conn.execute("SELECT listed, complete FROM walks ORDER BY rowid DESC LIMIT 1").fetchone()
        assert tuple(walked) == (150, 1)        # a complete walk that saw every id: none can pass for missing
        conn.close()


# --- a catalogue source: sitemap dates trusted when earned (the events stand-in in-process, on 127.0.0.2) ------

class Catalogue:
    """The events stand-in, a source of it, a SQLite mirror; `walk()` through the polite client, `run()` one
    in-process worker until nothing is left."""

    def __init__(self, tmp_path, site, **options):
        import dataclasses
        import random

        from scraper.net import http
        from scraper.politeness import limiter
        from scraper.pool import worker
        from tests.test_catalogue_walk import events_source

        self.site, self.source = site, events_source(site.url)
        self.s = dataclasses.replace(settings.build(db_path=str(tmp_path / "jobs.db"), transcripts=False,
                                                    no_limit=True, **options), sources=(self.source,))
        self.conn = store.open_db(self.s.db_path)
        self.session = http.make_session(self.s.user_agent)
        self.worker = worker.Worker(self.s, "w1", Queue(self.conn), limiter.NoLimiter(), self.session,
                                    rng=random.Random(1))

    def walk(self):
        from scraper.mirror import catalogue as walker
        with client.opened(self.s, self.conn, "walk") as polite:
            get = polite.walk(source=self.source.name)
            return walker.walk(self.conn, self.s, self.source, get, time.time())

    def run(self):
        _work(self.worker)

    def day(self):
        """A day later for robots.txt (kept 24 h), and the stand-in's counters from zero."""
        self.conn.execute("UPDATE robots SET fetched_at = fetched_at - 90000")
        self.site.reset()

    def close(self):
        self.worker.client.session.close()
        self.conn.close()


@pytest.fixture
def events(tmp_path):
    from scripts.standin.catalogue import CatalogueSite
    made = []

    def make(lastmod="true", events=20, **options):
        site = CatalogueSite(events=events, seed=3, lastmod=lastmod).start()
        made.append(Catalogue(tmp_path, site, **options))
        return made[-1]

    yield make
    for c in made:
        c.close()
        c.site.shutdown()


def _earn_trust(c):
    """A first walk and run, then a walk whose few checked pages prove the dates (settled by the next)."""
    assert c.walk().checked == 0        # nothing stored yet
    c.run()
    assert c.walk().checked == rules.LASTMOD_TRUST_AFTER
    c.run()


def test_a_catalogue_on_an_unchanged_day_costs_two_304s_then_only_what_changed(events):
    c = events(revalidate_sample=0)
    _earn_trust(c)
    c.walk()        # settles the checks: the dates earned their trust
    assert validators_shown(c)["lastmod"] == {"trusted": True, "sampled": 3, "lied": 0}
    c.day()
    result = c.walk()
    c.run()
    stats = c.site.stats()
    assert result.complete and (result.new, result.changed, result.removed) == (0, 0, 0)
    assert stats["by_kind"] == {"robots": 1, "sitemap_index": 1} and stats["by_status"] == {"304": 2}
    assert stats["bytes_sent"] < 4096
    # one page edited: its child sitemap's date moves in the index, so that child and that page, nothing else
    key = sorted(r[0] for r in c.conn.execute("SELECT key FROM items"))[0]
    eid = int(key.rsplit("-", 1)[1])
    c.site.catalogue.change(edit=[eid])
    c.day()
    result = c.walk()
    c.run()
    stats = c.site.stats()
    assert result.changed == 1 and stats["by_kind"] == {"robots": 1, "sitemap_index": 1, "sitemap": 1, "event": 1}
    assert c.conn.execute("SELECT version FROM items WHERE key = ?", (key,)).fetchone()[0] == 2


def test_a_sitemap_whose_dates_never_move_loses_its_trust_and_the_changes_are_still_caught(events):
    c = events(lastmod="frozen", revalidate_sample=1)
    _earn_trust(c)
    keys = sorted(r[0] for r in c.conn.execute("SELECT key FROM items"))
    edited = [int(k.rsplit("-", 1)[1]) for k in keys[:2]]
    c.site.catalogue.change(edit=edited)        # the pages change, their dates do not
    assert c.walk().changed == 0
    c.run()                                     # the sample (every page, at 1) fetches them: version 2
    versions = dict(c.conn.execute("SELECT key, version FROM items").fetchall())
    assert [versions[k] for k in keys[:2]] == [2, 2] and {versions[k] for k in keys[2:]} == {1}
    c.walk()                                    # settles: a change under an unmoved date
    shown = validators_shown(c)["lastmod"]
    assert shown["trusted"] is False and shown["lied"] == 2
    pending = c.conn.execute("SELECT COUNT(*) FROM jobs WHERE status = 'pending'").fetchone()[0]
    assert pending == len(keys)                 # no longer trusted: every page is asked (304s where unchanged)


def test_a_sitemap_stamped_with_its_build_date_is_not_trusted_and_its_pages_are_asked_with_validators(events):
    c = events(lastmod="build", events=40)
    first = c.walk()
    c.run()
    c.site.reset()
    again = c.walk()
    shown = validators_shown(c)["lastmod"]
    assert shown["trusted"] is False and shown["lied"] == 2     # both walks' dates were one build's
    assert again.changed == first.new == first.listed >= rules.SAME_DAY_MIN
    c.run()                                                     # every page asked again: each a 304
    assert c.site.stats()["validators"]["not_modified"]["event"] == first.listed


def validators_shown(c):
    from scraper.products import sources
    return {r["name"]: r for r in sources.report(c.conn, c.s, time.time())}["events"]


def test_an_unchanged_200_is_an_identical_payload_digest_revisit_of_its_version(tmp_path):
    pytest.importorskip("warcio")
    from warcio.archiveiterator import ArchiveIterator
    from warcio.checker import Checker

    from scraper.mirror import versions
    from scraper.products import warc
    body = b'{"workflow": {"id": 7, "views": 1}}'
    stored = versions.Stored(7, 1, "api", "http://api.test/t/7", 200, "application/json", "2026-11-01T00:00:00+00:00",
                             body, ())
    found = [versions.Revisit(1_795_000_000.0, "identical-payload-digest", rules.digest(body)),
             versions.Revisit(1_795_000_001.0, "identical-payload-digest", "another version's")]
    out = tmp_path / "one.warc.gz"
    with open(out, "wb") as fh:
        assert warc.write(fh, [stored], "one.warc.gz", lambda url: found).revisits == 1
    with open(out, "rb") as fh:
        response, revisit = [dict(r.rec_headers.headers) for r in ArchiveIterator(fh)][1:]
    assert revisit["WARC-Profile"].endswith("/1.1/revisit/identical-payload-digest")
    assert revisit["WARC-Payload-Digest"] == response["WARC-Payload-Digest"]
    assert revisit["WARC-Refers-To"] == response["WARC-Record-ID"]
    assert Checker(types.SimpleNamespace(inputs=[str(out)], verbose=False)).process_all() == 0


def test_a_tag_that_depends_on_accept_encoding_is_sent_only_under_the_coding_it_came_with(tmp_path, net):
    """The stand-in's `gzip` mode (Apache's mod_deflate): the tag names the coding. Echoed under the same
    Accept-Encoding it gets its 304; a session whose Accept-Encoding changed sends no validator (a 200)."""
    from scripts.standin.validators import Validators
    server, sent = Validators("gzip"), []

    def answer(request):
        sent.append((request.headers.get("Accept-Encoding"), request.headers.get("If-None-Match")))
        status, headers = server.answer(request.headers, BODY)
        return status, headers, b"" if status == 304 else BODY

    net.add_callback(responses.GET, URL, callback=answer)
    clock = FakeClock(time.time())
    s, conn = _walk(str(tmp_path / "jobs.db"), clock)
    _get(s, conn, clock)
    assert _get(s, conn, clock).not_modified
    tag = rows.load(conn, URL).etag
    assert tag.endswith('-gzip"') and sent[1] == ("gzip, deflate", tag)
    with client.opened(s, conn, "walk", clock) as polite:
        polite.session.headers["Accept-Encoding"] = "gzip, deflate, br"     # brotli installed, say
        assert not polite.walk(source="cat")(URL).not_modified
    assert sent[2] == ("gzip, deflate, br", None)
    conn.close()


def test_a_source_s_own_revalidate_false_sends_and_keeps_nothing_for_it(tmp_path, net):
    import dataclasses

    from scraper.base import sources
    from scraper.base.errors import ConfigError
    from scraper.politeness import revalidation
    found = sources.parse({"source": [{"name": "cat", "kind": "catalogue", "site": "http://site.test/",
                                       "revalidate": False},
                                      {"name": "other", "kind": "catalogue", "site": "http://other.test/"}]}, "s.toml")
    clock = FakeClock(time.time())
    s, conn = _walk(str(tmp_path / "jobs.db"), clock)
    s = dataclasses.replace(s, sources=found)
    assert not revalidation.on(s, "cat") and revalidation.on(s, "other")
    server = Server(net)
    _get(s, conn, clock)
    _get(s, conn, clock)
    assert server.sent == [(None, None), (None, None)] and rows.load(conn, URL) is None
    with pytest.raises(ConfigError, match="'revalidate'.*true or false"):
        sources.parse({"source": [{"name": "cat", "kind": "catalogue", "site": "http://site.test/",
                                   "revalidate": "no"}]}, "s.toml")
    conn.close()


def test_hostile_validators_are_kept_and_echoed_as_they_came_and_an_unasked_304_is_a_failed_request(tmp_path, net):
    """What a site says of its validators is the site's: a 304 nobody asked for is a FetchError with its reason
    (nothing kept to hand back); an ETag of 60 KB, one with a control character, a Last-Modified that is no date
    and a 304 carrying a NUL for its ETag are kept and sent back verbatim, never a crash."""
    clock = FakeClock(time.time())
    s, conn = _walk(str(tmp_path / "jobs.db"), clock, max_attempts=1)
    answers = [(304, {}, b"")]
    net.add_callback(responses.GET, URL, callback=lambda request: answers[0])
    with pytest.raises(FetchError) as e:
        _get(s, conn, clock)
    assert e.value.status == 304 and rows.load(conn, URL) is None
    for etag, modified in (('"' + "x" * 60_000 + '"', None), ('"caf\xe9\x01"', "yesterday \x7f")):
        headers = {"ETag": etag, **({"Last-Modified": modified} if modified else {})}
        answers[0] = (200, headers, BODY)
        assert _get(s, conn, clock) == BODY
        kept = rows.load(conn, URL)
        assert (kept.etag, kept.last_modified) == (etag, modified)
        answers[0] = (304, {"ETag": "\x00"}, b"")
        assert _get(s, conn, clock).not_modified
        assert net.calls[-1].request.headers["If-None-Match"] == etag
    conn.close()
