"""`fetcher = "auto"`: the pure learning rules (scraper.policy.fetchmode) and their store (scraper.db.fetchlearn)."""

import pytest

from scraper.base.errors import IntegrityError
from scraper.db import fetchlearn, store
from scraper.policy import fetchmode as fm
from scraper.policy.fetchmode import BROWSER, HTTP, Plan, Seen, Verdict

REQUIRED = ("name", "startDate")
FIELDS = ("location", "organizer", "offers", "description", "url", "endDate")   # 8 wanted fields in all
FULL = Seen(found=8, enough=True)
EMPTY = Seen(found=0, enough=False)
FAILED = Seen(failed=True)


@pytest.mark.parametrize("url, pattern", [
    ("http://127.0.0.2:8000/events/jazz-night-42", "/events/{slug}-{n}"),
    ("http://127.0.0.2:8000/events/spring-photo-walk-3120?x=1", "/events/{slug}-{n}"),
    ("http://127.0.0.2:8000/live/midnight-food-festival-15702", "/live/{slug}-{n}"),
    ("https://n8n.io/workflows/6270-telegram-bot/", "/workflows/{n}-{slug}"),
    ("/archive/2024/05/", "/archive/{n}/{n}"),
    ("/item/3f2a9c1e-1b2c-4d5e-8f90-123456789abc", "/item/{id}"),
    ("/blob/a3f29c01be44d9", "/blob/{id}"),
    ("/page2", "/page{n}"),
    ("/about", "/about"),
    ("http://x.test", "/"),
])
def test_pattern_of_generalises_ids_and_numbers(url, pattern):
    assert fm.pattern_of(url) == pattern


def test_recheck_is_about_one_in_ten_and_predictable():
    urls = [f"http://127.0.0.2/live/event-{i}" for i in range(2000)]
    picked = [u for u in urls if fm.is_recheck(u)]
    assert 150 <= len(picked) <= 250
    assert picked == [u for u in urls if fm.is_recheck(u)]      # the same URLs every time


def test_seen_needs_required_fields_and_seventy_percent():
    assert fm.seen(["name", "startDate", "location", "organizer", "offers", "description"], REQUIRED, FIELDS).enough
    assert not fm.seen(["name", "startDate", "location", "organizer", "offers"], REQUIRED, FIELDS).enough   # 5/8
    assert not fm.seen(["name", *FIELDS], REQUIRED, FIELDS).enough        # 7/8 but a required one is missing
    assert fm.seen(["name"], REQUIRED, FIELDS, failed=True) == FAILED


def _url(recheck):
    return next(u for u in (f"http://h.test/e/x-{i}" for i in range(1000)) if fm.is_recheck(u) == recheck)


def test_unknown_pattern_http_first_then_browser_at_once():
    p = fm.plan(None, _url(True))
    assert p == Plan(HTTP, False)                      # nothing learnt: no re-check either
    assert not fm.then_browser(None, p, FULL)
    assert fm.learn(None, p, http=FULL) == fm.Learned(Verdict(HTTP), False, HTTP, False)
    assert fm.then_browser(None, p, EMPTY)             # fields missing: the same URL in the browser, at once
    assert fm.learn(None, p, http=EMPTY, browser=FULL) == fm.Learned(Verdict(BROWSER), False, BROWSER, False)


def test_a_failed_fetch_teaches_nothing():
    p = fm.plan(None, _url(False))
    assert not fm.then_browser(None, p, FAILED)        # a failed fetch is not a page that needs a browser
    assert fm.learn(None, p, http=FAILED) == fm.Learned(None, False, None, False)
    v = Verdict(BROWSER, 2)
    assert fm.learn(v, Plan(BROWSER, False), browser=FAILED).verdict == v
    assert fm.learn(v, Plan(HTTP, True), http=FAILED).verdict == v


def test_browser_pattern_goes_straight_to_the_browser_and_moves_back_after_three_agreeing_rechecks():
    v = Verdict(BROWSER)
    assert fm.plan(v, _url(False)) == Plan(BROWSER, False)
    p = fm.plan(v, _url(True))
    assert p == Plan(HTTP, True)                       # the re-check tries the cheaper path
    assert not fm.then_browser(v, p, FULL)             # plain HTTP sufficed: one result, the browser not run
    for agreeing in (1, 2):
        learned = fm.learn(v, p, http=FULL)
        assert learned == fm.Learned(Verdict(BROWSER, agreeing), False, HTTP, True)
        v = learned.verdict
    assert fm.learn(v, p, http=FULL) == fm.Learned(Verdict(HTTP), True, HTTP, True)


def test_a_disagreeing_recheck_starts_the_count_again():
    v = Verdict(BROWSER, 2)
    p = Plan(HTTP, True)
    assert fm.then_browser(v, p, EMPTY)
    assert fm.learn(v, p, http=EMPTY, browser=FULL) == fm.Learned(Verdict(BROWSER, 0), False, BROWSER, True)
    # a page of the pattern between re-checks keeps the count
    assert fm.learn(Verdict(BROWSER, 2), Plan(BROWSER, False), browser=FULL).verdict == Verdict(BROWSER, 2)


def test_http_pattern_flips_at_once_on_an_incomplete_page_and_its_rechecks_render_too():
    v = Verdict(HTTP)
    p = Plan(HTTP, False)
    assert fm.learn(v, p, http=EMPTY, browser=FULL) == fm.Learned(Verdict(BROWSER), True, BROWSER, False)
    p = Plan(HTTP, True)
    assert fm.then_browser(v, p, FULL)
    # the browser found no more: the verdict stands, the HTTP result is the one stored
    assert fm.learn(v, p, http=FULL, browser=FULL) == fm.Learned(Verdict(HTTP), False, HTTP, True)
    better = Seen(found=9, enough=True)
    assert fm.learn(v, p, http=Seen(found=7, enough=True), browser=better).keep == BROWSER


def test_neither_path_finds_the_fields():
    learned = fm.learn(None, Plan(HTTP, False), http=Seen(found=2), browser=Seen(found=3))
    assert learned.verdict is None and learned.keep == BROWSER      # the job fails `incomplete` from that result


def test_the_store_keeps_verdicts_and_counts(tmp_path):
    conn = store.open_db(str(tmp_path / "jobs.db"))
    assert fetchlearn.verdict(conn, "events", "/live/{slug}-{n}") is None
    fetchlearn.record(conn, "events", "/live/{slug}-{n}", fm.Learned(None, False, None, False), True, False, 1.0)
    assert fetchlearn.verdict(conn, "events", "/live/{slug}-{n}") is None      # a failure taught nothing
    fetchlearn.record(conn, "events", "/live/{slug}-{n}", fm.Learned(Verdict(BROWSER), False, BROWSER), True, True, 2)
    fetchlearn.record(conn, "events", "/live/{slug}-{n}", fm.Learned(Verdict(BROWSER, 1), False, HTTP, True),
                      True, False, 3)
    fetchlearn.record(conn, "events", "/events/{slug}-{n}", fm.Learned(Verdict(HTTP), False, HTTP), True, False, 4)
    assert fetchlearn.verdict(conn, "events", "/live/{slug}-{n}") == Verdict(BROWSER, 1)
    summary = fetchlearn.summary(conn)["events"]
    assert (summary["http"], summary["browser"], summary["rechecks"], summary["changes"]) == (4, 1, 1, 0)
    assert [(p["pattern"], p["verdict"]) for p in summary["patterns"]] == [
        ("/events/{slug}-{n}", HTTP), ("/live/{slug}-{n}", BROWSER)]
    from scraper.db.queue import Queue
    from scraper.products import status
    report = status.report(Queue(conn), 5.0)
    assert report["fetch"]["events"]["rechecks"] == 1
    assert ("fetch     events: 4 page(s) by HTTP, 1 by browser, 1 re-check(s), 0 verdict change(s); "
            "/events/{slug}-{n} http, /live/{slug}-{n} browser") in status.render(report)
    conn.close()


def test_a_database_of_the_previous_schema_upgrades_in_place(tmp_path):
    path = str(tmp_path / "old.db")
    conn = store.connect(path)
    store.migrate(conn, store.SCHEMA_VERSION - 1)
    conn.execute("INSERT INTO jobs (key, site, url, domain, created_at, updated_at) "
                 "VALUES ('n8n:1', 'n8n', 'http://x/1', 'x', 1, 1)")
    conn.close()
    conn = store.open_db(path)
    assert conn.execute("SELECT count(*) FROM jobs").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM fetch_patterns").fetchone()[0] == 0
    with pytest.raises(IntegrityError):
        conn.execute("INSERT INTO fetch_patterns (source, pattern, verdict, updated_at) VALUES ('a', '/', 'http', 1)")
        conn.execute("INSERT INTO fetch_patterns (source, pattern, verdict, updated_at) VALUES ('a', '/', 'http', 1)")
    conn.close()


# --- the orchestration a site kind calls (scraper.sites.adaptive), on fake paths ---------------------------

class FakeSite:
    """Static /events/ pages have their fields in plain HTTP; script-rendered /live/ pages only in the browser."""

    def __init__(self, down=()):
        self.requests = {}
        self.down = set(down)

    def _count(self, url):
        self.requests[url] = self.requests.get(url, 0) + 1
        if url in self.down:
            from scraper.base.errors import FetchError
            raise FetchError("timeout", "no answer", url)

    def get_http(self, url):
        self._count(url)
        return "empty" if "/live/" in url else "full"

    def render(self, url):
        self._count(url)
        return "full"


def found(html):
    return set(REQUIRED) | set(FIELDS) if html == "full" else {"name"}


def crawl(site, urls, mode="auto"):
    from scraper.policy.fetchmode import pattern_of
    from scraper.sites import adaptive
    verdicts, pages = {}, []
    for url in urls:
        page = adaptive.fetch(mode, url, verdicts.get(pattern_of(url)), site.get_http, site.render, found,
                              REQUIRED, FIELDS)
        if page.learned is not None and page.learned.verdict is not None:
            verdicts[pattern_of(url)] = page.learned.verdict
        pages.append(page)
    return pages, verdicts


def test_auto_learns_per_pattern_and_a_script_rendered_page_costs_under_1_3_requests():
    live = [f"http://127.0.0.2/live/event-{i}" for i in range(200)]
    static = [f"http://127.0.0.2/events/event-{i}" for i in range(200)]
    site = FakeSite()
    pages, verdicts = crawl(site, [u for pair in zip(static, live, strict=True) for u in pair])
    assert all(p.fields == set(REQUIRED) | set(FIELDS) for p in pages)         # every event has its fields
    assert verdicts == {"/events/{slug}-{n}": Verdict(HTTP), "/live/{slug}-{n}": Verdict(BROWSER)}
    per_live = sum(site.requests[u] for u in live) / len(live)
    assert per_live <= 1.3                                  # learning and re-checks included; nothing learnt: 2
    rechecked = [u for u in live[1:] if fm.is_recheck(u)]
    assert all(site.requests[u] == 2 for u in rechecked)   # exactly the predicted pages paid for a re-check
    # a static page costs one request; an http pattern's re-check renders it as well
    assert all(site.requests[u] == (2 if fm.is_recheck(u) and u != static[0] else 1) for u in static)


def test_http_mode_leaves_script_rendered_pages_incomplete_and_failures_teach_nothing():
    site = FakeSite(down={"http://127.0.0.2/live/event-0"})
    pages, _ = crawl(site, ["http://127.0.0.2/live/event-1"], mode="http")
    assert pages[0].fields == {"name"}                      # the site ends it failed `incomplete`, naming the rest
    from scraper.base.errors import FetchError
    with pytest.raises(FetchError):
        crawl(site, ["http://127.0.0.2/live/event-0"])
    assert site.requests["http://127.0.0.2/live/event-0"] == 1      # no browser after a failed fetch
