"""The mirror commands for catalogue items: changes, history SOURCE:URL-or-path, search --source,
export --source (JSON nests `record`, CSV and Parquet give `record.<field>` columns), refresh --source,
failures keyed SOURCE:PATH; export without --source gives the templates alone."""

import csv
import io
import json

import pytest

from scraper.db import store
from scraper.db.queue import Queue
from tests.helpers import assert_one_sentence_error, invoke, remove_item, store_item

SITE = "http://cal.test"


@pytest.fixture
def mirror(tmp_path):
    db = tmp_path / "jobs.db"
    conn = store.open_db(str(db))
    q = Queue(conn)
    q.seed([("events:/events/a-1", "catalogue", f"{SITE}/events/a-1", "cal.test"),
            ("events:/events/b-2", "catalogue", f"{SITE}/events/b-2", "cal.test"),
            ("events:/events/c-3", "catalogue", f"{SITE}/events/c-3", "cal.test")], now=0)
    with store.transaction(conn) as c:
        c.execute("UPDATE jobs SET status = 'done', finished_at = 1 WHERE key != 'events:/events/c-3'")
        c.execute("UPDATE jobs SET status = 'failed', finished_at = 2, error_kind = 'incomplete', "
                  "last_error = 'the page lacks the required field(s) startDate' WHERE key = 'events:/events/c-3'")
        store_item(c, "events", "/events/a-1", f"{SITE}/events/a-1",
                    {"name": "Jazz Night", "startDate": "2026-05-01", "location": {"name": "Hall"}},
                    {"page": b"<html>1</html>"}, "2026-11-01T00:00:00+00:00")
        store_item(c, "events", "/events/a-1", f"{SITE}/events/a-1",
                    {"name": "Jazz Night (revised)", "startDate": "2026-05-01", "location": {"name": "Hall"}},
                    {"page": b"<html>2</html>"}, "2026-11-02T00:00:00+00:00")
        store_item(c, "events", "/events/b-2", f"{SITE}/events/b-2",
                    {"name": "=Book Reading", "startDate": "2026-06-01", "organizer": "Lesekreis"},
                    {"page": b"<html>b</html>"}, "2026-11-01T00:00:00+00:00")
        remove_item(c, "events", "/events/b-2", "2026-11-03T00:00:00+00:00")
    conn.close()
    return db


def test_changes_and_history_of_items(mirror):
    found = json.loads(invoke("changes", "--json", db=mirror).output)
    assert [(c["key"], c["change"]) for c in found] == [
        ("events:/events/a-1", "added"), ("events:/events/b-2", "added"), ("events:/events/a-1", "changed"),
        ("events:/events/b-2", "removed")]
    assert "removed   events:/events/b-2" in invoke("changes", db=mirror).output
    assert all(c["name"] for c in found)          # issue 32: each change names its item (a removed one too)
    by_path = json.loads(invoke("history", "events:/events/a-1", "--json", db=mirror).output)
    by_url = json.loads(invoke("history", f"events:{SITE}/events/a-1", "--json", db=mirror).output)
    assert [v["version"] for v in by_path] == [1, 2] and by_url == by_path
    assert_one_sentence_error(invoke("history", "events:/nope", db=mirror), "item events:/nope")
    assert_one_sentence_error(invoke("history", "nonsense", db=mirror), "neither a template id")


def test_search_and_failures_give_items_their_key(mirror):
    found = json.loads(invoke("search", "jazz", "--source", "events", "--json", db=mirror).output)
    assert [r["key"] for r in found] == ["events:/events/a-1"] and "Jazz" in found[0]["snippet"]
    # issue 46: a source that is not there was an empty answer and exit 0
    for args in (["--source", "nope"], ["--source", "nope", "--json"]):
        assert_one_sentence_error(invoke("search", "jazz", *args, db=mirror), "no catalogue source 'nope'",
                                  "the catalogue sources here: events")
    assert_one_sentence_error(invoke("search", "jazz", "--source", "n8n", db=mirror), "searched without --source")
    failed = json.loads(invoke("failures", "--json", db=mirror).output)
    assert [(f["key"], f["error_kind"]) for f in failed] == [("events:/events/c-3", "incomplete")]


def test_export_of_a_source_nests_record_in_json_and_flattens_it_in_csv_and_parquet(mirror, tmp_path):
    lines = [json.loads(line) for line in invoke("export", "--source", "events", "--format", "jsonl",
                                                   db=mirror).stdout.splitlines() if line.startswith("{")]
    assert [r["key"] for r in lines] == ["events:/events/a-1", "events:/events/b-2"]
    a, b = lines
    assert set(a) == {"source", "key", "url", "version", "first_seen_at", "last_seen_at", "removed_at", "record"}
    assert a["version"] == 2 and a["record"]["location"] == {"name": "Hall"} and b["removed_at"]
    invoke("export", "--source", "events", "--format", "json", "-o", str(tmp_path / "e.json"), db=mirror)
    assert json.loads((tmp_path / "e.json").read_text()) == lines
    invoke("export", "--source", "events", "--format", "csv", "-o", str(tmp_path / "e.csv"), db=mirror)
    table = list(csv.DictReader(io.StringIO((tmp_path / "e.csv").read_text())))
    assert [c for c in table[0] if c.startswith("record.")] == [
        "record.location", "record.name", "record.organizer", "record.startDate"]
    assert table[0]["record.location"] == '{"name":"Hall"}' and table[1]["record.name"] == "'=Book Reading"
    pq = pytest.importorskip("pyarrow.parquet")
    invoke("export", "--source", "events", "--format", "parquet", "-o", str(tmp_path / "e.parquet"), db=mirror)
    t = pq.read_table(tmp_path / "e.parquet").to_pylist()
    assert t[0]["record.name"] == "Jazz Night (revised)" and t[0]["version"] == 2
    # without --source: the templates alone, as today (none here)
    assert invoke("export", "--format", "jsonl", db=mirror).stdout.strip() == ""
    assert_one_sentence_error(invoke("export", "--source", "shop", "--format", "json", db=mirror), "shop")


def test_refresh_of_a_source_queues_its_done_live_items(mirror):
    out = invoke("refresh", "--source", "events", "--older-than", "0", db=mirror).output
    assert "queued 1 item(s) of events" in out


def test_a_database_of_the_previous_schema_upgrades_in_place_keeping_every_row(tmp_path):
    path = tmp_path / "old.db"
    conn = store.connect(str(path))
    store.migrate(conn, 6)          # the schema before the mirror core (issue 16)
    conn.execute("INSERT INTO workflows (id, name, version, fetched_at, content_hash) VALUES (7, 'T', 2, 'x', 'h')")
    for v in (1, 2):
        for kind in ("api", "page"):
            conn.execute("INSERT INTO answers VALUES (7, ?, ?, 'h', 'f', 'f', 3, x'00')", (v, kind))
    conn.execute("INSERT INTO changes (template_id, change, at, version) VALUES (7, 'added', 'a', 1), "
                 "(7, 'changed', 'b', 2)")
    before = {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in ("answers", "changes")}
    conn.close()
    conn = store.open_db(str(path))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
    after_answers = [tuple(r)[:8] for r in conn.execute("SELECT * FROM answers ORDER BY template_id, version")]
    assert after_answers == [tuple(r) for r in before["answers"]]
    assert [tuple(r)[:5] for r in conn.execute("SELECT * FROM changes ORDER BY seq")] == \
        [tuple(r) for r in before["changes"]]
    assert {(r["source"], r["key"]) for r in conn.execute("SELECT source, key FROM answers")} == {("n8n", "7")}
    from scraper.mirror import answers
    assert [v["version"] for v in answers.history(conn, 7)] == [1, 2]
    assert [c["id"] for c in answers.changes(conn)] == [7, 7]
    conn.close()
