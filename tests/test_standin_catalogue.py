"""Tests of the stand-ins' robots.txt modes and slow phases (n8n) and of the events catalogue
(`python -m scripts.standin.catalogue`), each a real process started through scripts/standin/client.py."""

import datetime as dt
import gzip
import http.client
import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import urllib.robotparser
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

from scripts.standin import client
from scripts.standin.catalogue import CatalogueSite
from scripts.standin.catalogue_data import Catalogue
from scripts.standin.robots import Robots
from scripts.standin.timeline import rate_series

NS = {"sm": "http://www.sitemaps.org/schemas/sitemap/0.9"}


def fetch(url, data=None):
    """(status, headers, body) of one GET; HTTP errors are answers too."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=10) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


@pytest.fixture
def started():
    """A factory of stand-in processes (client.start), every one stopped after the test, pass or fail."""
    sites = []

    def _start(**options):
        sites.append(client.start(**options))
        return sites[-1]

    try:
        yield _start
    finally:
        for site in sites:
            site.stop()


@pytest.fixture(scope="module")
def events():
    """A catalogue of 60 events (seed 5), shared by the read-only tests."""
    with client.start(catalogue=True, events=60, seed=5) as site:
        yield site


@pytest.fixture(scope="module")
def truth(events):
    return events.truth()


class _Page(HTMLParser):
    """The JSON-LD blocks, OpenGraph tags, elements by class and the #app div of one page."""

    def __init__(self, text):
        super().__init__()
        self.ld, self.og, self.by_class, self.app, self.scripts = [], {}, {}, None, []
        self._in, self._class, self._text = None, None, ""
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "meta" and attrs.get("property", "").startswith("og:"):
            self.og[attrs["property"]] = attrs["content"]
        if tag == "script":
            self._in = "ld" if attrs.get("type") == "application/ld+json" else "script"
        if tag == "div" and attrs.get("id") == "app":
            self.app = ""
            self._in = "app"
        if attrs.get("class"):
            self._class = attrs["class"]

    def handle_endtag(self, tag):
        if tag == "script" and self._in == "ld":
            self.ld.append(json.loads(self._text))
        elif tag == "script" and self._in == "script":
            self.scripts.append(self._text)
        if tag in ("script", "div"):
            self._in = None
        self._class, self._text = None, ""

    def handle_data(self, data):
        if self._in in ("ld", "script"):
            self._text += data
        elif self._in == "app":
            self.app += data
        if self._class:
            self.by_class[self._class] = self.by_class.get(self._class, "") + data


# -- robots.txt on the n8n stand-in --------------------------------------------------------------------


def test_n8n_robots_default_is_no_robots_txt(started):
    site = started(templates=5, rate=0)
    status, _, body = fetch(site.url + "/robots.txt")
    assert status == 404 and json.loads(body)["status"] == 404  # as before robots.txt existed
    assert site.robots_requests() == 1 and site.stats()["by_kind"]["robots"] == 1
    assert site.robots_info()["mode"] == "none"


def test_n8n_robots_rules_from_the_command_line_then_every_mode_at_run_time(started):
    site = started(templates=20, rate=0, robots="rules", robots_disallow_ids=1, robots_crawl_delay=2,
                   robots_request_rate="1/5", robots_sitemap="/sitemap.xml")
    status, headers, body = fetch(site.url + "/robots.txt")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    text = body.decode()
    assert "Disallow: /api/templates/workflows/1\n" in text and "Disallow: /workflows/1\n" in text
    assert f"Sitemap: {site.url}/sitemap.xml" in text
    parser = urllib.robotparser.RobotFileParser()
    parser.parse(text.splitlines())
    assert not parser.can_fetch("scraper", site.url + "/api/templates/workflows/1234")
    assert not parser.can_fetch("scraper", site.url + "/workflows/15-some-slug")
    assert parser.can_fetch("scraper", site.url + "/api/templates/workflows/2345")
    assert parser.crawl_delay("scraper") == 2  # the stdlib reads whole seconds only
    assert (parser.request_rate("scraper").requests, parser.request_rate("scraper").seconds) == (1, 5)
    assert parser.site_maps() == [site.url + "/sitemap.xml"]

    assert site.robots("404")["mode"] == "404"
    assert fetch(site.url + "/robots.txt")[0] == 404
    site.robots("503")
    assert fetch(site.url + "/robots.txt")[0] == 503
    site.robots("unreachable")
    with pytest.raises((ConnectionError, http.client.RemoteDisconnected, urllib.error.URLError)):
        urllib.request.urlopen(site.url + "/robots.txt", timeout=5)
    assert fetch(site.url + "/api/health")[0] == 200  # only robots.txt is unreachable
    site.robots("rules", body="User-agent: *\\nDisallow: /\\n")
    assert fetch(site.url + "/robots.txt")[2] == b"User-agent: *\nDisallow: /\n"
    stats = site.stats()
    assert stats["robots"] == 5 and stats["by_kind"]["health"] == 1 and stats["robots_mode"] == "rules"
    with pytest.raises(urllib.error.HTTPError) as err:
        site.robots("teapot")
    assert err.value.code == 400


def test_robots_rules_are_checked():
    with pytest.raises(ValueError):
        Robots("rules", request_rate="fast")
    with pytest.raises(ValueError):
        Robots("rules", disallow_ids="1a", id_paths=("/x/",))
    robots = Robots("rules", defaults={"sitemap": "/sitemap.xml"})
    robots.site_url = "http://127.0.0.2:9"
    assert robots.text() == "User-agent: *\nAllow: /\nSitemap: http://127.0.0.2:9/sitemap.xml\n"


# -- slow phases and the request log ---------------------------------------------------------------------


def _timed_get(url):
    start = time.monotonic()
    assert fetch(url)[0] == 200
    return time.monotonic() - start


@pytest.mark.timing
def test_slow_phase_at_run_time_and_the_request_log(started):
    site = started(templates=5, rate=0, latency_ms=20)
    assert _timed_get(site.url + "/api/health") < 0.15
    phase = site.slow(factor=10, seconds=0.5)["slow_phase"]
    assert phase["factor"] == 10 and phase["latency_ms"] == 200
    assert _timed_get(site.url + "/api/health") >= 0.2
    time.sleep(max(0.0, phase["end_s"] - site.request_log()["now_s"]) + 0.02)
    assert _timed_get(site.url + "/api/health") < 0.15
    log = site.request_log()
    times = log["by_kind"]["health"]
    assert len(times) == 3 and times == sorted(times) and times[1] >= phase["start_s"] > times[0]
    assert log["slow_phases"] == [phase] and site.stats()["slow_phases"] == [phase]
    assert sum(site.rate_series(bucket_s=0.25)) == 3 and site.request_log(kind="search")["by_kind"] == {}
    assert site.slow(seconds=0)["slow_phase"] is None  # ends the phase


def test_slow_phase_from_the_command_line_starts_after_its_delay(started):
    site = started(templates=5, rate=0, latency_ms=20, slow_phase_factor=10, slow_phase_s=0.4,
                   slow_phase_after_s=0.2)
    (phase,) = site.stats()["slow_phases"]
    assert (phase["end_s"] - phase["start_s"], phase["latency_ms"]) == (pytest.approx(0.4), 200)
    time.sleep(max(0.0, phase["start_s"] - site.request_log()["now_s"]) + 0.02)
    assert _timed_get(site.url + "/api/health") >= 0.2
    site.reset()  # the log is cleared, the phase stays
    assert site.request_log()["by_kind"] == {} and site.stats()["slow_phases"] == [phase]


@pytest.mark.timing
def test_rate_series_counts_per_bucket():
    assert rate_series([0.1, 0.2, 1.5, 3.9], bucket_s=1.0) == [2, 1, 0, 1]
    assert rate_series([], until=2.2) == [0, 0, 0]


# -- the events catalogue --------------------------------------------------------------------------------


def test_catalogue_listens_on_127_0_0_2_and_serves_its_robots_txt(events):
    assert events.url.startswith("http://127.0.0.2:")
    status, _, body = fetch(events.url + "/robots.txt")
    assert status == 200 and body.decode() == f"User-agent: *\nAllow: /\nSitemap: {events.url}/sitemap.xml\n"


def test_catalogue_robots_modes(started):
    site = started(catalogue=True, events=4, robots="503")
    assert fetch(site.url + "/robots.txt")[0] == 503
    site.robots("unreachable")
    with pytest.raises((ConnectionError, http.client.RemoteDisconnected, urllib.error.URLError)):
        urllib.request.urlopen(site.url + "/robots.txt", timeout=5)
    for mode in ("404", "none"):
        site.robots(mode)
        assert fetch(site.url + "/robots.txt")[0] == 404
    site.robots("rules", disallow="/tags/", crawl_delay=1)
    text = fetch(site.url + "/robots.txt")[2].decode()
    assert "Disallow: /tags/\n" in text and "Crawl-delay: 1\n" in text and "Sitemap: " in text
    assert site.robots_requests() == 5


def _urlset(url):
    status, headers, body = fetch(url)
    assert status == 200 and headers["Content-Type"] == "application/gzip"
    root = ET.fromstring(gzip.decompress(body))
    return {u.findtext("sm:loc", namespaces=NS): u.findtext("sm:lastmod", namespaces=NS)
            for u in root.findall("sm:url", NS)}


def sitemap_urls(site):
    """Every URL of the sitemaps, with its lastmod, read as a crawler would (index, then gzip children)."""
    root = ET.fromstring(fetch(site.url + "/sitemap.xml")[2])
    assert root.tag == f"{{{NS['sm']}}}sitemapindex"
    children = {s.findtext("sm:loc", namespaces=NS): s.findtext("sm:lastmod", namespaces=NS)
                for s in root.findall("sm:sitemap", NS)}
    assert sorted(children) == [f"{site.url}/sitemaps/{n}.xml.gz" for n in ("events-1", "events-2", "pages")]
    urls = {}
    for child, lastmod in children.items():
        entries = _urlset(child)
        if entries:  # a child's lastmod is its newest URL's, or later when one of its URLs was removed
            assert lastmod >= max(entries.values(), key=dt.datetime.fromisoformat)
        urls.update(entries)
    return urls, children


def test_sitemap_index_and_gzip_children(events, truth):
    urls, _ = sitemap_urls(events)
    assert all(dt.datetime.fromisoformat(lastmod).tzinfo for lastmod in urls.values())
    expected = {e["url"]: e["lastmod"] for e in truth["events"]}
    assert {u: m for u, m in urls.items() if u in expected} == expected
    assert set(urls) - set(expected) == set(truth["pages"])
    assert len(truth["events"]) == 60
    assert sum(e["script_rendered"] for e in truth["events"]) == 15  # a quarter
    assert sum(not e["organizer_in_jsonld"] for e in truth["events"]) == 12  # a fifth


def test_static_event_pages_carry_json_ld_and_opengraph(events, truth):
    static = [e for e in truth["events"] if not e["script_rendered"]]
    for record in static[:20]:
        status, _, body = fetch(record["url"])
        page = _Page(body.decode())
        assert status == 200 and len(page.ld) == 1
        ld = page.ld[0]
        assert ld["@type"] == "Event" and ld["url"] == record["url"]
        got = {"name": ld["name"], "startDate": ld["startDate"], "endDate": ld["endDate"],
               "location_name": ld["location"]["name"], "location_address": ld["location"]["address"],
               "price": ld["offers"]["price"], "priceCurrency": ld["offers"]["priceCurrency"],
               "description": ld["description"]}
        assert got == {key: record[key] for key in got}
        assert ("organizer" in ld) == record["organizer_in_jsonld"]
        if record["organizer_in_jsonld"]:
            assert ld["organizer"]["name"] == record["organizer"]
        assert page.by_class["organizer"] == record["organizer"]  # always in the HTML
        assert page.og["og:title"] == record["name"] and page.og["og:url"] == record["url"]
    assert not all(e["organizer_in_jsonld"] for e in static[:20])


def test_live_pages_have_no_json_ld_until_their_script_runs(events, truth, tmp_path):
    records = [e for e in truth["events"] if e["script_rendered"]]
    for record in records[:5]:
        body = fetch(record["url"])[2].decode()
        page = _Page(body)
        assert page.ld == [] and "application/ld+json" not in body and page.app == ""
        assert f'"/api/live/{record["id"]}.json"' in page.scripts[0]
        status, _, data = fetch(f"{events.url}/api/live/{record['id']}.json")
        raw = json.loads(data)
        assert status == 200 and (raw["title"], raw["organizer"]) == (record["name"], record["organizer"])
    static = next(e for e in truth["events"] if not e["script_rendered"])
    assert fetch(f"{events.url}/api/live/{static['id']}.json")[0] == 404
    assert fetch(static["url"].replace("/events/", "/live/"))[0] == 404


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the page's script")
def test_live_page_script_builds_the_json_ld_and_the_dom(events, truth, tmp_path):
    record = next(e for e in truth["events"] if e["script_rendered"])
    script = _Page(fetch(record["url"])[2].decode()).scripts[0]
    payload = fetch(f"{events.url}/api/live/{record['id']}.json")[2].decode()
    (tmp_path / "run.js").write_text(NODE_DOM.replace("__SCRIPT__", json.dumps(script))
                                     .replace("__PAYLOAD__", payload))
    out = json.loads(subprocess.run(["node", str(tmp_path / "run.js")], capture_output=True, text=True,
                                    check=True, timeout=20).stdout)
    assert out["fetched"] == f"/api/live/{record['id']}.json"
    (ld_node,) = out["head"]
    ld = json.loads(ld_node["text"])
    assert ld_node["type"] == "application/ld+json" and ld["name"] == record["name"]
    assert ("organizer" in ld) == record["organizer_in_jsonld"] and ld["startDate"] == record["startDate"]
    texts = {n["cls"]: n["text"] for n in out["app"][0]["children"]}
    assert texts["organizer"] == record["organizer"] and texts["event-name"] == record["name"]


NODE_DOM = """
function el(tag) { return {tag: tag, children: [], className: "", textContent: "", type: "",
  appendChild(c) { this.children.push(c); return c; }}; }
const head = el("head"), app = el("div");
global.document = {head: head, title: "", createElement: el, getElementById: (id) => id === "app" ? app : null};
let fetched = null;
global.fetch = (url) => { fetched = url;
  return Promise.resolve({ok: true, status: 200, json: () => Promise.resolve(__PAYLOAD__)}); };
eval(__SCRIPT__);
setTimeout(() => {
  const flat = (n) => ({cls: n.className, type: n.type, text: n.textContent, children: n.children.map(flat)});
  console.log(JSON.stringify({fetched: fetched, head: head.children.map(flat), app: app.children.map(flat)}));
}, 50);
"""


def test_pages_that_are_not_events_and_the_counters(started):
    site = started(catalogue=True, events=8, seed=2)
    urls, _ = sitemap_urls(site)
    event_urls = [u for u in urls if "/events/" in u or "/live/" in u]
    for url in event_urls:
        assert fetch(url)[0] == 200
    stats = site.stats()
    assert stats["requests"] == 4 + len(event_urls) and stats["sitemap"] == 1 and stats["robots"] == 0
    assert "page" not in stats["by_kind"]  # no page that is not an event was requested
    assert stats["by_kind"]["sitemap"] == 3 and stats["by_path"][event_urls[0][len(site.url):]] == 1
    for path in ("/", "/about", "/contact", "/tags/music"):
        assert fetch(site.url + path)[0] == 200
    assert fetch(site.url + "/tags/nope")[0] == 404 and fetch(site.url + "/events/x-1")[0] == 404
    stats = site.stats()
    assert stats["by_kind"]["page"] == 4 and stats["by_kind"]["event"] >= 1 and stats["by_status"]["404"] == 2
    site.reset()
    assert site.stats()["requests"] == 0 and site.request_log()["by_kind"] == {}


def test_changes_between_runs(started):
    site = started(catalogue=True, events=10, seed=4)
    before = {e["id"]: e for e in site.truth()["events"]}
    _, children_before = sitemap_urls(site)
    static = [i for i, e in before.items() if not e["script_rendered"]]
    edited, removed = static[0], static[1]
    answer = site.change(add=2, edit=[edited], remove=[removed])
    assert len(answer["added"]) == 2 and answer["events"] == 11
    after = {e["id"]: e for e in site.truth()["events"]}
    assert set(after) == set(before) - {removed} | set(answer["added"])
    newest = max(dt.datetime.fromisoformat(e["lastmod"]) for e in before.values())
    for eid in (edited, *answer["added"]):
        assert dt.datetime.fromisoformat(after[eid]["lastmod"]) > newest
    assert after[edited]["name"] != before[edited]["name"] and after[edited]["url"] == before[edited]["url"]
    assert _Page(fetch(after[edited]["url"])[2].decode()).ld[0]["name"] == after[edited]["name"]
    assert fetch(before[removed]["url"])[0] == 404
    urls, children = sitemap_urls(site)
    assert before[removed]["url"] not in urls and all(after[i]["url"] in urls for i in answer["added"])
    assert all(children[c] > children_before[c] for c in children if "events" in c)
    assert site.truth()["removed"] == [removed]
    for bad in ({"edit": [removed]}, {"remove": [1]}, {"add": -1}, {"nope": 1}):
        with pytest.raises(urllib.error.HTTPError) as err:
            site._call("/_standin/catalogue", bad)
        assert err.value.code == 400


@pytest.mark.timing
def test_catalogue_rate_limit_per_client(started):
    site = started(catalogue=True, events=3, rate=0.5, burst=2)
    statuses = [fetch(site.url + "/about") for _ in range(3)]
    assert [s for s, _, _ in statuses] == [200, 200, 429]
    assert 1 <= int(statuses[2][1]["Retry-After"]) <= 2
    stats = site.stats()
    assert stats["http_429"] == 1 and stats["requests"] == 3
    assert len(site.request_log()["rejected_429"]) == 1


def test_catalogue_is_deterministic_and_loopback_only():
    assert Catalogue(30, 9).truth("u") == Catalogue(30, 9).truth("u")
    assert Catalogue(30, 9).truth("u") != Catalogue(30, 10).truth("u")
    assert re.fullmatch(r"/(events|live)/[a-z0-9-]+-\d+", Catalogue(1, 1).live()[0].path)
    with pytest.raises(ValueError):
        CatalogueSite(host="0.0.0.0")
    with pytest.raises(ValueError):
        Catalogue(0)
