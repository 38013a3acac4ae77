"""The Atom feed of changes (issue 47): what `scraper serve` answers at `/changes.atom` and `scraper export
--format atom` writes, read by feedparser as feed readers read it."""

import asyncio

import pytest

from scraper.db import store
from tests.helpers import KeptMirror, assert_one_sentence_error, definition_ids, invoke, store_item

feedparser = pytest.importorskip("feedparser", reason="the feed's tests read it with feedparser (the test extra)")

IDS = definition_ids()
FIRST, NEW, RENAMED = IDS[:10], IDS[10:16], IDS[2:4]
SITE = "http://site.test"       # tests.helpers.invoke's --site-url: the walks record it as the n8n site


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """A run of FIRST, then a daily walk with the 6 NEW and the 2 RENAMED, fetched by a second run; and one
    catalogue item stored after them."""
    db = tmp_path_factory.mktemp("atom") / "jobs.db"
    mirror = KeptMirror(db)
    mirror.day(FIRST)
    mirror.day(FIRST + NEW, renamed=RENAMED)
    conn = store.open_db(str(db))
    store_item(conn, "events", "/events/jazz-night-42", "https://events.test/events/jazz-night-42",
               {"name": "Jazz night"}, {"page": b"<html></html>"}, "2026-12-01T00:00:00+00:00")
    conn.close()
    return db


def test_a_name_xml_cannot_hold_leaves_the_feed_readable(kept, tmp_path):
    db = tmp_path / "jobs.db"
    db.write_bytes(kept.read_bytes())
    conn = store.open_db(str(db))
    store_item(conn, "events", "/events/bell", "https://events.test/events/bell", {"name": "Bell \x07 & <b>\x1b"},
               {"page": b"<html></html>"}, "2026-12-02T00:00:00+00:00")
    conn.close()
    out = tmp_path / "changes.atom"
    assert invoke("export", "--format", "atom", "--output", str(out), "--source", "events", db=db).exit_code == 0
    assert parsed(out.read_bytes()).entries[0].title == "New events item: Bell \ufffd & <b>\ufffd"


def parsed(body):
    got = feedparser.parse(body)
    assert not got.bozo, got.get("bozo_exception")
    return got


def test_the_walks_new_and_changed_templates_come_first_each_linking_its_page(kept, tmp_path):
    out = tmp_path / "changes.atom"
    result = invoke("export", "--format", "atom", "--output", str(out), "--source", "n8n", db=kept)
    assert result.exit_code == 0, result.output
    assert "18 change(s)" in result.output
    feed = parsed(out.read_bytes())
    assert feed.version == "atom10" and feed.feed.id.startswith("urn:uuid:") and feed.feed.updated
    entries = feed.entries
    assert len(entries) == 18          # 10 + 6 created, 2 updated; the item is another source's
    first = {int(e.summary.split()[1]): e for e in entries[:8]}
    assert set(first) == set(NEW) | set(RENAMED)
    assert {int(e.summary.split()[1]) for e in entries[8:]} == set(FIRST)
    for tid, e in first.items():
        assert e.link == f"{SITE}/workflows/{tid}" and e.id.startswith("urn:uuid:") and e.updated
        assert e.title.startswith("Changed template" if tid in RENAMED else "New template")
    assert first[RENAMED[0]].title.endswith(f"Renamed {RENAMED[0]}")
    updated = [e.updated_parsed for e in entries]
    assert updated == sorted(updated, reverse=True)                        # newest first
    assert len({e.id for e in entries}) == 18


def test_the_server_answers_changes_atom_for_all_or_one_source(kept):
    pytest.importorskip("datasette", reason="Datasette is an optional extra: pip install 'scraper[serve]'")
    from scraper.products import browse

    async def fetch(*urls):
        ds = browse.app(kept)
        await ds.invoke_startup()
        return [((r := await ds.client.get(u)).status_code, r.headers["content-type"], r.content) for u in urls]
    every, events, unknown = asyncio.run(fetch("/changes.atom", "/changes.atom?source=events",
                                               "/changes.atom?source=nope"))
    assert every[:2] == (200, "application/atom+xml; charset=utf-8")
    feed = parsed(every[2])
    assert len(feed.entries) == 19 and feed.entries[0].link == "https://events.test/events/jazz-night-42"
    assert feed.entries[0].tags[0].term == "events" and feed.entries[0].title == "New events item: Jazz night"
    assert any(link.rel == "self" for link in feed.feed.links)
    one = parsed(events[2])
    assert [e.link for e in one.entries] == ["https://events.test/events/jazz-night-42"]
    assert one.feed.id != feed.feed.id
    assert unknown[0] == 404 and b"no source 'nope'" in unknown[2]
    # the same entries, whoever reads them: ids are stored, never drawn per read
    assert [e.id for e in parsed(asyncio.run(fetch("/changes.atom"))[0][2]).entries] == [e.id for e in feed.entries]


@pytest.mark.parametrize("args, words", [
    (["--source", "nope"], ["no source 'nope'"]),
    (["--live-only"], ["--live-only", "atom"]),
])
def test_bad_atom_exports_are_one_sentence_and_write_nothing(kept, tmp_path, args, words):
    out = tmp_path / "changes.atom"
    assert_one_sentence_error(invoke("export", "--format", "atom", "--output", str(out), *args, db=kept), *words)
    assert not out.exists()


def test_an_atom_export_needs_an_output_file(kept):
    assert_one_sentence_error(invoke("export", "--format", "atom", db=kept), "--output")
