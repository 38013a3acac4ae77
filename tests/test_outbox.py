"""The outbox (issue 41): one event per change in the change's own transaction, the pull feed by cursor
(`changes --after`, compacted), the run record (`scraper runs`), on SQLite and on PostgreSQL."""

import json
import random
import threading
import time

import pytest

from scraper.db import events, runrecord, store
from scraper.db.queue import Queue
from scraper.mirror import answers, feed, items
from scraper.mirror.sync import iso
from scraper.sites import n8n
from tests.helpers import (
    assert_one_sentence_error,
    definition_ids,
    detail_body,
    invoke,
    remove_item,
    remove_template,
    store_item,
    store_template,
)

IDS = sorted(definition_ids()[:3])
T0 = 1_780_000_000.0


def _fetch(q, tid, now, body, worker="w1"):
    """One job of template `tid` claimed and done, its answer stored, as a worker does."""
    job = q.claim(worker, now, 60)
    assert job is not None and job.key == n8n.job_key(tid)
    at = iso(now)
    assert q.complete(job, worker, now, 10,
                      write=lambda c: store_template(c, n8n.extract(body, at), {"api": body}, at))


def _history(conn):
    """Every template's life as the outbox tells it, and as the mirror stored it."""
    evs = [events.as_dict(r) for r in events.after(conn)]
    told = {tid: [(e["type"], e["data"]["version"]) for e in evs if e["subject"] == str(tid)
                  and e["type"].startswith("template.")] for tid in IDS}
    stored = {tid: [v["version"] for v in answers.history(conn, tid)] for tid in IDS}
    return evs, told, stored


@pytest.fixture
def lived(backend):
    """IDS stored at version 1; IDS[0] changed (version 2); IDS[1] removed, then served again (restored);
    one job of a run ended invalid."""
    conn = store.open_db(backend)
    run_id = runrecord.start_run(conn, 4242, T0, 1, "{}", "host", [n8n.SITE])
    q = Queue(conn, run_id=run_id)
    q.seed([(n8n.job_key(i), n8n.SITE, n8n.page_url("http://site.test", i), "site.test") for i in IDS], now=T0)
    for k, tid in enumerate(IDS):
        _fetch(q, tid, T0 + k, detail_body(tid))
    q.refetch([n8n.job_key(IDS[0])], T0 + 10)
    _fetch(q, IDS[0], T0 + 11, detail_body(IDS[0], name="Renamed"))
    q.refetch([n8n.job_key(IDS[1])], T0 + 20)
    job = q.claim("w1", T0 + 21, 60)
    assert q.fail(job, "w1", T0 + 21, "invalid", "gone", "HTTP 404: removed",
                  write=lambda c: remove_template(c, IDS[1], iso(T0 + 21)))
    q.refetch([n8n.job_key(IDS[1])], T0 + 30)
    _fetch(q, IDS[1], T0 + 31, detail_body(IDS[1]))
    yield conn, q, run_id
    conn.close()


def test_every_change_the_mirror_records_has_one_event_in_its_transaction(lived):
    conn, q, run_id = lived
    evs, told, stored = _history(conn)
    assert stored == {IDS[0]: [1, 2], IDS[1]: [1], IDS[2]: [1]}
    assert told == {IDS[0]: [("template.created", 1), ("template.updated", 2)],
                    IDS[1]: [("template.created", 1), ("template.removed", 1), ("template.restored", 1)],
                    IDS[2]: [("template.created", 1)]}
    # one event per row of `changes`, and each names the version's answer
    assert conn.execute("SELECT COUNT(*) FROM changes").fetchone()[0] == sum(map(len, told.values()))
    updated = next(e for e in evs if e["type"] == "template.updated")
    assert updated["data"] == {"id": IDS[0], "version": 2, "url": None,
                               "content_hash": answers.history(conn, IDS[0])[1]["content_hash"]}
    assert updated["run_id"] == run_id and updated["source"] == n8n.SITE
    invalid = [e for e in evs if e["type"] == "job.invalid"]
    assert [(e["subject"], e["data"]["kind"], e["data"]["reason"]) for e in invalid] == \
        [(n8n.job_key(IDS[1]), "gone", "HTTP 404: removed")]
    assert [e["seq"] for e in evs] == sorted(e["seq"] for e in evs)
    assert len({e["id"] for e in evs}) == len(evs)
    assert [e["type"] for e in evs if e["type"].startswith("run.")] == ["run.started"]

    # a job whose result fails to be written leaves no change and no event
    q.refetch([n8n.job_key(IDS[2])], T0 + 40)
    job = q.claim("w1", T0 + 41, 60)
    before = events.head(conn)

    def broken(c):
        store_template(c, n8n.extract(detail_body(IDS[2], name="New"), iso(T0 + 41)),
                      {"api": detail_body(IDS[2], name="New")}, iso(T0 + 41))
        raise RuntimeError("the disk is full")

    with pytest.raises(RuntimeError):
        q.complete(job, "w1", T0 + 41, 10, write=broken)
    assert events.head(conn) == before
    assert _history(conn)[1] == told
    assert events.count(conn, before) == 0


def test_items_have_the_same_four_events(backend):
    conn = store.open_db(backend)
    with store.transaction(conn) as c:
        store_item(c, "events", "/e/1", "http://ev.test/e/1", {"name": "Jazz"}, {"page": b"<p>1</p>"}, iso(T0))
    with store.transaction(conn) as c:
        store_item(c, "events", "/e/1", "http://ev.test/e/1", {"name": "Jazz!"}, {"page": b"<p>2</p>"}, iso(T0 + 1))
    with store.transaction(conn) as c:
        remove_item(c, "events", "/e/1", iso(T0 + 2))
    with store.transaction(conn) as c:
        store_item(c, "events", "/e/1", "http://ev.test/e/1", {"name": "Jazz!"}, {"page": b"<p>2</p>"}, iso(T0 + 3))
    evs = [events.as_dict(r) for r in events.after(conn)]
    conn.close()
    assert [(e["type"], e["subject"], e["data"]["version"]) for e in evs] == [
        ("item.created", "/e/1", 1), ("item.updated", "/e/1", 2), ("item.removed", "/e/1", 2),
        ("item.restored", "/e/1", 2)]
    assert {e["data"]["url"] for e in evs} == {"http://ev.test/e/1"}
    assert evs[0]["data"]["content_hash"] == items.record_hash({"name": "Jazz"})


def _pages(db, after=0, *more):
    """Every page of `changes --after`, one invocation each, resuming from each page's `next`."""
    seen = []
    while True:
        result = invoke("changes", "--after", str(after), "--limit", "2", "--json", *more, db=db)
        assert result.exit_code == 0, result.output
        got = json.loads(result.output)
        if not got["changes"]:
            assert got["next"] == after
            return seen, after
        assert all(e["seq"] > after for e in got["changes"])
        seen += got["changes"]
        after = got["next"]


def test_a_consumer_that_stops_after_every_page_ends_as_one_that_never_stopped(lived, backend):
    conn = lived[0]
    whole = json.loads(invoke("changes", "--json", "--after", "0", db=backend).output)
    assert set(whole) == {"changes", "next"} and whole["next"] == events.head(conn)
    assert set(whole["changes"][0]) >= {"seq", "id", "type", "source", "subject", "occurred_at", "data"}
    paged, cursor = _pages(backend)
    assert paged == whole["changes"] and cursor == whole["next"]
    # more happens; both go on from where they were
    with store.transaction(conn) as c:
        remove_template(c, IDS[2], iso(T0 + 50))
    more, _ = _pages(backend, cursor)
    assert [(e["type"], e["subject"]) for e in more] == [("template.removed", str(IDS[2]))]
    text = invoke("changes", "--after", str(cursor), db=backend)
    assert f"template.removed   {n8n.SITE}  {IDS[2]}" in text.output


def test_a_compacted_read_resyncs_every_live_template_and_every_tombstone(lived, backend):
    conn = lived[0]
    with store.transaction(conn) as c:
        remove_template(c, IDS[2], iso(T0 + 50))
    got = json.loads(invoke("changes", "--compact", "--json", db=backend).output)
    latest = {e["subject"]: e for e in got["changes"] if e["type"].startswith("template.")}
    live, removed = {str(i) for i in IDS[:2]}, {str(IDS[2])}
    assert {s for s, e in latest.items() if e["type"] != "template.removed"} == live
    assert {s for s, e in latest.items() if e["type"] == "template.removed"} == removed
    assert latest[str(IDS[0])]["data"]["version"] == 2
    assert got["next"] == events.head(conn)          # nothing newer was left out
    # an old cursor in compacted pages of one: the same newest events, then nothing
    paged, cursor = _pages(backend, 0, "--compact")
    assert [e["seq"] for e in paged] == [e["seq"] for e in got["changes"]] and cursor == got["next"]
    # the library, with a type family
    only = feed.page(conn, 0, None, True, ("template.*",))
    assert [e["subject"] for e in only["changes"]] == [e["subject"] for e in got["changes"]
                                                        if e["type"].startswith("template.")]



def test_a_cursor_older_than_ten_thousand_compacted_events_resyncs_every_live_one_and_every_tombstone(tmp_path):
    """Over 10,000 events over 400 templates and items (created, many updates, some removed and some of those
    restored); a reader at cursor 0 reads the compacted feed in pages of 97 and ends with exactly the newest
    event of each, removals as tombstones, and the head as its cursor."""
    conn = store.open_db(str(tmp_path / "jobs.db"))
    rng = random.Random(41)
    subjects = ([("template", n8n.SITE, str(i)) for i in range(300)]
                + [("item", "events", f"/e/{i}") for i in range(100)])
    newest = {}
    with store.transaction(conn):
        for n in range(12_000):
            family, source, subject = subjects[n] if n < len(subjects) else rng.choice(subjects)
            before = newest.get((family, source, subject))
            kind = ("created" if before is None
                    else rng.choice(["updated"] * 6 + ["removed"]) if before != "removed"
                    else rng.choice(["restored", "removed"]))
            if before == "removed" and kind == "removed":
                continue
            events.append(conn, f"{family}.{kind}", source, subject, {"n": n}, iso(T0 + n))
            newest[(family, source, subject)] = kind
    assert events.head(conn) > 10_000
    seen, cursor = {}, 0
    while True:
        got = feed.page(conn, cursor, 97, True)
        if not got["changes"]:
            break
        for e in got["changes"]:
            assert e["seq"] > cursor
            seen[(e["type"].split(".")[0], e["source"], e["subject"])] = e["type"].split(".")[1]
        cursor = got["next"]
    assert cursor == events.head(conn)
    assert seen == newest
    tombstones = {k for k, kind in newest.items() if kind == "removed"}
    assert tombstones and all(seen[k] == "removed" for k in tombstones)
    conn.close()

def test_the_feed_follows_new_events_and_the_mcp_tool_takes_the_cursor(lived):
    from scraper.products import lookup
    conn = lived[0]
    head = events.head(conn)
    polls = []

    def sleep(_s):      # a change comes in while the feed waits
        polls.append(_s)
        if len(polls) == 1:
            with store.transaction(conn) as c:
                remove_template(c, IDS[0], iso(T0 + 60))

    pages = list(feed.follow(conn, head, None, sleep=sleep, stop=lambda: len(polls) >= 2))
    assert [[e["type"] for e in p["changes"]] for p in pages] == [["template.removed"]]
    assert pages[0]["next"] == head + 1
    answer = lookup.recent_changes(conn, limit=2, after=head - 1)
    assert [e["seq"] for e in answer["changes"]] == [head, head + 1] and answer["next"] == head + 1
    assert "changes" in lookup.recent_changes(conn)      # without a cursor: as before, by time


@pytest.mark.parametrize("args, words", [
    (["changes", "--after", "0", "--since", "2026-01-01"], ["--type"]),
    (["changes", "--after", "0", "--type", "template"], ["not an event type"]),
    (["changes", "--type", "run.*"], ["--after"]),
])
def test_the_feed_refuses_what_it_cannot_mean_in_one_sentence(lived, backend, args, words):
    assert_one_sentence_error(invoke(*args, db=backend), *words)


def test_runs_lists_runs_per_source_with_counts_that_add_up(lived, backend):
    conn, q, run_id = lived
    runrecord.finish_run(conn, run_id, T0 + 100, q.counts(), 0)
    later = runrecord.start_run(conn, 4243, time.time(), 2, "{}", "host", [n8n.SITE, "events"])
    q2 = Queue(conn, run_id=later)
    q2.seed([("events:/e/9", "catalogue", "http://ev.test/e/9", "ev.test", "events")], now=T0)
    runs = json.loads(invoke("runs", "--json", db=backend).output)
    assert [(r["id"], r["status"]) for r in runs] == [(later, "running"), (run_id, "succeeded")]
    first = runs[1]
    # 3 fetched + 1 changed + 1 restored done, 1 invalid; nothing left pending
    assert (first["total"], first["finished"], first["failed"], first["invalid"]) == (6, 5, 0, 1)
    assert first["source"] == n8n.SITE and first["finished_at"] == iso(T0 + 100)
    for r in runs:
        assert r["finished"] + r["failed"] + r["invalid"] <= r["total"]
    assert runs[0]["source"] == f"{n8n.SITE},events" and runs[0]["total"] == 1     # the pending item job
    latest = json.loads(invoke("runs", "--latest", "--source", "events", "--json", db=backend).output)
    assert (latest["id"], latest["total"], latest["finished"]) == (later, 1, 0)
    assert json.loads(invoke("runs", "--latest", "--source", "nowhere", "--json", db=backend).output) is None
    assert [r["id"] for r in json.loads(invoke("runs", "--before", str(later), "--json", db=backend).output)] \
        == [run_id]
    assert [r["id"] for r in json.loads(invoke("runs", "--status", "succeeded", "--json", db=backend).output)] \
        == [run_id]
    text = invoke("runs", db=backend).output
    assert "succeeded" in text and "5/6 finished, 0 failed, 1 invalid" in text
    finished = [events.as_dict(r) for r in events.after(conn, types=("run.finished",))]
    assert [(e["source"], e["data"]["status"], e["data"]["finished"]) for e in finished] == [(n8n.SITE, "succeeded", 5)]
    with store.transaction(conn) as c:
        runrecord.progress(c, later, time.time())
    progress = [events.as_dict(r) for r in events.after(conn, types=("run.progress",))]
    assert {e["source"]: e["data"]["total"] for e in progress} == {n8n.SITE: 0, "events": 1}


def test_on_postgresql_a_polling_reader_misses_no_event_of_writers_committing_late(pg_migrated_url):
    """Two writers hold each transaction open 0-500 ms after their event is appended; a reader polls
    `after` every 100 ms: what it gathered is exactly what a final full read gives."""
    stop = threading.Event()
    errors = []

    def writer(name):
        conn = store.connect(pg_migrated_url)
        rnd = random.Random(name)
        try:
            for i in range(5):
                with store.transaction(conn, shared=True) as c:
                    events.append(c, "job.failed", "n8n", f"{name}:{i}", {"i": i}, iso(T0))
                    time.sleep(rnd.uniform(0, 0.5))
        except Exception as e:      # reported by the test's assertion
            errors.append(e)
        finally:
            conn.close()

    gathered = []

    def reader():
        conn = store.connect(pg_migrated_url)
        after = 0
        try:
            while True:
                last = stop.is_set()
                got = feed.page(conn, after)
                gathered.extend(e["id"] for e in got["changes"])
                after = got["next"]
                if last:
                    return
                time.sleep(0.1)
        finally:
            conn.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("a", "b")]
    poller = threading.Thread(target=reader)
    poller.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    poller.join()
    assert not errors
    conn = store.connect(pg_migrated_url)
    final = [events.as_dict(r)["id"] for r in events.after(conn)]
    conn.close()
    assert len(final) == 10
    assert gathered == final


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_changes_recorded_before_the_outbox_become_its_first_events(kind, tmp_path, request):
    url = request.getfixturevalue("pg_url") if kind == "postgres" else str(tmp_path / "jobs.db")
    conn = store.connect(url)
    store.migrate(conn, 23)      # the schema as it was before migration 24, the outbox
    conn.execute("INSERT INTO answers (source, key, template_id, version, kind, content_hash, fetched_at, "
                 "body_fetched_at, size, body, url) VALUES ('n8n', '7', 7, 1, 'api', 'h7', 't', 't', 1, ?, 'http://a/7')",
                 (b"x",))
    conn.execute("INSERT INTO changes (source, key, template_id, change, at, version) VALUES "
                 "('n8n', '7', 7, 'added', '2026-01-01T00:00:00+00:00', 1)")
    conn.execute("INSERT INTO changes (source, key, template_id, change, at, version) VALUES "
                 "('events', '/e/1', NULL, 'removed', '2026-01-02T00:00:00+00:00', 3)")
    store.migrate(conn)
    got = [events.as_dict(r) for r in events.after(conn)]
    conn.close()
    assert [(e["id"][:7], e["type"], e["source"], e["subject"], e["occurred_at"][:10]) for e in got] == [
        ("change:", "template.created", "n8n", "7", "2026-01-01"), ("change:", "item.removed", "events", "/e/1",
                                                                      "2026-01-02")]
    assert got[0]["data"] == {"id": 7, "version": 1, "content_hash": "h7", "url": "http://a/7"}
    assert got[1]["data"] == {"key": "/e/1", "version": 3, "content_hash": None, "url": None}
