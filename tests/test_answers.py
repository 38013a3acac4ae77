"""Raw answers, versions, removals and the listing sync: pure parts, then the worker on a real queue."""

import json

import pytest

from scraper.db import store
from scraper.db.queue import Queue
from scraper.mirror import answers, sync
from scraper.pool import jobclient
from scraper.sites import n8n
from tests.helpers import DETAIL, NOW, TID, detail_answer, detail_body, job, search_items, workflow

# --- pure ----------------------------------------------------------------------------------------


def test_view_counters_alone_are_no_change():
    first = detail_body(TID)
    counted = detail_body(TID, views=1, totalViews=99_999, recentViews=12)
    assert counted != first and answers.content_hash(counted) == answers.content_hash(first)


@pytest.mark.parametrize("field, value", [("name", "Renamed"), ("lastUpdatedBy", 4242), ("readyToDemo", True),
                                          ("someFieldN8nAddsLater", {"x": 1})])
def test_any_other_field_is_a_change(field, value):
    assert answers.content_hash(detail_body(TID, **{field: value})) != answers.content_hash(detail_body(TID))


def test_key_order_is_no_change():
    answer = detail_answer(TID)
    reordered = {"workflow": dict(reversed(list(answer["workflow"].items())))}
    assert answers.content_hash(json.dumps(reordered).encode()) == answers.content_hash(detail_body(TID))


@pytest.mark.parametrize("current, old, new, old_row, new_row, expected", [
    (None, None, "a", None, "r", (1, "added")),
    (1, "a", "a", "r", "r", (1, None)),
    (1, "a", "b", "r", "r", (2, "changed")),
    (3, "a", "b", "r", "s", (4, "changed")),
    (1, None, "a", "r", "r", (1, None)),          # stored before answers were kept, same content
    (1, None, "a", "r", "s", (2, "changed")),
])
def test_next_version(current, old, new, old_row, new_row, expected):
    assert answers.next_version(current, old, new, old_row, new_row) == expected


def test_a_result_is_planned_from_what_is_stored_without_a_database():
    """`record.plan` (pure): a new template is version 1 `added`, its event naming the answer's hash and URL; a
    removal of a live one names its current answer's, and of one not stored or removed already plans nothing;
    a hollow answer over a complete version writes no answer, only "seen again" (and `restored`)."""
    from scraper.db import results, templates
    from scraper.db.answers import Current
    from scraper.mirror import record
    from scraper.net.http import answer
    from scraper.sites import Result
    body = answer(detail_body(TID), "http://api.test/t", 200, "application/json")
    row = n8n.extract(body, "2026-11-01T00:00:00+00:00")
    live = templates.State(True, 3, "2026-10-01", None, "h", False, "a3", None, Current(3, "api", "a3", "http://u/3"))
    stored = results.State({TID: templates.State(), 2: live, 3: live._replace(removed_at="2026-10-02"),
                            4: templates.State()}, {})
    p = record.plan(Result(versioned=((row, {"api": body}, "2026-11-01T00:00:00+00:00"),), removed=(2, 3, 4)),
                    stored, 5.0, "2026-11-02T00:00:00+00:00", "n8n")
    assert [(a.key, a.version, a.kind, a.url) for a in p.answers] == [(str(TID), 1, "api", "http://api.test/t")]
    assert p.workflows[0].row["version"] == 1 and p.removed == ((2, "2026-11-02T00:00:00+00:00"),)
    assert [(c.key, c.change, c.version, c.digest, c.url) for c in p.changes] == [
        (str(TID), "added", 1, answers.content_hash(body), "http://api.test/t"), ("2", "removed", 3, "a3", "http://u/3")]
    hollow = dict(row, hollow=1)
    p = record.plan(Result(versioned=((hollow, {"api": body}, "2026-11-03T00:00:00+00:00"),)),
                    results.State({TID: live._replace(removed_at="2026-10-02")}, {}), 6.0, "", "n8n")
    assert p.answers == () and p.workflows == (results.Workflow(TID, None, "2026-11-03T00:00:00+00:00"),)
    assert [(c.change, c.version, c.digest) for c in p.changes] == [("restored", 3, "a3")]


def test_entry_hash_ignores_view_counts_only():
    item = search_items()[0]
    assert sync.entry_hash(dict(item, totalViews=1)) == sync.entry_hash(item)
    assert sync.entry_hash(dict(item, name="x")) != sync.entry_hash(item)
    assert sync.entry_hash(dict(item, price=10)) != sync.entry_hash(item)


def test_plan_sorts_a_complete_walk():
    listed = {1: "h1", 2: "h2x", 3: "h3", 5: "h5", 7: "h7"}
    p = sync.plan(listed, True, known={1, 2, 3, 4, 5, 6}, stored_hashes={1: "h1", 2: "h2", 5: "h5"},
                  live={1, 2, 3, 4}, removed={5, 6})
    assert (p.new, p.changed, p.missing, p.restored) == ([7], [2], [4], [5])


def test_an_incomplete_walk_misses_nothing():
    p = sync.plan({1: "h1"}, False, known={1, 2}, stored_hashes={}, live={1, 2}, removed=set())
    assert p.missing == [] and p.new == [] and p.changed == []


@pytest.mark.parametrize("text, stored", [
    ("2026-11-25", "2026-11-25T00:00:00+00:00"),
    ("2026-11-25T02:00:00Z", "2026-11-25T02:00:00+00:00"),
    ("2026-11-25T04:00:00+02:00", "2026-11-25T02:00:00+00:00"),
])
def test_parse_time(text, stored):
    assert sync.parse_time(text) == stored


# --- the worker on a real queue ------------------------------------------------------------------

def versions(q, template_id=TID):
    return answers.history(q.conn, template_id)


def fetch_again(w, q, clock, net, body, dt=3600):
    clock.t += dt
    Queue(q.conn).refetch([n8n.job_key(TID)], clock.t)
    net.replace("GET", DETAIL, body=body)
    assert w.step()


def test_versions_follow_content_not_view_counts(make, net):
    w, q, clock = make(transcripts=False)   # one n8n job: no video jobs to claim between fetches
    net.get(DETAIL, body=detail_body(TID))
    assert w.step()
    first = workflow(q)
    assert (first["version"], first["first_seen_at"], first["removed_at"]) == (1, jobclient.iso(NOW), None)
    counted = detail_body(TID, totalViews=123_456)
    fetch_again(w, q, clock, net, counted)
    again = workflow(q)
    assert again["version"] == 1 and again["total_views"] == 123_456 and again["last_seen_at"] == jobclient.iso(clock.t)
    stored = q.conn.execute("SELECT body, size, fetched_at, body_fetched_at FROM answers").fetchall()
    assert len(stored) == 1 and answers.decompress(stored[0]["body"]) == counted     # the latest body, kept exactly
    assert stored[0]["size"] == len(counted) and len(stored[0]["body"]) < len(counted) / 2
    assert stored[0]["fetched_at"] == jobclient.iso(NOW) and stored[0]["body_fetched_at"] == jobclient.iso(clock.t)

    fetch_again(w, q, clock, net, detail_body(TID, name="Renamed"))
    assert workflow(q)["version"] == 2 and workflow(q)["first_seen_at"] == jobclient.iso(NOW)
    assert [v["version"] for v in versions(q)] == [1, 2]
    assert [c["change"] for c in answers.changes(q.conn)] == ["added", "changed"]


def test_a_404_marks_a_stored_template_removed_and_keeps_its_data(make, net):
    w, q, clock = make(transcripts=False)   # one n8n job: no video jobs to claim between fetches
    net.get(DETAIL, body=detail_body(TID))
    assert w.step()
    kept = workflow(q)
    clock.t += 60
    Queue(q.conn).refetch([n8n.job_key(TID)], clock.t)
    net.replace("GET", DETAIL, status=404)
    assert w.step()
    assert (job(q)["status"], job(q)["http_status"]) == ("invalid", 404)
    gone = workflow(q)
    assert gone["removed_at"] == jobclient.iso(clock.t)
    assert {k: gone[k] for k in kept if k != "removed_at"} == {k: kept[k] for k in kept if k != "removed_at"}
    assert len(versions(q)) == 1
    # it comes back
    fetch_again(w, q, clock, net, detail_body(TID))
    assert workflow(q)["removed_at"] is None and workflow(q)["version"] == 1
    assert [c["change"] for c in answers.changes(q.conn)] == ["added", "removed", "restored"]


def test_a_404_on_a_template_never_stored_marks_nothing(make, net):
    w, q, clock = make(transcripts=False)   # one n8n job: no video jobs to claim between fetches
    net.get(DETAIL, status=404)
    assert w.step()
    assert job(q)["status"] == "invalid" and workflow(q) is None and answers.changes(q.conn) == []


def test_reextract_rebuilds_rows_from_the_answers_with_the_page(make, net):
    w, q, clock = make(with_page=True, transcripts=False)
    net.get(DETAIL, body=detail_body(TID))
    net.get(f"http://site.test/workflows/{TID}", body="<html><head><title>T</title></head></html>",
            content_type="text/html")
    assert w.step()
    before = workflow(q)
    q.conn.execute("UPDATE workflows SET name = 'broken', explainer = NULL, page_title = NULL, quality_score = -1")
    store.upsert(q.conn, "workflows", dict(n8n.extract(detail_body(TID), "x"), id=1, version=None), "id")
    calls = len(net.calls)
    assert answers.reextract(q.conn) == (1, 1)       # the row without answers is left as it is
    assert workflow(q) == before and before["page_title"] == "T"
    assert len(net.calls) == calls


def test_reextract_brings_the_links_to_videos_in_line_with_the_row(make, net):
    w, q, clock = make(transcripts=False)
    net.get(DETAIL, body=detail_body(TID))
    assert w.step()
    links = lambda: sorted(r[0] for r in q.conn.execute(  # noqa: E731 - read twice below
        "SELECT video_id FROM template_videos WHERE template_id = ?", (TID,)))
    videos = sorted(json.loads(workflow(q)["videos"]))
    assert videos and links() == videos
    q.conn.execute("DELETE FROM template_videos")                              # as an older extractor left it
    q.conn.execute("INSERT INTO template_videos VALUES (?, 'notAVideo00')", (TID,))
    assert answers.reextract(q.conn) == (1, 0)
    assert links() == videos
