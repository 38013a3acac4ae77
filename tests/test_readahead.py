"""A walk reads its next pages ahead (issue 45, `mirror/readahead`): the listing's pages after the second
are fetched by readers, each with a polite client of its own, while the walk reads the page it has. Every
page is asked once, none past what `limit` needs, and a page that failed ahead is the walk's first try of
it (its backoff and retry follow). In-process, the network faked by `responses`, real databases."""

import json
import re
import threading
import time
import urllib.parse

import responses

from scraper.base import settings
from scraper.db import store
from scraper.mirror import seed, walks
from tests.helpers import API, SITE

SEARCH = re.compile(re.escape(API) + r"/templates/search.*")
TOTAL = 450     # five pages of 100, the last one short


def _listing(net, fail_once=(), hostile=None):
    """The search API of TOTAL templates on `net`; returns [(page, thread name)] of each page answered.
    A page in `fail_once` answers 503 the first time, or 200 with the bytes `hostile` when given."""
    asked, failed = [], set()

    def answer(request):
        page = int(urllib.parse.parse_qs(urllib.parse.urlsplit(request.url).query)["page"][0])
        asked.append((page, threading.current_thread().name))
        if page in fail_once and page not in failed:
            failed.add(page)
            return (503, {}, "busy") if hostile is None else (200, {}, hostile)
        ids = range((page - 1) * 100 + 1, min(page * 100, TOTAL) + 1)
        return 200, {}, json.dumps({"totalWorkflows": TOTAL, "workflows": [{"id": i, "name": f"t{i}"} for i in ids]})

    net.add_callback(responses.GET, SEARCH, callback=answer)
    return asked


def _settings(backend):
    return settings.build(db_path=backend, api_url=API, site_url=SITE, rate_per_s=1000, burst=100,
                          backoff_base_s=0.01)


def test_a_walk_reads_its_pages_ahead_each_once_through_the_polite_client(backend, net):
    s = _settings(backend)
    asked = _listing(net)
    walk = seed.discover(s, sleep=lambda seconds: None)
    assert list(walk.entries) == list(range(1, TOTAL + 1)) and walk.complete and walk.pages == 5
    assert sorted(page for page, _ in asked) == [1, 2, 3, 4, 5]
    ahead = {page for page, thread in asked if thread.startswith("read-ahead")}
    assert ahead == {3, 4, 5}       # told of them while the walk asked page 2
    conn = store.open_db(s.db_path)
    logged = [r["kind"] for r in conn.execute("SELECT kind FROM requests WHERE kind = 'ok'")]
    conn.close()
    assert len(logged) == 5         # the readers' requests are in the request log too
    assert not [t for t in threading.enumerate() if t.name.startswith("read-ahead")]


def test_a_page_that_failed_ahead_is_the_walk_s_first_try_of_it(backend, net):
    s = _settings(backend)
    asked = _listing(net, fail_once={4})
    waits = []
    walk = seed.discover(s, sleep=waits.append)
    assert walk.complete and len(walk.entries) == TOTAL
    fours = [thread for page, thread in asked if page == 4]
    assert len(fours) == 2 and fours[0].startswith("read-ahead") and not fours[1].startswith("read-ahead")
    assert len(waits) == 1 and 0.005 < waits[0] < 0.02      # the run's backoff after its first try


def test_no_page_is_read_ahead_past_what_the_limit_needs(tmp_path, net):
    s = _settings(str(tmp_path / "jobs.db"))
    asked = _listing(net)
    walk = seed.discover(s, limit=250, sleep=lambda seconds: None)
    assert len(walk.entries) == 250 and not walk.complete
    assert sorted(page for page, _ in asked) == [1, 2, 3]


def test_the_walks_of_seed_and_update_read_ahead_beside_their_own_client(tmp_path, net):
    """`walk_due` (bare `seed`, `update`, cron) walks with a client of its own on an open connection: the
    readers' clients work beside it, and what the walk found is queued."""
    s = _settings(str(tmp_path / "jobs.db"))
    asked = _listing(net)
    conn = store.open_db(s.db_path)
    try:
        (outcome,) = walks.walk_due(conn, s, time.time())
        queued = conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
    finally:
        conn.close()
    assert outcome.error is None and queued == TOTAL
    assert sorted(page for page, _ in asked) == [1, 2, 3, 4, 5]
    assert {page for page, thread in asked if thread.startswith("read-ahead")} == {3, 4, 5}


def test_a_hostile_page_read_ahead_fails_that_try_with_a_reason_and_the_walk_reads_it_again(tmp_path, net):
    s = _settings(str(tmp_path / "jobs.db"))
    asked = _listing(net, fail_once={4}, hostile=b"\xff\xfe{\x00 not UTF-8" + b"[" * 100_000)
    waits = []
    walk = seed.discover(s, sleep=waits.append)
    assert walk.complete and len(walk.entries) == TOTAL
    assert [page for page, _ in asked].count(4) == 2 and len(waits) == 1   # one parse failure, one retry
