"""The transcripts acceptance run: the n8n stand-in's templates carry YouTube videos, and the YouTube
stand-in blocks this address for a while in the middle of the run."""

import json

import pytest

from tests.helpers import rows, scraper

pytestmark = pytest.mark.slow

VIDEOS = {  # the videos of the first 100 templates of the corpus, by what the YouTube stand-in makes of them
    "AzOgpdn8ngY": "done", "laHIzhsz12E": "done", "PAmgrwYnzWs": "done", "ROgf5dVqYPQ": "done",
    "07-HZZQs5h0": "no_transcript", "KgmNiV7SwkU": "transcripts_disabled",
    "hxQshcD3e1Y": "video_unavailable", "dEtV7OYuMFQ": "age_restricted",
}


@pytest.mark.timing
def test_templates_and_their_transcripts_through_a_blocked_phase(standin, youtube_standin, tmp_path):
    site = standin(templates=100, rate=20, burst=5, latency_ms=10)
    # after 6 requests (two videos) YouTube shows a reCAPTCHA page instead of the watch page for 3 s
    yt = youtube_standin(rate=4, burst=2, latency_ms=10, block_after=6, block_s=3, block_mode="recaptcha")
    db = tmp_path / "jobs.db"
    # the stand-in serves YouTube's own robots.txt, which disallows the transcript endpoints: ignored knowingly
    env = {"SCRAPER_YOUTUBE_URL": yt.url, "SCRAPER_TRANSCRIPTS": "1", "SCRAPER_ROBOTS_IGNORE": "youtube.com"}
    scraper(site, db, "seed", "--from-search", check=0, env=env)
    run = scraper(site, db, "run", "--workers", "4", "--rate", "20", "--burst", "5", "--timeout", "5",
                  "--domain-rate", "youtube.com=4/2", "--breaker-open", "1", env=env)
    assert run.returncode == 0, run.stderr[-3000:]

    # every template stored
    corpus = site.corpus()
    stored = {r["id"] for r in rows(db, "SELECT id FROM workflows")}
    assert stored == set(corpus["ids"])
    # one job per video for the whole library, however many templates show it
    jobs = {r["key"].split(":", 1)[1]: r for r in rows(db, "SELECT * FROM jobs WHERE site = 'youtube'")}
    assert set(jobs) == set(VIDEOS)
    links = rows(db, "SELECT video_id, COUNT(*) AS n FROM template_videos GROUP BY video_id")
    assert {r["video_id"] for r in links} == set(VIDEOS) and max(r["n"] for r in links) >= 4
    transcripts = {r["video_id"]: r for r in rows(db, "SELECT * FROM transcripts")}
    for video, outcome in VIDEOS.items():
        if outcome == "done":
            assert jobs[video]["status"] == "done" and transcripts[video]["text"]
        else:
            assert (jobs[video]["status"], jobs[video]["error_kind"]) == ("invalid", outcome)
            assert jobs[video]["last_error"] and video not in transcripts

    # the blocked phase opened the breaker (no attempt spent) while the n8n jobs went on; the
    # transcripts completed after it
    stats = yt.stats()
    assert stats["blocked"] >= 1
    status = json.loads(scraper(site, db, "status", "--json", check=0).stdout)
    assert status["errors_by_kind"]["blocked"] >= 1
    assert status["sites"]["n8n"]["done"] == 100 and status["sites"]["youtube"]["invalid"] == 4
    n8n_during_block = rows(db, "SELECT COUNT(*) AS n FROM jobs WHERE site = 'n8n' AND finished_at BETWEEN ? AND ?",
                            stats["block_started_at"], stats["block_ended_at"])[0]["n"]
    assert n8n_during_block >= 1
    last_youtube = max(r["finished_at"] for r in jobs.values())
    assert last_youtube > stats["block_ended_at"]
    assert all(r["attempts"] <= 1 for r in jobs.values())       # blocked attempts were given back

    # politeness at both stand-ins: no 429, so each domain stayed inside its bucket
    assert site.stats()["http_429"] == 0 and stats["http_429"] == 0

    exported = [json.loads(line)
                for line in scraper(site, db, "export", "--format", "jsonl", check=0).stdout.splitlines()]
    with_video = [t for t in exported if "AzOgpdn8ngY" in t["videos"]]
    assert with_video and all(
        {"video_id": "AzOgpdn8ngY", "language_code": "en", "is_generated": False,
         "text": transcripts["AzOgpdn8ngY"]["text"]} in t["transcripts"] for t in with_video)
