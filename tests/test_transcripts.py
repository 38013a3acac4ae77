"""Transcript jobs: the YouTube site run by a real worker, through the real youtube-transcript-api,
against the YouTube stand-in (scripts/standin/youtube.py); the n8n side is faked with `responses`."""

import csv
import io
import json
import random

import pytest
import requests
import responses

from scraper import cli
from scraper.base import settings
from scraper.base.clock import SYSTEM, FakeClock
from scraper.base.errors import ConfigError
from scraper.db import politeness as politeness_rows
from scraper.db import store
from scraper.db.queue import Queue
from scraper.mirror import record
from scraper.net import http
from scraper.policy import breaker, fairness, retry
from scraper.politeness import limiter, robots
from scraper.pool import worker
from scraper.products import status
from scraper.sites import n8n, youtube
from tests.helpers import detail_body, in_process, rows, scraper

API = "https://api.n8n.test/api"
SITE = "https://n8n.test"
NOW = 1_800_000_000.0

# the stand-in's catalogue: what each video of the n8n corpus is
WITH_TRANSCRIPT = {  # video -> (language_code, is_generated) picked with the default languages (en)
    "AzOgpdn8ngY": ("en", 0), "laHIzhsz12E": ("en", 1), "PAmgrwYnzWs": ("de", 0), "ROgf5dVqYPQ": ("en", 0),
}
INVALID = {"07-HZZQs5h0": "no_transcript", "KgmNiV7SwkU": "transcripts_disabled",
           "hxQshcD3e1Y": "video_unavailable", "dEtV7OYuMFQ": "age_restricted"}


@pytest.fixture
def make(tmp_path):
    """make(yt_url, **settings) -> (worker, queue, clock)."""
    opened = []

    def build(yt_url, limiter_kind="none", robots_known=False, **options):
        options.setdefault("transcripts", True)     # this file's subject (off by default since issue 31)
        s = settings.build(db_path=str(tmp_path / "jobs.db"), api_url=API, site_url=SITE, youtube_url=yt_url,
                           **options)
        conn = store.open_db(s.db_path)
        q = Queue(conn)
        # robots.txt known (404: no rules) for n8n, and for the YouTube stand-in when asked (a blocked or
        # hostile stand-in would refuse it too; the library's requests are counted alone)
        for url in (API, SITE, *([yt_url] if robots_known else [])):
            politeness_rows.save_robots(conn, robots.host_of(url), NOW, 404, b"", None, None, ())
        lim = (limiter.DomainLimiter(s.limiter_path, s.rate_per_s, s.burst, rate_of=s.rate_for)
               if limiter_kind == "domain" else limiter.NoLimiter())
        session = http.make_session(s.user_agent)
        clock = FakeClock(NOW)
        w = worker.Worker(s, "w1", q, lim, session, clock=clock, rng=random.Random(7))
        opened.append((w, conn, lim, session))
        return w, q, clock

    yield build
    for w, conn, lim, session in opened:
        w.close()
        session.close()
        lim.close()
        conn.close()


def seed_videos(q, s, videos):
    q.seed([youtube.site.job_row(s, v) for v in videos], now=NOW - 100)


def drain(w, limit=100):
    n = 0
    while w.step() and n < limit:
        n += 1
    return n


def job_of(q, key):
    return dict(q.conn.execute("SELECT * FROM jobs WHERE key = ?", (key,)).fetchone())


def test_every_kind_of_video_ends_stored_or_invalid_with_its_reason(make, youtube_standin):
    yt = youtube_standin(rate=0, robots="none")
    w, q, _ = make(yt.url)
    seed_videos(q, w.s, [*WITH_TRANSCRIPT, *INVALID])
    drain(w)
    stored = {r["video_id"]: r for r in rows(w.s.db_path, "SELECT * FROM transcripts")}
    assert {v: (r["language_code"], r["is_generated"]) for v, r in stored.items()} == WITH_TRANSCRIPT
    for video, kind in INVALID.items():
        j = job_of(q, youtube.job_key(video))
        assert (j["status"], j["error_kind"], j["attempts"]) == ("invalid", kind, 1), j
        assert j["last_error"]
    segments = json.loads(stored["AzOgpdn8ngY"]["segments"])
    assert [sorted(s) for s in segments] == [["duration", "start", "text"]] * 4
    # the library unescaped the text twice and dropped the tag; the stored text joins the trimmed segments
    assert segments[1] == {"text": "line 2 of AzOgpdn8ngY (en, manual) & ", "start": 2.5, "duration": 2.5}
    assert stored["AzOgpdn8ngY"]["text"] == " ".join(s["text"].strip() for s in segments)
    assert "  " not in stored["AzOgpdn8ngY"]["text"]
    # three requests a transcript (watch, player, caption track), two for the others, all at the stand-in
    # and its robots.txt (404 here, `robots="none"`: no rules), asked once
    assert yt.stats()["by_route"] == {"watch": 8, "player": 8, "timedtext": 4, "robots": 1}


def test_languages_pick_the_first_match_then_any_manual_then_any_generated(make, youtube_standin):
    yt = youtube_standin(rate=0, robots="none")
    w, q, _ = make(yt.url, transcript_languages=("es", "fr"))
    seed_videos(q, w.s, ["ROgf5dVqYPQ", "PAmgrwYnzWs", "laHIzhsz12E"])
    drain(w)
    got = {r["video_id"]: (r["language_code"], r["is_generated"])
           for r in rows(w.s.db_path, "SELECT * FROM transcripts")}
    # the languages' order comes first (es, though generated, before manual fr); no es/fr: any manual (de),
    # else any generated (en)
    assert got == {"ROgf5dVqYPQ": ("es", 1), "PAmgrwYnzWs": ("de", 0), "laHIzhsz12E": ("en", 1)}


@responses.activate(assert_all_requests_are_fired=False)
def test_a_template_queues_each_video_once_in_the_transaction_that_stores_it(make, youtube_standin):
    yt = youtube_standin(rate=0, robots="none")
    responses.add_passthru(yt.url)
    w, q, _ = make(yt.url)
    # two templates built on the same definition share its video
    body = json.loads(detail_body(6270))
    body["workflow"]["description"] = "Watch @[youtube](AzOgpdn8ngY) and https://youtu.be/laHIzhsz12E"
    for tid in (11, 12):
        body["workflow"]["id"] = tid
        responses.get(n8n.detail_url(API, tid), json=body)
    q.seed([n8n.site.job_row(w.s, tid) for tid in (11, 12)], now=NOW - 100)
    drain(w)
    keys = sorted(r["key"] for r in rows(w.s.db_path, "SELECT key FROM jobs"))
    assert keys == ["n8n:11", "n8n:12", "youtube:AzOgpdn8ngY", "youtube:laHIzhsz12E"]
    links = rows(w.s.db_path, "SELECT * FROM template_videos ORDER BY template_id, video_id")
    assert [(r["template_id"], r["video_id"]) for r in links] == [
        (11, "AzOgpdn8ngY"), (11, "laHIzhsz12E"), (12, "AzOgpdn8ngY"), (12, "laHIzhsz12E")]
    assert rows(w.s.db_path, "SELECT COUNT(*) AS n FROM transcripts")[0]["n"] == 2
    assert yt.stats()["by_video"] == {"AzOgpdn8ngY": 1, "laHIzhsz12E": 1}


@responses.activate
def test_without_transcripts_the_links_are_kept_and_a_later_run_queues_them(make, youtube_standin, tmp_path):
    w, q, _ = make("http://127.0.0.1:9", transcripts=False)
    body = json.loads(detail_body(6270))
    body["workflow"]["description"] = "@[youtube](AzOgpdn8ngY)"
    body["workflow"]["id"] = 11
    responses.get(n8n.detail_url(API, 11), json=body)
    q.seed([n8n.site.job_row(w.s, 11)], now=NOW - 100)
    drain(w)
    assert [r["key"] for r in rows(w.s.db_path, "SELECT key FROM jobs")] == ["n8n:11"]
    # the description's video and the one in 6270's sticky note
    assert record.resume(q.conn, settings.build(db_path=w.s.db_path, transcripts=True), NOW) == 2
    assert job_of(q, "youtube:AzOgpdn8ngY")["status"] == job_of(q, "youtube:laHIzhsz12E")["status"] == "pending"
    assert record.resume(q.conn, settings.build(db_path=w.s.db_path, transcripts=True), NOW) == 0


def test_a_blocked_address_opens_the_breaker_at_once_and_costs_no_attempt(make, youtube_standin):
    yt = youtube_standin(rate=0, robots="none")
    w, q, clock = make(yt.url, breaker_open_s=30)
    seed_videos(q, w.s, ["AzOgpdn8ngY"])
    q.seed([n8n.site.job_row(w.s, 5)], now=NOW - 100)    # an n8n job that must still go
    yt.block(600, "recaptcha")
    q.conn.execute("UPDATE jobs SET priority = 1 WHERE site = 'youtube'")
    assert w.step()
    j = job_of(q, "youtube:AzOgpdn8ngY")
    assert (j["status"], j["error_kind"], j["attempts"]) == ("pending", retry.BLOCKED, 0)
    b = q.domains()["youtube.com"]
    assert b.state == breaker.OPEN and b.open_until == NOW + 30
    claimed = q.claim("w2", clock(), 60)                 # the youtube job waits, the n8n job goes
    assert claimed.site == "n8n"
    assert q.claim("w3", clock(), 60) is None
    q.release(claimed, "w2", clock())
    # once the block ends and the open time is over, the probe fetches the transcript
    yt.block(0)
    clock.t = NOW + 31
    q.conn.execute("DELETE FROM jobs WHERE site = 'n8n'")
    assert w.step()
    assert job_of(q, "youtube:AzOgpdn8ngY")["status"] == "done"
    assert q.domains()["youtube.com"].state == breaker.CLOSED


@pytest.mark.parametrize("mode", ["bot", "429"])
def test_the_other_ways_youtube_blocks_open_the_breaker_too(make, youtube_standin, mode):
    yt = youtube_standin(rate=0, robots="none")
    w, q, _ = make(yt.url, robots_known=True)
    seed_videos(q, w.s, ["laHIzhsz12E"])
    yt.block(600, mode)
    assert w.step()
    assert job_of(q, "youtube:laHIzhsz12E")["error_kind"] == retry.BLOCKED
    assert q.domains()["youtube.com"].state == breaker.OPEN


@pytest.mark.timing
def test_every_library_request_waits_for_youtubes_own_rate_slot(make, youtube_standin):
    yt = youtube_standin(rate=4, burst=2, robots="none")          # the stand-in answers 429 above 4/s, burst 2
    w, q, _ = make(yt.url, robots_known=True, limiter_kind="domain", domain_rates=(("youtube.com", 4.0, 2),))
    seed_videos(q, w.s, list(WITH_TRANSCRIPT))
    w.clock = w.client.clock = SYSTEM              # the real clock: the limiter waits for real
    drain(w)
    stats = yt.stats()
    assert stats["requests"] == 12 and stats["http_429"] == 0
    assert rows(w.s.db_path, "SELECT COUNT(*) AS n FROM transcripts")[0]["n"] == 4
    # each request's wait for its slot is logged with it (`status` sums it per domain)
    waited = rows(w.s.db_path, "SELECT COUNT(*) AS n FROM requests WHERE domain = 'youtube.com' AND slot_wait_ms > 0")
    assert waited[0]["n"] >= 1


def test_the_librarys_requests_are_in_the_request_log_under_youtube_com(make, youtube_standin):
    yt = youtube_standin(rate=0, robots="none")
    w, q, _ = make(yt.url, robots_known=True)
    seed_videos(q, w.s, ["AzOgpdn8ngY", "07-HZZQs5h0"])     # a transcript (3 requests), none (2 requests)
    drain(w)
    logged = rows(w.s.db_path, "SELECT domain, kind, COUNT(*) AS n FROM requests GROUP BY domain, kind")
    assert logged == [{"domain": "youtube.com", "kind": "ok", "n": yt.stats()["requests"]}]
    assert yt.stats()["requests"] == 5


def test_the_session_refuses_anything_but_youtube(make, youtube_standin):
    yt = youtube_standin(rate=0, robots="none")
    adapter = youtube.RedirectAdapter(yt.url, 5)

    class Gate:
        def gate(self, url=None):
            pass

        def failed(self, e):
            pass

        def logged(self, kind, status, ms):
            pass

    adapter.ctx = Gate()
    s = requests.Session()
    s.mount("https://", adapter)
    s.mount("http://", adapter)
    assert s.get("https://www.youtube.com/watch?v=AzOgpdn8ngY").status_code == 200
    with pytest.raises(requests.exceptions.InvalidURL):
        s.get("https://example.com/")
    assert yt.stats()["by_route"] == {"watch": 1}


def test_claims_prefer_a_domain_that_can_send_now(tmp_path):
    q = Queue(store.open_db(str(tmp_path / "jobs.db")))
    q.seed([("youtube:a", "youtube", "u", "youtube.com"), ("youtube:b", "youtube", "u", "youtube.com")], now=NOW)
    q.conn.execute("UPDATE jobs SET priority = 1")
    q.seed([("n8n:1", "n8n", "u", "n8n.io")], now=NOW)

    def demands(youtube_wait):
        return {"youtube.com": fairness.Demand(youtube_wait, 0.2, 3), "n8n.io": fairness.Demand(0.0, 2.0, 1)}

    slow = demands(4.0)
    assert q.claim("w1", NOW, 60, demands=slow, workers=4).key == "n8n:1"  # priority says youtube; it must wait
    assert q.claim("w2", NOW, 60, demands=slow, workers=4).key == "youtube:a"  # nothing else: one worker may wait
    assert q.claim("w3", NOW, 60, demands=slow, workers=4) is None             # a second would only sit
    # its slot is free, but the job in flight owes it three requests: a second job would sleep 15 s
    assert q.claim("w3", NOW, 60, demands=demands(0.0), workers=4) is None
    q.conn.execute("UPDATE jobs SET status = 'done' WHERE key = 'youtube:a'")
    assert q.claim("w3", NOW, 60, demands=demands(0.0), workers=4).key == "youtube:b"
    assert q.claim("w4", NOW, 60, sites=["n8n"]) is None
    q.conn.close()


def test_domain_rates_parse_and_default():
    assert settings.parse_domain_rate("youtube.com=0.5/3") == ("youtube.com", 0.5, 3)
    s = settings.build(domain_rates=(settings.parse_domain_rate("example.org=1/1"),))
    assert s.rate_for("youtube.com") == (settings.YOUTUBE_RATE_PER_S, settings.YOUTUBE_BURST) == (0.2, 2)
    assert s.rate_for("n8n.io") == (settings.RATE_PER_S, settings.BURST)
    assert s.rate_for("example.org") == (1.0, 1)
    for bad in ("youtube.com", "youtube.com=fast/2", "=1/2"):
        with pytest.raises(ValueError):
            settings.parse_domain_rate(bad)
    with pytest.raises(ConfigError, match="burst"):
        settings.build(domain_rates=(("youtube.com", 1.0, 0),))
    with pytest.raises(ConfigError, match="transcript_languages"):
        settings.build(transcript_languages=("en;drop",))


def test_run_refuses_a_bad_domain_rate_in_one_sentence(tmp_path):
    from click.testing import CliRunner
    db = tmp_path / "jobs.db"
    store.open_db(str(db)).close()
    result = CliRunner().invoke(cli.main, ["--db", str(db), "run", "--domain-rate", "youtube.com=2"])
    assert result.exit_code == 2
    assert "is not DOMAIN=RATE/BURST" in result.output and "Traceback" not in result.output


def test_migration_links_templates_stored_before_it(tmp_path):
    path = str(tmp_path / "old.db")
    conn = store.connect(path)
    store.migrate(conn, 1)
    conn.execute("INSERT INTO workflows (id, videos) VALUES (1, '[\"AzOgpdn8ngY\", \"laHIzhsz12E\"]'), "
                 "(2, '[]'), (3, 'not json')")
    store.migrate(conn)
    assert [tuple(r) for r in conn.execute("SELECT template_id, video_id FROM template_videos ORDER BY video_id")] == [
        (1, "AzOgpdn8ngY"), (1, "laHIzhsz12E")]
    conn.close()


def test_exports_and_status_carry_transcripts_and_sites(tmp_path):
    from scraper.products import export
    conn = store.open_db(str(tmp_path / "jobs.db"))
    row = n8n.extract(detail_body(6270), "t")
    row["videos"] = json.dumps(["laHIzhsz12E", "AzOgpdn8ngY", "07-HZZQs5h0"])
    with store.transaction(conn) as c:
        store.upsert(c, "workflows", row, "id")
        for v in json.loads(row["videos"]):
            c.execute("INSERT INTO template_videos VALUES (?, ?)", (row["id"], v))
        for v, g in (("AzOgpdn8ngY", 0), ("laHIzhsz12E", 1)):
            c.execute("INSERT INTO transcripts VALUES (?, 'en', ?, ?, '[]', 't')", (v, g, "text of " + v))
    Queue(conn).seed([("n8n:6270", "n8n", "u", "n8n.io"), ("youtube:x", "youtube", "u", "youtube.com")])
    out = io.StringIO()
    export.write(conn, "jsonl", out)
    got = json.loads(out.getvalue())["transcripts"]
    assert got == [{"video_id": "laHIzhsz12E", "language_code": "en", "is_generated": True,
                    "text": "text of laHIzhsz12E"},
                   {"video_id": "AzOgpdn8ngY", "language_code": "en", "is_generated": False,
                    "text": "text of AzOgpdn8ngY"}]
    out = io.StringIO()
    export.write(conn, "csv", out)
    cell = next(csv.DictReader(io.StringIO(out.getvalue())))["transcripts"]
    assert cell == "text of laHIzhsz12E\n\ntext of AzOgpdn8ngY"
    assert len(export.csv_transcripts([{"text": "x" * 40_000}])) == export.CSV_CELL_MAX
    report = status.report(Queue(conn), NOW)
    assert report["sites"]["youtube"]["pending"] == 1 and report["sites"]["n8n"]["pending"] == 1
    assert "site      youtube: 1 total: 1 pending" in status.render(report)
    conn.close()


def test_a_job_in_flight_goes_back_unsent_when_its_breaker_opens(make, youtube_standin):
    yt = youtube_standin(rate=0, robots="none")
    w, q, clock = make(yt.url)
    seed_videos(q, w.s, ["AzOgpdn8ngY"])
    job = q.claim(w.name, clock(), 60)
    q.update_domain("youtube.com", lambda b: breaker.on_blocked(b, clock(), 30), clock())   # another worker's block
    w.process(job)
    j = job_of(q, "youtube:AzOgpdn8ngY")
    assert (j["status"], j["attempts"], j["worker"]) == ("pending", 0, None)
    assert yt.stats()["requests"] == 0


def test_the_youtube_standin_answers_429_above_its_rate(youtube_standin):
    # the zero-429 checks above can fail: a client faster than the bucket gets 429s
    yt = youtube_standin(rate=1, burst=1, robots="none")
    codes = [requests.get(f"{yt.url}/watch?v=AzOgpdn8ngY", timeout=5).status_code for _ in range(4)]
    assert codes.count(429) >= 2 and yt.stats()["http_429"] == codes.count(429)


@pytest.mark.slow
def test_a_run_without_transcripts_neither_claims_nor_waits_for_video_jobs(standin, tmp_path):
    site = standin(templates=12, rate=50, burst=5)
    db = tmp_path / "jobs.db"
    in_process(site, db, "seed", "--from-search", check=0)
    conn = store.open_db(str(db))
    Queue(conn).seed([("youtube:AzOgpdn8ngY", "youtube", youtube.watch_url("AzOgpdn8ngY"), "youtube.com")])
    conn.close()
    # SCRAPER_TRANSCRIPTS=1 turns them on; the flag wins over it
    scraper(site, db, "run", "--workers", "2", "--rate", "50", "--no-transcripts", check=0,
            env={"SCRAPER_TRANSCRIPTS": "1"})
    by_site = {(r["site"], r["status"]): r["n"] for r in rows(db, "SELECT site, status, COUNT(*) AS n FROM jobs "
                                                                   "GROUP BY site, status")}
    assert by_site == {("n8n", "done"): 12, ("youtube", "pending"): 1}


@pytest.mark.slow
def test_by_default_a_run_queues_no_transcript_job_and_sends_nothing_to_youtube(standin, youtube_standin, tmp_path,
                                                                               monkeypatch):
    monkeypatch.delenv("SCRAPER_TRANSCRIPTS")       # the default, not the tests' own setting
    site = standin(templates=30, rate=50, burst=5)
    yt = youtube_standin(rate=5, burst=2, robots="none")
    db = tmp_path / "jobs.db"
    env = {"SCRAPER_YOUTUBE_URL": yt.url}
    scraper(site, db, "seed", "--from-search", check=0, env=env)
    run = scraper(site, db, "run", "--workers", "2", "--rate", "50", check=0, env=env)
    assert "YouTube's robots.txt" not in run.stderr      # no sentence about them: they were not asked for
    assert rows(db, "SELECT COUNT(*) AS n FROM template_videos")[0]["n"] > 0       # the templates show videos
    assert rows(db, "SELECT COUNT(*) AS n FROM jobs WHERE site = 'youtube'")[0]["n"] == 0
    assert yt.stats()["requests"] == 0


@pytest.mark.slow
def test_transcripts_asked_for_with_robots_obeyed_say_once_what_youtube_robots_txt_disallows(
        standin, youtube_standin, tmp_path):
    site = standin(templates=12, rate=50, burst=5, video_every=12)     # one video: the sentence, not the fetches
    yt = youtube_standin(rate=5, burst=2)
    db = tmp_path / "jobs.db"
    env = {"SCRAPER_YOUTUBE_URL": yt.url}
    fast = ("--rate", "50", "--domain-rate", "youtube.com=5/2")
    in_process(site, db, "seed", "--from-search", check=0, env=env)
    run = scraper(site, db, "run", "--workers", "2", *fast, "--transcripts", check=0, env=env)
    said = [line for line in run.stderr.splitlines() if "YouTube's robots.txt disallows" in line]
    assert len(said) == 1 and "--robots-ignore youtube.com" in said[0]
    # the stand-in serves YouTube's own robots.txt by default: the video's job ended invalid (robots),
    # and nothing under /youtubei/ or /api/ was asked for
    refused = rows(db, "SELECT key FROM jobs WHERE site = 'youtube' AND status = 'invalid' AND error_kind = 'robots'")
    assert len(refused) == 1 and set(yt.stats()["by_route"]) <= {"robots", "watch"}     # no player, no caption
    knowing = scraper(site, db, "run", "--workers", "2", *fast, "--transcripts",
                      "--robots-ignore", "youtube.com", check=0, env=env)
    assert "YouTube's robots.txt disallows" not in knowing.stderr
    # ignoring it re-queues that job and says so (issue 32): no `retry --invalid` needed
    assert "re-queued 1 job(s) of youtube.com that ended invalid (robots)" in knowing.stderr
    assert rows(db, "SELECT status FROM jobs WHERE key = ?", refused[0]["key"])[0]["status"] != "invalid"


@pytest.mark.parametrize("player, kind, reason", [
    (b'{"playabilityStatus": "OK", "captions": 5}', retry.INTERNAL, "AttributeError"),        # wrong types
    (b'{"playabilityStatus": {"status": "OK"}, "captions": {"playerCaptionsTracklistRenderer": '
     b'{"captionTracks": [{"baseUrl": 7}]}}}', retry.INTERNAL, "AttributeError"),
    (b"[" * 200_000 + b"]" * 200_000, retry.INTERNAL, "RecursionError"),                   # nested past the parser
    (b"\xff\xfe not UTF-8 at all", retry.PARSE, "JSONDecodeError"),
])
def test_a_hostile_player_answer_ends_its_own_job_with_a_reason(make, player, kind, reason):
    yt_url = "http://yt.test"
    w, q, _ = make(yt_url, robots_known=True, transcripts=True)
    seed_videos(q, w.s, ["AzOgpdn8ngY"])
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        rsps.get(yt_url + "/watch", body='<html>"INNERTUBE_API_KEY": "k3y"</html>', content_type="text/html")
        rsps.post(yt_url + "/youtubei/v1/player", body=player, content_type="application/json")
        assert w.step()                          # the worker goes on: the failure is the job's
    j = job_of(q, "youtube:AzOgpdn8ngY")
    assert (j["status"], j["error_kind"], j["attempts"]) == ("pending", kind, 1)   # retried later, then failed
    assert j["last_error"].startswith(reason)
