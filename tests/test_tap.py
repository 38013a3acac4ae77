"""`scraper tap` (issue 47): Singer messages for the five streams, loaded by target-jsonl (a real Singer
target, in a venv of its own: `make .venv-target/bin/target-jsonl`), a cursor with no overlap."""

import json
import logging
import subprocess

import pytest

from scraper.db import store
from tests.helpers import ROOT, KeptMirror, assert_one_sentence_error, definition_ids, invoke, store_item

pytest.importorskip("singer_sdk", reason="the tap is built with singer-sdk: pip install 'scraper[tap]'")

IDS = definition_ids()
FIRST = IDS[:10]
GONE, NEW, RENAMED = FIRST[0], IDS[10:12], FIRST[1:5]      # 7 changes: 1 removed, 2 new, 4 changed
STREAMS = {"templates", "versions", "items", "runs", "changes"}
TARGET = ROOT / ".venv-target" / "bin" / "target-jsonl"


def tap(db, *args):
    """The messages of `scraper tap ARGS`, each line parsed."""
    result = invoke("tap", *args, db=db)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def records(messages, stream=None):
    return [m["record"] for m in messages if m["type"] == "RECORD" and stream in (None, m["stream"])]


def load(messages, folder):
    """target-jsonl run on the messages: {stream: [record]} of the files it wrote, and the last state it
    echoed (what a user keeps for the next run)."""
    if not TARGET.exists():
        pytest.skip("target-jsonl is not installed in .venv-target (`make .venv-target/bin/target-jsonl` makes it; "
                    "`make test` does)")
    folder.mkdir()
    config = folder / "target.json"
    config.write_text(json.dumps({"destination_path": str(folder), "do_timestamp_file": False}))
    done = subprocess.run([str(TARGET), "--config", str(config)], input="".join(json.dumps(m) + "\n" for m in messages),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = {f.stem: [json.loads(line) for line in f.read_text().splitlines()] for f in folder.glob("*.jsonl")}
    return loaded, done.stdout.splitlines()[-1]


def test_every_template_once_then_nothing_then_exactly_the_seven_changes(tmp_path):
    db = tmp_path / "jobs.db"
    mirror = KeptMirror(db)
    first_run = mirror.day(FIRST)
    conn = store.open_db(str(db))
    store_item(conn, "events", "/events/jazz-night-42", "https://events.test/events/jazz-night-42",
               {"name": "Jazz night"}, {"page": b"<html></html>"}, "2026-12-01T00:00:00+00:00")
    conn.close()

    first = tap(db)
    assert {m["type"] for m in first} == {"SCHEMA", "RECORD", "STATE"} and first[-1]["type"] == "STATE"
    assert {m["stream"] for m in first if m["type"] == "SCHEMA"} == STREAMS
    loaded, state = load(first, tmp_path / "first")
    assert sorted(t["id"] for t in loaded["templates"]) == sorted(FIRST)       # each once
    assert all(t["version"] == 1 and t["removed_at"] is None and t["workflow"]["nodes"] for t in loaded["templates"])
    assert len(loaded["versions"]) == len(loaded["changes"]) == 11             # 10 templates, 1 item
    assert [(i["source"], i["key"], i["record"]) for i in loaded["items"]] == [
        ("events", "/events/jazz-night-42", {"name": "Jazz night"})]
    assert [(r["id"], r["status"], r["finished"]) for r in loaded["runs"]] == [(first_run, "succeeded", 10)]
    assert json.loads(state) == first[-1]["value"]
    saved = tmp_path / "state.json"
    saved.write_text(state)

    again = tap(db, "--state", str(saved))
    assert records(again) == [] and again[-1] == first[-1]                   # no RECORD; the same STATE

    second_run = mirror.day([i for i in FIRST if i != GONE] + NEW, renamed=RENAMED)
    after = tap(db, "--state", str(saved))
    loaded, _ = load(after, tmp_path / "after")
    templates = {t["id"]: t for t in loaded["templates"]}
    assert len(loaded["templates"]) == 7 and set(templates) == {GONE, *NEW, *RENAMED}
    assert templates[GONE]["removed_at"] is not None and templates[GONE]["version"] == 1      # its tombstone
    assert all(templates[i]["version"] == 2 and templates[i]["name"] == f"Renamed {i}" for i in RENAMED)
    assert all(templates[i]["version"] == 1 and templates[i]["removed_at"] is None for i in NEW)
    assert sorted(c["type"] for c in loaded["changes"]) == sorted(
        ["template.removed"] + ["template.created"] * 2 + ["template.updated"] * 4)
    assert sorted((v["template_id"], v["version"]) for v in loaded["versions"]) == sorted(
        [(i, 1) for i in NEW] + [(i, 2) for i in RENAMED])                   # a removal makes no version
    assert [r["id"] for r in loaded["runs"]] == [second_run] and "items" not in loaded


def test_discover_prints_the_catalog_of_the_five_streams(tmp_path):
    db = tmp_path / "jobs.db"
    store.open_db(str(db)).close()
    result = invoke("tap", "--discover", db=db)
    assert result.exit_code == 0, result.output
    catalog = {s["tap_stream_id"]: s for s in json.loads(result.stdout)["streams"]}
    assert set(catalog) == STREAMS
    assert catalog["templates"]["key_properties"] == ["id"] and catalog["templates"]["replication_key"] == "seq"
    assert {"id", "name", "workflow", "removed_at", "seq"} <= set(catalog["templates"]["schema"]["properties"])
    assert catalog["versions"]["key_properties"] == ["source", "key", "version"]
    assert tap(db) == [m for m in tap(db) if m["type"] != "RECORD"]            # an empty mirror: no RECORD


@pytest.mark.parametrize("text, words", [("{not json", ["--state", "not JSON"]), ("[1]", ["--state", "no state"])])
def test_a_bad_state_file_is_one_sentence(tmp_path, text, words):
    db = tmp_path / "jobs.db"
    store.open_db(str(db)).close()
    (tmp_path / "state.json").write_text(text)
    result = invoke("tap", "--state", str(tmp_path / "state.json"), db=db)
    assert_one_sentence_error(result, *words)
    assert result.stdout == ""


def test_the_tap_needs_a_database_and_a_state_file_that_exists(tmp_path):
    assert_one_sentence_error(invoke("tap", db=tmp_path / "jobs.db"), "no database")
    assert not (tmp_path / "jobs.db").exists()
    store.open_db(str(tmp_path / "jobs.db")).close()
    assert_one_sentence_error(invoke("tap", "--state", str(tmp_path / "missing.json"), db=tmp_path / "jobs.db"),
                              "--state", "missing.json")


def test_on_either_backend_a_rerun_gives_nothing_and_a_change_its_records(backend, tmp_path):
    """The same cursor on SQLite and PostgreSQL (the outbox's seq is commit-ordered on both), and the Atom
    feed over the same database."""
    from scraper.products import atom

    mirror = KeptMirror(backend)
    mirror.day(IDS[:3])
    first = tap(backend)
    assert sorted(r["id"] for r in records(first, "templates")) == sorted(IDS[:3])
    saved = tmp_path / "state.json"
    saved.write_text(json.dumps(first[-1]))             # the STATE message itself is taken too
    assert records(tap(backend, "--state", str(saved))) == []
    mirror.day(IDS[:3], renamed=IDS[:1])
    after = tap(backend, "--state", str(saved))
    assert [(r["id"], r["version"]) for r in records(after, "templates")] == [(IDS[0], 2)]
    assert [r["type"] for r in records(after, "changes")] == ["template.updated"]
    conn = store.connect(str(backend))
    try:
        entries = atom.build(conn, "http://site.test").count(b"<entry>")
    finally:
        conn.close()
    assert entries == 4


def test_tap_scraper_takes_singers_own_options_as_meltano_passes_them(tmp_path, monkeypatch, capsys):
    from scraper.cli.tap import singer_main

    root = logging.getLogger()      # the SDK's command line adds a handler to the root logger: not for later tests
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    db = tmp_path / "jobs.db"
    KeptMirror(db).day(IDS[:2])
    config, state = tmp_path / "config.json", tmp_path / "state.json"
    config.write_text(json.dumps({"db": str(db)}))
    state.write_text(json.dumps(tap(db)[-1]["value"]))       # Meltano keeps the state's value
    monkeypatch.setattr("sys.argv", ["tap-scraper", "--config", str(config)])
    with pytest.raises(SystemExit) as done:
        singer_main()
    assert done.value.code == 0
    assert sorted(r["id"] for r in records([json.loads(x) for x in capsys.readouterr().out.splitlines()],
                                           "templates")) == sorted(IDS[:2])
    monkeypatch.setattr("sys.argv", ["tap-scraper", "--config", str(config), "--state", str(state)])
    with pytest.raises(SystemExit):
        singer_main()
    assert '"RECORD"' not in capsys.readouterr().out
    config.write_text(json.dumps({"db": str(tmp_path / "none.db")}))
    monkeypatch.setattr("sys.argv", ["tap-scraper", "--config", str(config)])
    with pytest.raises(SystemExit) as done:
        singer_main()
    assert done.value.code == 2 and "Error: there is no database" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()
