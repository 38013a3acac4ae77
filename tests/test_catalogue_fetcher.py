"""The catalogue's fetch by its source's `fetcher`, in-process with a fake Context: plain HTTP ends an
incomplete page (a required field missing, or under 70 % of the wanted fields) naming what it lacks;
`auto` renders at once what plain HTTP left incomplete, reads its pattern's verdict through
`Context.verdict` and hands what it learnt back in `Result.learned`, which scraper.mirror.record writes
into fetch_patterns in the job's transaction; a learnt browser pattern goes straight to the browser."""

import dataclasses
import json

import pytest

from scraper.base import settings
from scraper.base.sources import Source
from scraper.db import fetchlearn, store
from scraper.db.queue import Queue
from scraper.mirror import record
from scraper.net import chromium
from scraper.policy import fetchmode
from scraper.pool import worker
from scraper.products import report
from scraper.sites import catalogue

SITE = "http://cal.test"
URL = f"{SITE}/live/jazz-night-42"
EVENT = {"@context": "https://schema.org", "@type": "Event", "name": "Jazz Night", "startDate": "2026-05-01",
         "location": {"@type": "Place", "name": "Hall"}}


def source(fetcher, **options):
    base = {"site": SITE, "type": "Event", "required": ["name", "startDate"], "fetcher": fetcher,
            "fields": {"organizer": "css:.organizer::text", "venue": "jsonld:location.name"}, **options}
    return Source(name="events", kind="catalogue", options=tuple(sorted(base.items())))


def html(jsonld=None, body=""):
    ld = f'<script type="application/ld+json">{json.dumps(jsonld)}</script>' if jsonld else ""
    return f"<html><head>{ld}</head><body>{body}</body></html>"


EMPTY = html(body='<div id="app"></div><script>build()</script>')
FULL = html(EVENT, '<p class="organizer">Jazz Club</p>')


@dataclasses.dataclass
class Job:
    key: str = "events:/live/jazz-night-42"
    url: str = URL
    domain: str = "cal.test"
    source: str = "events"


class Ctx:
    """The worker's Context, faked: the HTTP answer, the browser's page, the stored verdict; counts calls."""

    def __init__(self, http_page, browser_page=FULL, verdict=None):
        self.http_page, self.browser_page, self.v = http_page, browser_page, verdict
        self.calls = []

    def get(self, url):
        self.calls.append("http")
        return self.http_page.encode()

    def render(self, url, allow_domains=(), settle=None):
        self.calls.append(("browser", tuple(allow_domains), settle))
        return url, self.browser_page

    def browser_ready(self):
        self.calls.append("ready")

    def verdict(self, pattern):
        assert pattern == "/live/{slug}-{n}"
        return self.v

    def fetched_at(self):
        return "2026-11-26T00:00:00+00:00"


def fetch(src, ctx, job=None):
    s = dataclasses.replace(settings.build(transcripts=False), sources=(src,))
    return catalogue.site.open(s).fetch(job or Job(), ctx)


def test_http_ends_a_page_under_seventy_percent_of_its_fields_incomplete_naming_them():
    thin = html({**EVENT, "location": None})            # name and startDate only: 2 of 4 wanted
    with pytest.raises(catalogue.Incomplete) as e:
        fetch(source("http"), Ctx(thin))
    assert "2 of its 4 fields" in str(e.value) and "organizer, venue" in str(e.value)
    assert e.value.kind == "incomplete"
    with pytest.raises(catalogue.Incomplete, match="required field.s. name, startDate"):
        fetch(source("http"), Ctx(EMPTY))
    three = html(EVENT)                                 # 3 of 4: enough
    assert fetch(source("http"), Ctx(three)).items[0][3]["venue"] == "Hall"


def test_auto_renders_at_once_what_http_left_incomplete_and_hands_back_what_it_learnt():
    ctx = Ctx(EMPTY)
    result = fetch(source("auto", allow_domains=["cdn.Example.org"], settle="#app h1"), ctx)
    assert ctx.calls == ["http", ("browser", ("example.org",), "#app h1")]
    (name, key, url, rec, raw, _, _), = result.items
    assert (name, key, rec["name"], rec["organizer"], rec["venue"]) == (
        "events", "/live/jazz-night-42", "Jazz Night", "Jazz Club", "Hall")
    assert raw["page"] == FULL.encode()                 # the one result kept: the browser's
    (src, pattern, learned, by_http, by_browser), = result.learned
    assert (src, pattern, learned.verdict, by_http, by_browser) == (
        "events", "/live/{slug}-{n}", fetchmode.Verdict(fetchmode.BROWSER), True, True)


def test_a_learnt_browser_pattern_goes_straight_to_the_browser_and_http_stays_as_it_was():
    url_is_recheck = fetchmode.is_recheck(URL)
    ctx = Ctx(EMPTY, verdict=fetchmode.Verdict(fetchmode.BROWSER))
    fetch(source("auto"), ctx)
    assert ctx.calls[-1][0] == "browser" and ("http" in ctx.calls) == url_is_recheck
    plain = Ctx(html(EVENT))
    assert fetch(source("http"), plain).learned == () and plain.calls == ["http"]
    browser = Ctx(EMPTY)
    assert fetch(source("browser"), browser).learned == () and [c[0] for c in browser.calls] == ["browser"]


def test_a_recheck_makes_the_browser_ready_before_it_sends_anything_and_other_pages_do_not():
    # a worker without a browser slot then hands the page back for free (the worker's HandedBack) instead of
    # fetching it by plain HTTP and asking the slot holder to close its browser for it
    for path, page in ((fetchmode.BROWSER, EMPTY), (fetchmode.HTTP, html(EVENT))):
        for recheck in (True, False):
            url = next(u for u in (f"{SITE}/live/jazz-night-{i}" for i in range(1000))
                       if fetchmode.is_recheck(u) == recheck)
            ctx = Ctx(page, verdict=fetchmode.Verdict(path))
            fetch(source("auto"), ctx, Job(key=f"events:{url[len(SITE):]}", url=url))
            calls = [c if isinstance(c, str) else c[0] for c in ctx.calls]
            if recheck:
                assert calls[0] == "ready" and calls.count("ready") == 1 and "http" in calls, (path, calls)
            else:
                assert "ready" not in calls, (path, calls)


def test_auto_ends_incomplete_only_after_both_paths_lacked_the_fields():
    ctx = Ctx(EMPTY, browser_page=EMPTY)
    with pytest.raises(catalogue.Incomplete, match="name, startDate") as e:
        fetch(source("auto"), ctx)
    assert [c if c == "http" else c[0] for c in ctx.calls] == ["http", "browser"]
    (_, _, learned, by_http, by_browser), = e.value.result.learned     # counted, though nothing was learnt
    assert learned.verdict is None and by_http and by_browser


def test_the_worker_reads_the_verdict_and_record_writes_the_learning_in_the_jobs_transaction(tmp_path):
    s = settings.build(db_path=str(tmp_path / "jobs.db"), transcripts=False)
    conn = store.open_db(s.db_path)
    queue = Queue(conn)
    queue.seed([("events:/live/jazz-night-42", "catalogue", URL, "cal.test", "events")], now=1.0)
    job = queue.claim("w1", 2.0, s.lease_s, sites=["catalogue"])
    ctx = worker.Worker(s, "w1", queue, None, None).context(job)
    assert ctx.verdict("/live/{slug}-{n}") is None
    result = fetch(source("auto"), Ctx(EMPTY))
    assert queue.complete(job, "w1", 3.0, 5, write=lambda c: record.write(c, result, 3.0, source="events"))
    assert ctx.verdict("/live/{slug}-{n}") == fetchmode.Verdict(fetchmode.BROWSER)
    summary = fetchlearn.summary(conn)["events"]
    assert (summary["http"], summary["browser"], summary["rechecks"], summary["changes"]) == (1, 1, 0, 0)
    assert [(p["pattern"], p["verdict"]) for p in summary["patterns"]] == [("/live/{slug}-{n}", "browser")]
    page = report.render(report.gather(conn, 4.0))
    table = page[page.index('<table id="fetch-table">'):]
    assert "<td>events</td><td>1</td><td>1</td><td>0</td><td>0</td>" in table
    assert "/live/{slug}-{n}: browser (1 by HTTP, 1 by browser)" in table
    conn.close()


def test_an_incomplete_auto_page_still_counts_its_fetches_in_the_failures_transaction(tmp_path):
    s = settings.build(db_path=str(tmp_path / "jobs.db"), transcripts=False)
    conn = store.open_db(s.db_path)
    queue = Queue(conn)
    queue.seed([("events:/live/jazz-night-42", "catalogue", URL, "cal.test", "events")], now=1.0)
    w = worker.Worker(s, "w1", queue, None, None)

    class Fetcher:
        def fetch(self, job, ctx):
            return fetch(source("auto"), Ctx(EMPTY, browser_page=EMPTY))

    w.fetchers["catalogue"] = Fetcher()
    w.process(queue.claim("w1", 2.0, s.lease_s, sites=["catalogue"]))
    job = conn.execute("SELECT status, error_kind FROM jobs").fetchone()
    assert tuple(job) == ("failed", "incomplete")
    summary = fetchlearn.summary(conn)["events"]
    assert (summary["http"], summary["browser"]) == (1, 1)
    assert [p["verdict"] for p in summary["patterns"]] == ["unknown"]      # counted; nothing learnt
    conn.close()


def test_the_default_browser_is_debians_headless_shell_when_it_is_installed(tmp_path, monkeypatch):
    for name in ("chromium", "chromium-headless-shell", "my-chrome"):
        exe = tmp_path / name
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert chromium.find_browser(settings.BROWSER) == str(tmp_path / "chromium-headless-shell")
    assert chromium.find_browser("my-chrome") == str(tmp_path / "my-chrome")        # any other name as it is
    assert chromium.find_browser(str(tmp_path / "chromium")) == str(tmp_path / "chromium")   # and any path
    (tmp_path / "chromium-headless-shell").unlink()
    assert chromium.find_browser(settings.BROWSER) == str(tmp_path / "chromium")    # else the full browser
