"""`search` answers alike on both backends (SQLite's FTS5, PostgreSQL's tsvector): catalogue items with
`--source` (name, description, every text of the record), and templates by a word only the transcript of
one of their videos holds, kept in step when the transcript or the link changes."""

import json

import pytest

from scraper.db import store
from scraper.sites import n8n
from tests.helpers import assert_one_sentence_error, definition_ids, detail_body, invoke, store_item

SITE = "http://cal.test"


def search(db, *args):
    result = invoke("search", "--json", "--limit", "50", *args, db=db)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def keys(db, *args):
    return [r["key"] for r in search(db, *args, "--source", "events")]


@pytest.fixture
def catalogue(backend):
    conn = store.open_db(backend)
    with store.transaction(conn) as c:
        for path, record in (
                ("/events/a-1", {"name": "Jazz Night", "description": "Saxophones under the stars",
                                 "location": {"name": "Harbour Hall"}}),
                ("/events/b-2", {"name": "Book Reading", "description": "A quiet evening of jazz poetry",
                                 "organizer": "Lesekreis"}),
                ("/events/c-3", {"name": "Chess Club", "tags": ["strategy", "boards"]}),
                ("/events/d-4", {"name": "Odd gathering", "note": "nul\u0000inside"})):   # jsonb refuses a NUL
            store_item(c, "events", path, SITE + path, record, {"page": b"<html></html>"},
                        "2026-11-01T00:00:00+00:00")
        store_item(c, "other", "/x", SITE + "/x", {"name": "Jazz elsewhere"}, {"page": b"<p>"},
                    "2026-11-01T00:00:00+00:00")
    conn.close()
    return backend


def test_items_search_speaks_the_documented_syntax(catalogue):
    found = search(catalogue, "jazz", "--source", "events")
    assert [r["key"] for r in found] == ["events:/events/a-1", "events:/events/b-2"]     # the name weighs most
    assert all(set(r) == {"key", "source", "url", "name", "snippet", "rank"} for r in found)
    assert found[0]["name"] == "Jazz Night" and "«Jazz»" in found[0]["snippet"]
    assert found[0]["url"] == SITE + "/events/a-1" and found[0]["rank"] <= found[1]["rank"]  # lower is better
    assert keys(catalogue, "harbour") == ["events:/events/a-1"]           # a text deep in the record
    assert keys(catalogue, "boards") == ["events:/events/c-3"]            # a string of a list
    assert keys(catalogue, '"jazz night"') == ["events:/events/a-1"]
    assert keys(catalogue, "saxo*") == ["events:/events/a-1"]
    assert keys(catalogue, "jazz NOT poetry") == ["events:/events/a-1"]
    assert sorted(keys(catalogue, "chess OR lesekreis")) == ["events:/events/b-2", "events:/events/c-3"]
    assert keys(catalogue, "name:jazz") == ["events:/events/a-1"]
    assert keys(catalogue, "description:jazz") == ["events:/events/b-2"]
    assert keys(catalogue, "text:harbour") == ["events:/events/a-1"]
    assert keys(catalogue, "nothinglikethis") == []
    assert keys(catalogue, "gathering") == ["events:/events/d-4"]


@pytest.mark.parametrize("bad", ['"unclosed', "nosuchcolumn:word", "   "])
def test_an_items_query_it_cannot_run_is_one_sentence(catalogue, bad):
    assert_one_sentence_error(invoke("search", bad, "--source", "events", db=catalogue), "query")


@pytest.mark.parametrize("bad, said", [
    ("jazz -poetry", "write 'jazz NOT poetry'"),
    ('"unclosed', "a double quote is not closed"),
    ("nosuchcolumn:word", "'nosuchcolumn' is not a field"),
])
def test_a_query_is_refused_in_a_plain_sentence_on_each_backend(catalogue, bad, said):
    """What a new user met: `search 'telegram -openai'` answered in FTS5's grammar (`no such column:
    openai`) on SQLite, and on PostgreSQL dropped the minus and searched for both words."""
    for args in ([], ["--source", "events"]):
        sentence = assert_one_sentence_error(invoke("search", bad, *args, db=catalogue), said)
        assert "FTS5" not in sentence and "column: " not in sentence and "syntax error" not in sentence
    if not said.startswith("write"):
        return
    assert keys(catalogue, said.split("'")[1]) == ["events:/events/a-1"]       # the query it proposes works


def _link(c, template_id, video_id, text=None):
    c.execute("INSERT INTO template_videos (template_id, video_id) VALUES (?, ?)", (template_id, video_id))
    if text is not None:
        store.upsert(c, "transcripts", {"video_id": video_id, "language_code": "en", "is_generated": 0,
                                        "text": text, "segments": "[]", "fetched_at": "2026-01-01"}, "video_id")


def ids(db, query):
    return [r["id"] for r in search(db, query)]


def test_a_template_is_found_by_a_word_only_its_transcript_holds(backend):
    first, second = definition_ids()[:2]
    conn = store.open_db(backend)
    with store.transaction(conn) as c:
        for tid in (first, second):
            store.upsert(c, "workflows", n8n.extract(detail_body(tid), "2026-01-02T03:04:05+00:00"), "id")
        _link(c, first, "vid-1", "today we wire a zanzibarian webhook")
        _link(c, second, "vid-2")                        # the transcript comes later, as a job of its own
    assert ids(backend, "zanzibarian") == [first]
    assert ids(backend, "transcripts:zanzibarian") == [first]
    with store.transaction(conn) as c:
        store.upsert(c, "transcripts", {"video_id": "vid-2", "language_code": "en", "is_generated": 1,
                                        "text": "a quokkaesque demo", "segments": "[]", "fetched_at": "x"},
                     "video_id")
        c.execute("UPDATE transcripts SET text = 'a plain webhook' WHERE video_id = 'vid-1'")
    assert ids(backend, "quokkaesque") == [second] and ids(backend, "zanzibarian") == []
    with store.transaction(conn) as c:
        c.execute("DELETE FROM template_videos WHERE template_id = ?", (second,))
    assert ids(backend, "quokkaesque") == []
    from scraper.products import search as search_module
    assert search_module.rebuild(conn) == 2
    assert ids(backend, "webhook") and ids(backend, "quokkaesque") == []
    conn.close()
