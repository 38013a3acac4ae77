"""Done when (issue 8): the library changes between two runs of the daily line, and the mirror keeps up."""

import json

import pytest
import requests

from tests.helpers import in_process, rows, scraper, status_json

pytestmark = pytest.mark.slow

FAST = ("--rate", "50", "--burst", "5")


def daily_line(site, db):
    """What cron runs: walk the listing, retry failed rows, work through the queue (the run as a real
    process with its workers; the reading commands in this one)."""
    seeded = in_process(site, db, "seed", "--from-search", *FAST, check=0)
    in_process(site, db, "retry", "--failed", check=0)
    scraper(site, db, "run", "--workers", "2", *FAST, check=0)
    return seeded.stdout


def stored(db):
    return {r["id"]: r for r in rows(db, "SELECT * FROM workflows")}


def history(site, db, template_id):
    return json.loads(in_process(site, db, "history", str(template_id), "--json", check=0).stdout)


def test_the_daily_line_catches_new_edited_and_removed_templates(standin, tmp_path):
    site = standin(templates=110, rate=60, burst=5)     # two listing pages of 100
    db = tmp_path / "jobs.db"
    daily_line(site, db)
    before = stored(db)
    assert len(before) == 110 and {r["version"] for r in before.values()} == {1}

    ids = site.corpus()["ids"]
    refused = requests.post(site.url + "/_standin/library", json={"remove": [999_999_999]}, timeout=5)
    assert refused.status_code == 400 and site.corpus()["removed"] == []
    edited, workflow_only, removed = ids[10:14], ids[20:23], ids[30:33]
    added = site.library(add=5, edit=edited, edit_workflow=workflow_only, remove=removed, views=1)["added"]
    site.reset()
    out = daily_line(site, db)

    stats = site.stats()
    pages = stats["by_kind"]["search"]
    assert pages == 2                                   # 112 templates listed, 100 a page
    assert stats["requests"] <= pages + len(added) + len(edited) + 3, stats
    assert "5 new, 4 changed, 3 removed (queued to confirm), 0 restored" in out
    after = stored(db)
    for tid in added:
        assert after[tid]["version"] == 1 and after[tid]["removed_at"] is None
    for tid in edited:
        assert after[tid]["version"] == 2 and after[tid]["name"].endswith("(edit 1)")
        versions = history(site, db, tid)
        assert [v["version"] for v in versions] == [1, 2]
        assert versions[0]["content_hash"] != versions[1]["content_hash"]
    for tid in removed:                                 # marked, data and versions kept
        assert after[tid]["removed_at"] is not None
        assert after[tid]["workflow"] == before[tid]["workflow"] and len(history(site, db, tid)) == 1
    untouched = set(ids) - set(edited) - set(removed)
    assert {after[tid]["version"] for tid in untouched} == {1}
    assert rows(db, "SELECT status, http_status FROM jobs WHERE key = ?", f"n8n:{removed[0]}") == [
        {"status": "invalid", "http_status": 404}]

    changes = json.loads(in_process(site, db, "changes", "--json", check=0).stdout)
    latest = {(c["id"], c["change"]) for c in changes}
    assert {(t, "changed") for t in edited} | {(t, "removed") for t in removed} <= latest
    assert {(t, "added") for t in added} <= latest
    report = status_json(site, db)
    assert report["removed"] == 3 and report["last_complete_walk"] and report["listed"] == 112
    live = in_process(site, db, "export", "--format", "jsonl", "--live-only", check=0).stdout.splitlines()
    assert len(live) == 112 and all(json.loads(line)["removed_at"] is None for line in live)

    # workflow-only edits do not show in the listing: a refresh finds them; view counts alone do not count
    assert "queued 112 template(s)" in in_process(site, db, "refresh", "--older-than", "0", check=0).stdout
    scraper(site, db, "run", "--workers", "2", *FAST, check=0)
    refreshed = stored(db)
    for tid in workflow_only:
        assert refreshed[tid]["version"] == 2 and len(history(site, db, tid)) == 2
    assert {refreshed[tid]["version"] for tid in untouched - set(workflow_only)} == {1}
    assert refreshed[ids[0]]["total_views"] != before[ids[0]]["total_views"]

    # a removed template that comes back is restored
    site.library(restore=removed[:1])
    assert "1 restored" in daily_line(site, db)
    assert stored(db)[removed[0]]["removed_at"] is None
    assert (removed[0], "restored") in {(c["id"], c["change"]) for c in
                                         json.loads(in_process(site, db, "changes", "--json", check=0).stdout)}

    # every row again from the stored answers, without a single request
    snapshot = stored(db)
    site.reset()
    assert "rebuilt 115 workflow row(s)" in in_process(site, db, "reextract", check=0).stdout
    assert site.stats()["requests"] == 0
    assert stored(db) == snapshot
