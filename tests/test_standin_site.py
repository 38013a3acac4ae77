"""Tests of scripts/standin (`python -m scripts.standin`), the local stand-in for api.n8n.io and n8n.io."""

import json
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from html.parser import HTMLParser

import pytest
import requests

from scripts.standin.corpus import BLOB_ASSETS, DATA_DIR, load_json, plain_text, read_data
from scripts.standin.faults import parse_faults
from scripts.standin.server import StandinSite
from tests.helpers import ROOT

# About 6 s in all (a 1 s sliding window, sleeps of faults and storm, two subprocesses).
pytestmark = pytest.mark.slow

STANDIN = [sys.executable, "-m", "scripts.standin"]

# 250 templates: every 0.02 share is exactly 5 ids.
FAULTS = "503:0.02,500x2:0.02,502:0.02,504:0.02,reset:0.02,truncate:0.02,slow:0.02,404:0.02,403x0:0.02"
SLOW_S = 0.3

SEARCH_ITEMS = load_json(DATA_DIR, "search_page1_rows100.json")
URL_ROWS = [json.loads(line) for line in read_data(DATA_DIR, "workflow_urls_6022.jsonl").splitlines()]


@pytest.fixture
def make_site():
    """Factory of started sites, all shut down after the test."""
    sites = []

    def _make(**kwargs):
        site = StandinSite(**kwargs).start()
        sites.append(site)
        return site

    yield _make
    for site in sites:
        site.shutdown()


@pytest.fixture(scope="module")
def site():
    """An unlimited site with missing ids and faults, shared by the read-only tests."""
    s = StandinSite(templates=250, rate=0, faults=FAULTS, seed=7, slow_s=SLOW_S,
                            missing_fraction=0.02).start()
    yield s
    s.shutdown()


@pytest.fixture(scope="module")
def corpus(site):
    return requests.get(site.url + "/_standin/corpus", timeout=5).json()


def healthy_ids(corpus):
    return [i for i in corpus["ids"] if str(i) not in corpus["faults"] and i not in corpus["missing"]]


def get(url, session=None, **kwargs):
    return (session or requests).get(url, timeout=10, **kwargs)


class _Meta(HTMLParser):
    def __init__(self):
        super().__init__()
        self.meta, self.title, self.links, self._in_title = {}, "", [], False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "meta" and "content" in attrs:
            self.meta[attrs.get("name") or attrs.get("property")] = attrs["content"]
        elif tag == "a":
            self.links.append(attrs.get("href"))
        self._in_title = tag == "title"

    def handle_endtag(self, tag):
        self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data


def parse_page(text):
    parser = _Meta()
    parser.feed(text)
    return parser


# -- corpus and API shapes ---------------------------------------------------------------------


def test_search_paging_and_total(site, corpus):
    expected_ids = [row["id"] for row in URL_ROWS][:250]
    assert corpus["ids"] == expected_ids
    seen = []
    sizes = []
    for page in (1, 2, 3, 4):
        answer = get(f"{site.url}/api/templates/search?page={page}&rows=100").json()
        assert answer["totalWorkflows"] == 250
        assert answer["filters"] == []
        sizes.append(len(answer["workflows"]))
        seen += answer["workflows"]
    assert sizes == [100, 100, 50, 0]
    assert [item["id"] for item in seen] == expected_ids
    assert len({item["name"] for item in seen}) == 250
    # Position k takes search item k % 100; names get " #id" from position 100 on.
    assert seen[0]["name"] == SEARCH_ITEMS[0]["name"]
    assert seen[105]["name"] == f"{SEARCH_ITEMS[5]['name']} #{expected_ids[105]}"
    assert seen[105]["nodes"] == SEARCH_ITEMS[5]["nodes"]
    assert set(seen[7]) == set(SEARCH_ITEMS[7])
    default = get(f"{site.url}/api/templates/search").json()
    assert [item["id"] for item in default["workflows"]] == expected_ids[:20]


@pytest.mark.parametrize("query", ["rows=101", "page=0", "rows=0", "rows=abc", "page=x&rows=10"])
def test_search_rejects_bad_params(site, query):
    response = get(f"{site.url}/api/templates/search?{query}")
    assert response.status_code == 400
    assert response.json()["status"] == 400


def test_detail_shape(site, corpus):
    tid = healthy_ids(corpus)[120]
    k = corpus["ids"].index(tid)
    response = get(f"{site.url}/api/templates/workflows/{tid}")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    assert len(response.content) > 5000
    wf = response.json()["workflow"]
    for key in ("id", "name", "views", "recentViews", "totalViews", "createdAt", "description",
                "lastUpdatedBy", "status", "reviewStatus", "readyToDemo", "workflowInfo", "user",
                "nodes", "categories", "image", "workflow"):
        assert key in wf, key
    item = SEARCH_ITEMS[k % 100]
    assert wf["id"] == tid
    assert wf["name"] == (item["name"] if k < 100 else f"{item['name']} #{tid}")
    assert wf["totalViews"] == item["totalViews"]
    assert wf["nodes"] == item["nodes"] and wf["user"] == item["user"]
    inner = wf["workflow"]
    for key in ("nodes", "connections", "settings", "meta", "tags", "pinData"):
        assert key in inner, key
    if "id" in inner:
        assert inner["id"] == tid
    assert wf["workflowInfo"]["nodeCount"] == len(inner["nodes"])
    assert sum(v["count"] for v in wf["workflowInfo"]["nodeTypes"].values()) == len(inner["nodes"])
    assert len(wf["image"]) == tid % 3
    assert all(img["url"].startswith(BLOB_ASSETS) for img in wf["image"])
    assert wf["categories"] and all(set(c) == {"id", "name"} for c in wf["categories"])
    # The control copy is byte-identical to what the API serves for a healthy id.
    assert get(f"{site.url}/_standin/template/{tid}").content == response.content


def test_importable_json(site, corpus):
    ids = healthy_ids(corpus)
    for tid in ids[:3] + ids[150:152]:
        answer = get(f"{site.url}/api/workflows/templates/{tid}").json()
        detail = get(f"{site.url}/api/templates/workflows/{tid}").json()["workflow"]
        assert set(answer) == {"id", "name", "workflow"}
        assert answer["id"] == tid and answer["name"] == detail["name"]
        assert answer["workflow"]["nodes"] == detail["workflow"]["nodes"]
        assert answer["workflow"]["connections"] == detail["workflow"]["connections"]
    # Definition 3 is the genuine 6270 answer (no inner id, a YouTube sticky note).
    tid = next(i for i in ids if corpus["ids"].index(i) % 20 == 3)
    answer = get(f"{site.url}/api/workflows/templates/{tid}").json()
    assert "id" not in answer["workflow"]
    notes = [n["parameters"].get("content", "") for n in answer["workflow"]["nodes"]
             if n["type"] == "n8n-nodes-base.stickyNote"]
    assert any("@[youtube](laHIzhsz12E)" in text for text in notes)


def test_page_html(site, corpus):
    # Position 4 is "Generate & Auto-post AI Videos ...": the '&' must be escaped.
    tid = corpus["ids"][4]
    assert tid not in corpus["missing"]
    name = get(f"{site.url}/api/workflows/templates/{tid}").json()["name"]
    assert "&" in name
    slug = corpus["slugs"][str(tid)]
    assert URL_ROWS[4]["url"].endswith(f"/{tid}-{slug}")
    bodies = set()
    for path in (f"/workflows/{tid}", f"/workflows/{tid}/", f"/workflows/{tid}-{slug}", f"/workflows/{tid}-{slug}/"):
        response = get(site.url + path)
        assert response.status_code == 200
        assert response.headers["Content-Type"].startswith("text/html")
        bodies.add(response.text)
    assert len(bodies) == 1
    text = bodies.pop()
    assert "&amp;" in text
    page = parse_page(text)
    title = f"{name} | n8n workflow template"
    assert page.title == title
    assert page.meta["og:title"] == title and page.meta["twitter:title"] == title
    description = page.meta["description"]
    assert description == page.meta["og:description"]
    assert 50 < len(description) <= 150 and "\n" not in description
    assert plain_text(SEARCH_ITEMS[4]["description"]).startswith(description)
    assert page.meta["og:image"].startswith("https://")
    assert "https://www.youtube.com/@n8n-io" in page.links
    assert get(f"{site.url}/workflows/999999-nope/").status_code == 404


def test_missing_ids_are_listed_but_gone(site, corpus):
    missing = corpus["missing"]
    assert len(missing) == 5
    listed = get(f"{site.url}/api/templates/search?page=1&rows=100").json()["workflows"]
    listed += get(f"{site.url}/api/templates/search?page=2&rows=100").json()["workflows"]
    listed += get(f"{site.url}/api/templates/search?page=3&rows=100").json()["workflows"]
    assert set(missing) <= {item["id"] for item in listed}
    for path in ("/api/templates/workflows/", "/api/workflows/templates/", "/workflows/", "/_standin/template/"):
        assert get(f"{site.url}{path}{missing[0]}").status_code == 404, path
    assert not set(map(str, missing)) & set(corpus["faults"])


def test_health_and_unknown_paths(site):
    assert get(f"{site.url}/api/health").json() == {"status": "OK"}
    for path in ("/nope", "/api/templates/workflows/999999", "/api/templates/workflows/abc", "/_standin/nope"):
        response = get(site.url + path)
        assert response.status_code == 404, path
        assert response.json()["status"] == 404
    assert requests.post(f"{site.url}/api/health", timeout=5).status_code == 404


def test_no_limit_when_rate_is_zero(site):
    with requests.Session() as session:
        assert {get(f"{site.url}/api/health", session).status_code for _ in range(30)} == {200}


# -- politeness counters -----------------------------------------------------------------------


@pytest.mark.timing
def test_token_bucket_and_stats(make_site):
    site = make_site(templates=20, rate=0.2, burst=5)
    statuses, retry_after = [], []
    with requests.Session() as session:
        for _ in range(8):
            response = get(f"{site.url}/api/templates/search?rows=5", session)
            statuses.append(response.status_code)
            if response.status_code == 429:
                retry_after.append(int(response.headers["Retry-After"]))
                assert response.json()["status"] == 429
    assert statuses == [200] * 5 + [429] * 3
    assert all(1 <= value <= 5 for value in retry_after)
    for _ in range(2):  # control endpoints are neither limited nor counted
        stats = get(f"{site.url}/_standin/stats").json()
    assert stats["requests"] == 8 and stats["http_429"] == 3 and stats["max_in_1s"] == 8
    assert stats["by_status"] == {"200": 5, "429": 3}
    assert stats["by_kind"]["search"] == 8
    assert (stats["rate"], stats["burst"], stats["templates"]) == (0.2, 5, 20)
    assert stats == site.stats() | {"storm_remaining_s": stats["storm_remaining_s"]}


@pytest.mark.timing
def test_max_in_1s_is_a_sliding_window(make_site):
    site = make_site(templates=10, rate=0)
    with requests.Session() as session:
        for _ in range(3):
            get(f"{site.url}/api/health", session)
        time.sleep(1.02)
        for _ in range(2):
            get(f"{site.url}/api/health", session)
    stats = site.stats()
    assert stats["requests"] == 5 and stats["max_in_1s"] == 3


@pytest.mark.timing
def test_latency_overlaps_between_clients(make_site):
    site = make_site(templates=10, rate=0, latency_ms=300)
    elapsed = []

    def one():
        start = time.monotonic()
        assert get(f"{site.url}/api/health").status_code == 200
        elapsed.append(time.monotonic() - start)

    start = time.monotonic()
    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(elapsed) == 4 and min(elapsed) >= 0.29
    assert time.monotonic() - start < 0.9


@pytest.mark.timing
def test_storm_then_reset(make_site):
    site = make_site(templates=10, rate=0)
    tid = site.corpus.ids[0]
    assert requests.post(f"{site.url}/_standin/storm", json={"seconds": 0.3}, timeout=5).status_code == 200
    assert get(f"{site.url}/api/health").status_code == 503
    assert get(f"{site.url}/api/templates/workflows/{tid}").status_code == 503
    assert get(f"{site.url}/_standin/stats").status_code == 200
    time.sleep(0.35)
    assert get(f"{site.url}/api/templates/workflows/{tid}").status_code == 200
    stats = site.stats()
    assert stats["by_status"] == {"503": 2, "200": 1}
    assert stats["detail_requests"] == {str(tid): 1}  # storm answers never reach the template
    assert requests.post(f"{site.url}/_standin/storm", json={"seconds": "x"}, timeout=5).status_code == 400
    assert requests.post(f"{site.url}/_standin/reset", timeout=5).json() == {"reset": True}
    stats = get(f"{site.url}/_standin/stats").json()
    assert (stats["requests"], stats["http_429"], stats["max_in_1s"]) == (0, 0, 0)
    assert stats["by_status"] == {} and stats["detail_requests"] == {}


# -- faults ------------------------------------------------------------------------------------


def test_fault_map(corpus):
    kinds = {}
    for fault in corpus["faults"].values():
        kinds.setdefault(fault["kind"], set()).add(fault["times"])
    assert set(kinds) == {"503", "500", "502", "504", "reset", "truncate", "slow", "404", "403"}
    assert kinds["500"] == {2} and kinds["503"] == {1} and kinds["reset"] == {1}
    assert kinds["404"] == {None} and kinds["403"] == {None}
    counts = {}
    for fault in corpus["faults"].values():
        counts[fault["kind"]] = counts.get(fault["kind"], 0) + 1
    assert set(counts.values()) == {5}


def test_each_fault_kind(make_site):
    site = make_site(templates=250, rate=0, faults=FAULTS, seed=7, slow_s=SLOW_S)
    faults = get(f"{site.url}/_standin/corpus").json()["faults"]
    first = {}
    for tid, fault in faults.items():
        first.setdefault(fault["kind"], int(tid))

    def statuses(kind, n):
        url = f"{site.url}/api/templates/workflows/{first[kind]}"
        return [get(url).status_code for _ in range(n)]

    assert statuses("503", 2) == [503, 200]
    assert statuses("500", 3) == [500, 500, 200]  # x2 recovers on the 3rd request
    assert statuses("502", 2) == [502, 200]
    assert statuses("504", 2) == [504, 200]
    assert statuses("404", 3) == [404, 404, 404]  # forever
    assert statuses("403", 3) == [403, 403, 403]  # x0 = forever

    url = f"{site.url}/api/templates/workflows/{first['reset']}"
    with pytest.raises(requests.ConnectionError) as info:
        get(url)
    assert "reset" in repr(info.value).lower()
    assert get(url).status_code == 200

    full = get(f"{site.url}/_standin/template/{first['truncate']}").content
    response = get(f"{site.url}/api/templates/workflows/{first['truncate']}")
    assert response.status_code == 200 and response.headers["Content-Type"].startswith("application/json")
    assert int(response.headers["Content-Length"]) == len(response.content) == len(full) // 2
    assert response.content == full[: len(full) // 2]
    with pytest.raises(ValueError):
        json.loads(response.content)
    assert get(f"{site.url}/api/templates/workflows/{first['truncate']}").content == full

    url = f"{site.url}/api/templates/workflows/{first['slow']}"
    start = time.monotonic()
    assert get(url).json()["workflow"]["id"] == first["slow"]
    assert time.monotonic() - start >= SLOW_S
    start = time.monotonic()
    assert get(url).status_code == 200
    assert time.monotonic() - start < SLOW_S

    # Faults hit the detail only.
    assert get(f"{site.url}/api/workflows/templates/{first['404']}").status_code == 200
    assert get(f"{site.url}/workflows/{first['404']}").status_code == 200

    stats = site.stats()
    assert stats["faults_served"] == {"503": 1, "500": 2, "502": 1, "504": 1, "reset": 1,
                                      "truncate": 1, "slow": 1, "404": 3, "403": 3}
    assert stats["detail_requests"][str(first["500"])] == 3
    # A reset leaves no status behind; everything else is in by_status.
    assert sum(stats["by_status"].values()) == stats["requests"] - 1


def test_reset_restarts_counted_faults(make_site):
    site = make_site(templates=250, rate=0, faults=FAULTS, seed=7)
    tid = next(int(t) for t, f in site.corpus_info()["faults"].items() if f["kind"] == "503")
    url = f"{site.url}/api/templates/workflows/{tid}"
    assert [get(url).status_code for _ in range(2)] == [503, 200]
    site.reset()
    assert get(url).status_code == 503


def test_determinism(make_site):
    kwargs = {"templates": 300, "rate": 0, "faults": FAULTS, "missing_fraction": 0.03}
    a = make_site(seed=3, **kwargs)
    b = make_site(seed=3, **kwargs)
    c = StandinSite(seed=4, **kwargs)
    info_a = get(f"{a.url}/_standin/corpus").json()
    assert info_a == get(f"{b.url}/_standin/corpus").json()
    assert len(info_a["missing"]) == 9 and len(info_a["faults"]) == 54
    assert c.corpus_info()["faults"] != info_a["faults"]
    for tid in info_a["ids"][::37]:
        assert get(f"{a.url}/_standin/template/{tid}").content == get(f"{b.url}/_standin/template/{tid}").content


def test_bad_configuration():
    with pytest.raises(ValueError):
        StandinSite(host="0.0.0.0")
    with pytest.raises(ValueError):
        StandinSite(faults="418:0.1")
    with pytest.raises(ValueError):
        StandinSite(templates=10, faults="503:0.6,500:0.6")
    with pytest.raises(ValueError):
        StandinSite(templates=6023)
    assert parse_faults("500x2:0.02,404:0.01,403x3:0.1,slow:0.5") == [
        ("500", 2, 0.02), ("404", None, 0.01), ("403", 3, 0.1), ("slow", 1, 0.5)]


def test_survives_clients_that_hang_up(make_site):
    site = make_site(templates=150, rate=0, latency_ms=50)
    for raw in (b"GET /api/templates/search?rows=100 HTTP/1.1\r\nHost: x\r\n\r\n", b"GET /api/tem"):
        sock = socket.create_connection(("127.0.0.1", site.port))
        sock.sendall(raw)
        sock.close()
    time.sleep(0.1)
    assert get(f"{site.url}/api/templates/search?rows=100").status_code == 200


# -- the real command line ---------------------------------------------------------------------


def _read_line(proc, timeout=10):
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "no listening line"
    return proc.stdout.readline()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_command_line(signum):
    with subprocess.Popen([*STANDIN, "--templates", "30", "--rate", "0"], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            line = _read_line(proc)
            match = re.fullmatch(r"standin listening on (http://127\.0\.0\.1:(\d+))\n", line)
            assert match, line
            answer = get(f"{match.group(1)}/api/templates/search?page=1&rows=100").json()
            assert answer["totalWorkflows"] == 30 and len(answer["workflows"]) == 30
            proc.send_signal(signum)
            assert proc.wait(timeout=10) == 0
            assert proc.stderr.read() == ""
        finally:
            if proc.poll() is None:
                proc.kill()


def test_command_line_refuses_other_hosts():
    result = subprocess.run([*STANDIN, "--host", "0.0.0.0"], cwd=ROOT,
                            capture_output=True, text=True, timeout=20)
    assert result.returncode == 2
    assert "127.0.0.1" in result.stderr and result.stdout == ""


def test_every_nth_template_links_a_video_of_its_own():
    from scraper.sites.n8n.extract import extract
    from scripts.standin.corpus import Corpus, own_video_id

    corpus = Corpus(DATA_DIR, 150, 1, [], 0.0, video_every=7)
    videos = {tid: json.loads(extract(json.loads(corpus.detail(tid)), "2024-01-01T00:00:00+00:00")["videos"])
              for tid in corpus.ids}
    assert {tid for tid, v in videos.items() if v} == set(corpus.ids[6::7])
    assert all(v == [own_video_id(tid)] for tid, v in videos.items() if v)
    assert len(corpus.ids[6::7]) == 21
