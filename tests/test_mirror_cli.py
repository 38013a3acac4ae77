"""The mirror's commands in-process: seed --from-search as a sync, refresh, changes, history, reextract,
export's new columns and --live-only; the network faked by `responses`."""

import json
import time

import pytest
import responses

from scraper.db import store
from scraper.db.queue import Queue
from scraper.mirror.sync import iso
from scraper.sites import n8n
from tests.conftest import ANY_ROBOTS
from tests.helpers import (
    assert_one_sentence_error,
    definition_ids,
    detail_body,
    invoke,
    remove_template,
    rows,
    search_items,
    search_page,
    store_template,
)

IDS = sorted(definition_ids()[:4])
T0 = 1_780_000_000.0        # 2026-05-28


@pytest.fixture
def mirror(db):
    """IDS seeded and stored (version 1), fetched a day apart, oldest first; the listing remembered."""
    conn = store.open_db(str(db))
    q = Queue(conn)
    q.seed([(n8n.job_key(i), n8n.SITE, n8n.page_url("http://site.test", i), "site.test") for i in IDS], now=T0)
    for k, tid in enumerate(IDS):
        job = q.claim("w1", T0 + k * 86_400, 60)
        at = iso(T0 + k * 86_400)
        q.complete(job, "w1", T0 + k * 86_400, 10,
                   write=lambda c, tid=tid, at=at: store_template(c, n8n.extract(detail_body(tid), at),
                                                                  {"api": detail_body(tid)}, at))
    conn.close()
    return db


def listing(ids, edits=None):
    items = {i["id"]: i for i in search_items()}
    return [dict(items[i], **(edits or {}).get(i, {})) for i in ids]


def sync_with(db, items, *more):
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        rsps.add(responses.GET, ANY_ROBOTS, status=404)   # no rules (asked once a day, by the first walk)
        search_page(rsps, 1, items, total=len(items))
        return invoke("seed", "--from-search", *more, db=db)


def statuses(db):
    conn = store.connect(str(db))
    try:
        return {int(k.split(":")[1]): s for k, s in conn.execute("SELECT key, status FROM jobs")}
    finally:
        conn.close()


def test_a_sync_queues_changed_and_missing_templates_and_marks_nothing_itself(mirror):
    first = sync_with(mirror, listing(IDS))
    assert "0 new, 0 changed, 0 removed (queued to confirm), 0 restored" in first.output
    extra = [i for i in (x["id"] for x in search_items()) if i not in IDS][0]
    items = listing(IDS[:3], {IDS[0]: {"totalViews": 1}, IDS[1]: {"name": "Renamed"}}) + listing([extra])
    result = sync_with(mirror, items)
    assert result.exit_code == 0, result.output
    assert "seeded 1 new job(s); 3 already known." in result.output
    assert "listing: 4 template(s) on 1 page(s), complete; 1 new, 1 changed, 1 removed (queued to confirm)" \
        in result.output
    assert statuses(mirror) == {IDS[0]: "done", IDS[1]: "pending", IDS[2]: "done", IDS[3]: "pending",
                                extra: "pending"}
    report = json.loads(invoke("status", "--json", db=mirror).output)
    assert report["removed"] == 0 and report["listed"] == 4 and report["last_complete_walk"]


def test_a_walk_cut_short_by_limit_takes_nothing_as_missing(mirror):
    sync_with(mirror, listing(IDS))
    with responses.RequestsMock() as rsps:
        filler = [{"id": 900_000 + i, "name": f"t{i}"} for i in range(100 - len(IDS))]   # a full first page
        search_page(rsps, 1, listing(IDS) + filler, total=130)
        result = invoke("seed", "--from-search", "--limit", "2", db=mirror)
    assert "incomplete, so nothing is taken as removed; 0 new, 0 changed, 0 removed" in result.output
    assert set(statuses(mirror).values()) == {"done"}
    assert json.loads(invoke("status", "--json", db=mirror).output)["listed"] == 4   # the last complete walk


def test_refresh_queues_the_oldest_first(mirror):
    now_days = (time.time() - T0) / 86_400
    older = int(now_days) - 1                       # only IDS[0] and IDS[1] were fetched before that
    result = invoke("refresh", "--older-than", str(older), db=mirror)
    assert result.exit_code == 0 and "queued 2 template(s)" in result.output, result.output
    assert [s for _, s in sorted(statuses(mirror).items())] == ["pending", "pending", "done", "done"]
    assert "queued 1 template(s)" in invoke("refresh", "--older-than", "0", "--limit", "1", db=mirror).output
    assert statuses(mirror)[IDS[2]] == "pending"    # the oldest of the done ones
    conn = store.connect(str(mirror))
    job = Queue(conn).claim("w1", time.time(), 60)
    conn.close()
    assert job.key == n8n.job_key(IDS[0])            # claims follow the fetch time


def test_changes_and_history(mirror):
    out = json.loads(invoke("changes", "--json", db=mirror).output)
    names = {r["id"]: r["name"] for r in rows(mirror, "SELECT id, name FROM workflows")}
    # issue 32: each change names its template
    assert out == [{"id": i, "change": "added", "at": iso(T0 + k * 86_400), "name": names[i]}
                   for k, i in enumerate(IDS)]
    since = json.loads(invoke("changes", "--since", iso(T0 + 2 * 86_400), "--json", db=mirror).output)
    assert [c["id"] for c in since] == IDS[2:]
    text = invoke("changes", "--since", "2026-05-29", db=mirror).output.splitlines()
    assert len(text) == 3 and text[0].split()[:3] == [iso(T0 + 86_400), "added", str(IDS[1])]
    assert text[0].endswith(f"  {names[IDS[1]]}")
    versions = json.loads(invoke("history", str(IDS[0]), "--json", db=mirror).output)
    assert [set(v) for v in versions] == [{"version", "fetched_at", "content_hash"}] and versions[0]["version"] == 1
    assert invoke("history", str(IDS[0]), db=mirror).output.startswith("version 1  ")


@pytest.mark.parametrize("args, words", [
    (["changes", "--since", "yesterday"], ["--since", "ISO 8601"]),
    (["history", "999999"], ["999999", "no stored version"]),
])
def test_bad_mirror_input_is_one_sentence(mirror, args, words):
    assert_one_sentence_error(invoke(*args, db=mirror), *words)


@pytest.mark.parametrize("command", [["refresh"], ["changes"], ["history", "1"], ["reextract"]])
def test_mirror_commands_need_a_database(db, command):
    assert_one_sentence_error(invoke(*command, db=db), "no database")
    assert not db.exists()


def test_export_has_the_mirror_columns_and_live_only_leaves_removed_out(mirror):
    conn = store.connect(str(mirror))
    with store.transaction(conn) as c:
        remove_template(c, IDS[1], "2026-06-01T00:00:00+00:00")
    conn.close()
    # .stdout: the export's own line (how many values it redacted, issue 10) goes to stderr
    every = [json.loads(line) for line in invoke("export", "--format", "jsonl", db=mirror).stdout.splitlines()]
    assert [r["id"] for r in every] == IDS
    assert every[1]["removed_at"] == "2026-06-01T00:00:00+00:00" and every[0]["removed_at"] is None
    assert every[0]["version"] == 1 and every[0]["first_seen_at"] == every[0]["last_seen_at"] == iso(T0)
    live = invoke("export", "--format", "csv", "--live-only", db=mirror).output.splitlines()
    assert "version,first_seen_at,last_seen_at,removed_at" in live[0] and len(live) >= 4
    assert not any(line.startswith(f"{IDS[1]},") for line in live)
    assert json.loads(invoke("status", "--json", db=mirror).output)["removed"] == 1
    assert "1 removed" in invoke("status", db=mirror).output


def test_reextract_sends_nothing_and_exits_0(mirror):
    with responses.RequestsMock() as rsps:
        result = invoke("reextract", db=mirror)
        assert len(rsps.calls) == 0
    assert result.exit_code == 0 and "rebuilt 4 workflow row(s)" in result.output
