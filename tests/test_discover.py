"""Issue 32: `scraper discover URL` against the events stand-in (static /events/ pages, script-built /live/
pages, other pages in the same sitemaps): it sends at most 40 requests, obeys robots.txt, and prints a
[[source]] table that, used as the sources file, mirrors the events and not the other pages. The pure part
(shapes, the sample, the include patterns, the table) is tested without a site."""

import json
import os
import sys

import pytest
import responses
import tomllib

from scraper.base import exitcodes, sources
from scraper.base.clock import FakeClock
from scraper.base.errors import BudgetSpent, RobotsDisallowed
from scraper.net import browser, http
from scraper.politeness.visit import Visit
from scraper.sites import discover as infer
from scripts.standin import client
from tests import warm
from tests.helpers import assert_one_sentence_error, rows, write

needs_chromium = pytest.mark.skipif(browser.problem("chromium") is not None,
                                    reason="no Chromium on PATH (apt-get install chromium) or no Playwright")
EVENTS = 60
MAX_REQUESTS = 40


def scraper(env, *args, timeout=300, cwd=None):
    return warm.run([sys.executable, "-m", "scraper", *args], env=env, capture_output=True, text=True,
                    timeout=timeout, cwd=cwd)


def base_env(tmp_path, **extra):
    return {**os.environ, "SCRAPER_DB": str(tmp_path / "jobs.db"), "SCRAPER_TRANSCRIPTS": "0",
            "SCRAPER_API_URL": client.LOOPBACK_URL + "9/api", "SCRAPER_SITE_URL": client.LOOPBACK_URL + "9", **extra}


@pytest.fixture
def calendar():
    with client.start(catalogue=True, events=EVENTS, seed=1) as site:
        yield site


def stored(db):
    return {r["url"]: json.loads(r["record"]) for r in rows(db, "SELECT url, record FROM items")}


# --- against the stand-in ---------------------------------------------------------------------

@pytest.mark.timing      # Chromium: after the parallel phase (`make test`)
@pytest.mark.wide        # dozens of pages in Chromium: alone, on every CPU, before the lanes
@pytest.mark.chromium
@needs_chromium
@pytest.mark.slow
def test_discover_within_40_requests_proposes_a_source_that_mirrors_the_events_and_no_other_page(calendar, tmp_path):
    env = base_env(tmp_path)
    # discover's own rate raised so the test does not wait a second a request; the count is what matters
    found = scraper(env, "discover", calendar.url + "/", "--name", "events", "--rate", "20")
    assert found.returncode == 0, found.stderr[-3000:]
    stats = calendar.stats()
    assert stats["requests"] <= MAX_REQUESTS, stats["by_kind"]
    assert stats["by_kind"].get("live_page", 0) >= 1            # it rendered some script-built pages
    block = found.stdout
    source = sources.parse(tomllib.loads(block), "stdout")[0]
    assert (source.name, source.kind, source.opt("type"), source.opt("fetcher")) == \
        ("events", "catalogue", "Event", "auto")
    assert {"name", "startDate"} <= set(source.opt("required"))
    assert "Event" in block and "sampled" in block and "leaves out 13" in block
    # the block as it is, its rate raised for the test's sake, is the sources file
    env["SCRAPER_SOURCES"] = write(tmp_path, block.replace("rate = 1.0", "rate = 12.0"))
    calendar.reset()
    assert scraper(env, "seed").returncode == 0
    run = scraper(env, "run", "--workers", "2")
    assert run.returncode == exitcodes.OK, run.stderr[-3000:]
    truth = {e["url"]: e for e in calendar.truth()["events"]}
    got = stored(tmp_path / "jobs.db")
    good = [u for u, e in truth.items()
            if u in got and (got[u].get("name"), got[u].get("startDate")) == (e["name"], e["startDate"])]
    others = [u for u in got if u not in truth]
    print(f"\ndiscover: {stats['requests']} requests {stats['by_kind']}; mirrored {len(good)} of {len(truth)} "
          f"events, {len(others)} other page(s)")
    assert len(good) >= 0.9 * len(truth)
    assert len(others) <= 3


@pytest.mark.slow
def test_without_a_browser_discover_keeps_the_static_events_and_names_fetcher_auto_for_the_script_pages(
        calendar, tmp_path):
    found = scraper(base_env(tmp_path), "discover", calendar.url + "/", "--rate", "20", "--no-browser")
    assert found.returncode == 0, found.stderr[-3000:]
    assert calendar.stats()["requests"] <= MAX_REQUESTS
    assert calendar.stats()["by_kind"].get("live_json", 0) == 0       # nothing rendered
    source = sources.parse(tomllib.loads(found.stdout), "stdout")[0]
    assert source.opt("include") == ("^/events/",) and source.opt("fetcher") == "http"
    assert source.name == "127-0-0-2"                                 # from the host, without --name
    assert 'fetcher = \\"auto\\"' not in found.stdout and 'set fetcher = "auto"' in found.stdout
    assert '"^/live/[^/]+/?$"' in found.stdout                        # the commented include that adds them


@pytest.mark.slow
def test_discover_never_requests_what_robots_txt_disallows(tmp_path):
    with client.start(catalogue=True, events=EVENTS, seed=1, robots_disallow="/live/,/tags/",
                      robots_sitemap="/sitemap.xml") as site:
        found = scraper(base_env(tmp_path), "discover", site.url + "/", "--rate", "20", "--no-browser")
        assert found.returncode == 0, found.stderr[-3000:]
        paths = site.stats()["by_path"]
    assert not [p for p in paths if p.startswith(("/live/", "/tags/"))], paths
    assert 'include = ["^/events/"]' in found.stdout


def test_a_site_whose_robots_txt_fails_is_one_sentence_and_nothing_else_is_sent(tmp_path):
    with client.start(catalogue=True, events=5, seed=1, robots="503") as site:
        found = scraper(base_env(tmp_path), "discover", site.url + "/", "--rate", "20", "--no-browser")
        assert site.stats()["requests"] == 1
    assert found.returncode == exitcodes.FAILED and "Traceback" not in found.stderr
    assert "robots.txt of 127.0.0.2" in found.stderr and found.stdout == ""


@pytest.mark.parametrize("args, words", [
    (["ftp://example.org/"], ["is not an http(s) URL"]),
    (["http://127.0.0.2:9/", "--sample", "0"], ["--sample 0"]),
    (["http://127.0.0.2:9/", "--name", "Bad Name"], ["--name"]),
    (["http://127.0.0.2:9/", "--rate", "0"], ["discover_rate", "'0'", "above 0"]),
    (["http://127.0.0.2:9/", "--timeout", "0"], ["discover_timeout", "'0'", "above 0"]),
])
def test_a_mistake_in_discover_is_one_sentence_and_exit_2(args, words):
    from click.testing import CliRunner

    from scraper.cli import main
    assert_one_sentence_error(CliRunner().invoke(main, ["discover", *args]), *words)


# --- the visit's politeness (the network faked) ------------------------------------------------

ROBOTS = "User-agent: *\nDisallow: /private/\nCrawl-delay: 2\nSitemap: https://site.test/sitemap.xml\n"


def _send():
    session = http.make_session("scraper/1")
    return lambda url, max_bytes: http.fetch(session, url, 5, max_bytes)


@responses.activate
def test_the_visit_keeps_its_pace_its_budget_and_robots_txt_without_sleeping():
    responses.add(responses.GET, "https://site.test/robots.txt", body=ROBOTS)
    responses.add(responses.GET, "https://site.test/a", body=b"<html></html>")
    clock = FakeClock()
    visit = Visit("https://site.test/", "scraper/1", rate_per_s=5.0, budget=3, send=_send(), max_bytes=2**20,
                  clock=clock)
    assert visit.rate_per_s == 0.5 and visit.sitemaps == ["https://site.test/sitemap.xml"]
    visit.get("https://site.test/a")
    visit.get("https://site.test/a")
    # robots.txt went at the visit's own pace (0.2 s), the pages at its Crawl-delay (2 s)
    assert clock.slept == [pytest.approx(0.2), pytest.approx(2.0)]
    with pytest.raises(RobotsDisallowed):
        visit.get("https://site.test/private/x")
    with pytest.raises(BudgetSpent):
        visit.get("https://site.test/a")
    assert visit.sent == 3 and len(responses.calls) == 3
    assert not visit.allowed("https://other.test/a")


@responses.activate
def test_a_robots_txt_404_allows_everything():
    responses.add(responses.GET, "https://site.test/robots.txt", status=404)
    visit = Visit("https://site.test/", "scraper/1", 1.0, 10, _send(), 2**20, clock=FakeClock())
    assert visit.robots_status == 404 and visit.allowed("https://site.test/private/x")


# --- what the pages mean (pure) ----------------------------------------------------------------

def test_shapes_and_their_patterns():
    assert infer.shape("https://s.test/events/jazz-night-42") == "/events/*"
    assert infer.shape("https://s.test/") == "/"
    assert infer.shape("https://s.test/jazz-night-42") == "/{slug}-{n}"
    assert infer.regex_of("/{slug}-{n}") == "^/[^/]+-[0-9]+/?$"
    assert infer.regex_of("/events/*") == "^/events/[^/]+/?$"


def test_the_sample_takes_every_shape_and_spreads_over_the_big_ones():
    groups = {"/events/*": [f"/events/e-{i}" for i in range(40)], "/about": ["/about"], "/tags/*": ["/tags/a"]}
    picks = infer.choose(groups, 10)
    assert len(picks) == 10 and "/about" in picks and "/tags/a" in picks
    events = sorted(int(p.rsplit("-", 1)[1]) for p in picks if p.startswith("/events/"))
    assert events[0] < 10 and events[-1] > 30


def test_include_is_a_prefix_only_when_nothing_under_it_is_left_out():
    by_group = {"/events/*": 30, "/events/*/*": 5, "/live/*": 10}
    assert infer.include_of(["/events/*", "/events/*/*", "/live/*"], by_group) == ["^/events/", "^/live/"]
    assert infer.include_of(["/events/*", "/live/*"], by_group) == ["^/events/[^/]+/?$", "^/live/"]


def _page(url, http=(), browser=(), fields=frozenset({"name", "startDate"}), scripts=False):
    return infer.Page(url, infer.shape(url), http_types=tuple(http), browser_types=tuple(browser),
                      rendered=bool(browser), scripts=scripts or bool(browser),
                      http_fields=fields if http else frozenset(), browser_fields=fields if browser else frozenset())


def test_the_proposal_reads_as_a_sources_file_and_says_why():
    listed = ([f"https://s.test/events/e-{i}" for i in range(8)] + [f"https://s.test/live/l-{i}" for i in range(4)]
              + ["https://s.test/about"])
    pages = ([_page(u, http=["Event", "WebSite"]) for u in listed[:3]]
             + [_page(listed[8], browser=["Event"]), _page(listed[9], scripts=True)]
             + [_page("https://s.test/about", http=["WebSite"])])
    type_, ranked = infer.pick_type(pages)
    assert type_ == "Event" and ranked == [("Event", 4)]
    p = infer.propose("https://s.test/", "events", pages, listed, type_, 1.0, 2, browser=True)
    assert (p.include, p.fetcher, p.required, p.kept, p.listed) == (["^/events/", "^/live/"], "auto",
                                                                    ["name", "startDate"], 12, 13)
    text = infer.block(p)
    source = sources.parse(tomllib.loads(text), "stdout")[0]
    assert source.opt("include") == ("^/events/", "^/live/") and source.rate == 1.0
    assert "leaves out 1" in text


@responses.activate
def test_a_sitemap_robots_txt_disallows_is_not_read_and_said_in_one_sentence():
    from scraper.base.errors import ConfigError
    from scraper.mirror import discover
    responses.add(responses.GET, "https://site.test/robots.txt",
                  body="User-agent: *\nDisallow: /sitemap.xml\n")
    with pytest.raises(ConfigError, match="no page URL found in the sitemaps"):
        discover.discover(discover.Options("https://site.test/", rate_per_s=1000.0), clock=FakeClock())
    assert [c.request.url for c in responses.calls] == ["https://site.test/robots.txt"]


@responses.activate
def test_hostile_answers_are_left_out_and_the_sound_pages_still_make_a_proposal():
    """A sitemap that is not XML, a page that is not UTF-8, one announcing 1 GB, one whose JSON-LD has every
    type wrong: each is left out with a log line, and the proposal is made from the pages that are sound."""
    from scraper.mirror import discover
    site = "https://site.test"
    responses.add(responses.GET, f"{site}/robots.txt",
                  body=f"User-agent: *\nAllow: /\nSitemap: {site}/a.xml\nSitemap: {site}/b.xml\n")
    responses.add(responses.GET, f"{site}/a.xml", body=b"<urlset><url><loc>\xff\xfe not xml")
    urls = [f"{site}/events/{kind}-{n}" for kind in ("latin1", "huge", "types", "ok") for n in range(3)]
    responses.add(responses.GET, f"{site}/b.xml", body="<urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>"
                  + "".join(f"<url><loc>{u}</loc></url>" for u in urls) + "</urlset>")
    wrong = json.dumps({"@context": "https://schema.org", "@type": 5, "name": ["x"], "startDate": {"y": None}})
    good = json.dumps({"@context": "https://schema.org", "@type": "Event", "name": "A", "startDate": "2026-12-01"})
    for u in urls:
        if "latin1" in u:
            responses.add(responses.GET, u, body="<html><title>caf\xe9</title></html>".encode("latin-1"),
                          content_type="text/html")
        elif "huge" in u:
            responses.add(responses.GET, u, body="x", headers={"Content-Length": str(2**30)})
        else:
            ld = wrong if "types" in u else good
            responses.add(responses.GET, u, content_type="text/html; charset=utf-8",
                          body=f'<html><script type="application/ld+json">{ld}</script></html>')
    proposal = discover.discover(discover.Options(site + "/", rate_per_s=1000.0), clock=FakeClock())
    text = infer.block(proposal)
    source = sources.parse(tomllib.loads(text), "stdout")[0]
    assert source.opt("type") == "Event" and len(responses.calls) <= 2 * 20
