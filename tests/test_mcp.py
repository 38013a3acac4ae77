"""`scraper mcp` (issue 30): the six tools through the SDK's in-memory client, and one real stdio round trip
by a client that speaks plain JSON-RPC (no SDK), as a desktop agent's would."""

import asyncio
import importlib.util
import json

import pytest

from scraper.base.errors import OperationalError
from scraper.db import store
from scraper.products import lookup, mcpserver
from tests.helpers import (
    MCP_TOOLS,
    RARE_WORDS,
    SECRETS,
    SUMMARY_BUDGET,
    definition_ids,
    rare_word,
    round_trip,
    rows,
    served_mirror,
)

# found, not imported: the SDK takes 1.6 s of CPU to import, paid then by every test process that collects
# this file rather than by the one that runs its tests
if importlib.util.find_spec("mcp") is None:
    pytest.skip("the MCP SDK is an optional extra: pip install 'scraper[mcp]'", allow_module_level=True)



@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """(db, planted ids, live ids): 19 live fixture templates, two with credentials, and 110 clones."""
    db = tmp_path_factory.mktemp("mcp") / "jobs.db"
    planted, live = served_mirror(db, copies=110)
    return db, planted, live


def call(db, *calls, time_limit_s=mcpserver.QUERY_LIMIT_S):
    """[(is_error, structured content or the error text, the whole result's JSON)] of each (tool, arguments),
    through the SDK's in-memory client."""
    import mcp

    async def run():
        server = mcpserver.build(str(db), "https://n8n.io", time_limit_s)
        out = []
        async with mcp.Client(server) as client:
            if calls and calls[0] == "list":
                return [t.name for t in (await client.list_tools()).tools]
            for name, args in calls:
                r = await client.call_tool(name, args)
                out.append((r.is_error, r.content[0].text if r.is_error else r.structured_content,
                            r.model_dump_json(by_alias=True, exclude_none=True)))
        return out
    return asyncio.run(run())


def test_the_six_tools_are_listed(mirror):
    db, _, _ = mirror
    assert set(call(db, "list")) == MCP_TOOLS


def test_search_finds_a_rare_word_with_its_total_and_filters_by_node_category_and_fields(mirror):
    db, planted, live = mirror
    word = rare_word(db, planted[0])
    [(err, found, _)] = call(db, ("search_templates", {"query": word}))
    assert not err and found["total"] == 1 and [t["id"] for t in found["templates"]] == [planted[0]]
    assert set(found["templates"][0]) == set(lookup.SUMMARY)
    assert found["templates"][0]["url"] == f"https://n8n.io/workflows/{planted[0]}"
    types = json.loads(rows(db, "SELECT node_types FROM workflows WHERE id = ?", planted[0])[0]["node_types"])
    full, short = types[0], types[0].rsplit(".", 1)[-1].upper()
    category = json.loads(rows(db, "SELECT categories FROM workflows WHERE id = ?", planted[0])[0]["categories"])[0]
    (_, by_full, _), (_, by_short, _), (_, by_category, _), (_, picked, _), (_, page2, _) = call(
        db, ("search_templates", {"nodes": [full], "limit": 100}),
        ("search_templates", {"nodes": [short], "limit": 100}),
        ("search_templates", {"category": category, "limit": 100}),
        ("search_templates", {"query": word, "fields": ["id", "name"]}),
        ("search_templates", {"limit": 5, "offset": 5}))
    expected = {r["id"] for r in rows(db, "SELECT w.id FROM workflows w, json_each(w.node_types) j "
                                          "WHERE j.value = ? AND w.removed_at IS NULL", full)}
    assert {t["id"] for t in by_full["templates"]} == expected == {t["id"] for t in by_short["templates"]}
    assert by_full["total"] == len(expected)
    assert planted[0] in {t["id"] for t in by_category["templates"]}
    assert all(category in json.loads(rows(db, "SELECT categories FROM workflows WHERE id = ?", t["id"])[0]
                                      ["categories"]) for t in by_category["templates"])
    assert picked["templates"] == [{"id": planted[0], "name": found["templates"][0]["name"]}]
    # without words: the most viewed first, and offset pages on
    [(_, first, _)] = call(db, ("search_templates", {"limit": 10}))
    assert page2["templates"] == first["templates"][5:10] and first["total"] == len(live)
    views = [t["views"] for t in first["templates"]]
    assert views == sorted(views, reverse=True)


def test_a_limit_of_a_thousand_gives_at_most_a_hundred_and_twenty_summaries_fit_in_40_kb(mirror):
    db, _, live = mirror
    (_, many, _), (_, twenty, whole) = call(db, ("search_templates", {"limit": 1000}),
                                            ("search_templates", {"limit": 20}))
    assert len(live) > 100 and many["total"] == len(live) and len(many["templates"]) == lookup.MAX_LIMIT
    assert len(twenty["templates"]) == 20 and len(whole.encode()) <= SUMMARY_BUDGET, len(whole.encode())


def test_get_template_in_three_sizes_with_the_workflow_redacted_and_its_attribution(mirror):
    db, planted, _ = mirror
    (e1, summary, _), (e2, nodes, _), (e3, full, _) = call(
        db, *[("get_template", {"id": planted[0], "mode": m}) for m in ("summary", "nodes", "full")])
    assert not (e1 or e2 or e3)
    assert "workflow" not in summary and "workflow_nodes" not in summary
    assert "[REDACTED]" in summary["description"] and SECRETS["github"] not in summary["description"]
    assert {"name": "Planted HTTP", "type": "n8n-nodes-base.httpRequest"} in nodes["workflow_nodes"]
    wf = full["workflow"]
    assert wf["nodes"] and wf["connections"] and wf["meta"]["templateId"] == str(planted[0])
    assert full["attribution"]["url"] == f"https://n8n.io/workflows/{planted[0]}" == full["url"]
    assert full["attribution"]["author"] == full["author"] and full["author"] in full["attribution"]["text"]
    planted_node = next(n for n in wf["nodes"] if n["name"] == "Planted HTTP")
    assert planted_node["parameters"]["apiKey"] == "[REDACTED]"


def test_an_unknown_id_or_a_mistake_is_a_tool_error_that_says_what_to_try(mirror):
    db, _, _ = mirror
    answers = call(db, ("get_template", {"id": 424242}), ("get_template", {"id": 1, "mode": "everything"}),
                   ("search_templates", {"query": '"unterminated'}), ("search_templates", {"fields": ["price"]}),
                   ("search_templates", {"limit": 0}), ("recent_changes", {"since": "last tuesday"}),
                   ("recent_changes", {"kinds": ["edited"]}), ("search_items", {"source": "nowhere"}),
                   ("get_item", {"source": "events", "key": "/events/none"}))
    assert all(err for err, _, _ in answers), answers
    texts = [text for _, text, _ in answers]
    assert "424242" in texts[0] and "search_templates" in texts[0]
    for text, words in zip(texts[1:], [("everything", "full"), ("double quotes",), ("price", "views"), ("limit",),
                                        ("last tuesday", "ISO 8601"), ("edited", "restored"), ("nowhere", "events"),
                                        ("/events/none", "search_items")], strict=True):
        assert all(w in text for w in words), text


def test_stats_changes_and_catalogue_items(mirror):
    db, planted, live = mirror
    (_, stats, _), (_, changes, _), (_, removed, _), (_, newest, _), (_, found, _), (_, listed, _), (_, item, _) = call(
        db, ("template_stats", {}), ("recent_changes", {"since": "2026-11-01"}),
        ("recent_changes", {"kinds": ["removed"]}), ("recent_changes", {"limit": 2}),
        ("search_items", {"source": "events", "query": "saxophones"}), ("search_items", {"source": "events"}),
        ("get_item", {"source": "events", "key": "events:/events/jazz-night-42"}))
    assert stats["templates"] == {"live": len(live), "removed": 1, "paid": stats["templates"]["paid"]}
    assert stats["node_types"][0]["templates"] >= stats["node_types"][-1]["templates"] and stats["categories"]
    added = [c for c in changes["changes"] if c["change"] == "added"]
    assert len([c for c in added if "id" in c]) == 20 and [c["key"] for c in added if "id" not in c] == [
        "events:/events/jazz-night-42"]
    assert [c["change"] for c in removed["changes"]] == ["removed"] and removed["changes"][0]["name"]
    assert len(newest["changes"]) == 2
    assert [i["key"] for i in found["items"]] == ["events:/events/jazz-night-42"] == [i["key"] for i in listed["items"]]
    assert item["record"]["name"] == "Jazz night" and item["version"] == 1


def test_no_tool_shows_a_planted_credential(mirror):
    db, planted, live = mirror
    texts = [whole for _, _, whole in call(
        db, *[("get_template", {"id": i, "mode": m}) for i in planted for m in lookup.MODES],
        ("search_templates", {"limit": 100}), ("search_templates", {"query": rare_word(db, planted[1])}),
        ("template_stats", {}), ("recent_changes", {}))]
    raw = rows(db, "SELECT workflow FROM workflows WHERE id = ?", planted[0])[0]["workflow"]
    assert SECRETS["openai"] in raw          # the database keeps the answers as served
    leaked = [(name, t[:80]) for t in texts for name, secret in SECRETS.items() if secret in t]
    assert not leaked


def test_a_question_past_its_time_limit_is_stopped_with_a_sentence(mirror, tmp_path):
    db, _, _ = mirror
    conn = store.read_only(str(db), 0)
    with pytest.raises(OperationalError, match="interrupted"):
        conn.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n")
    with pytest.raises(OperationalError, match="readonly"):
        conn.execute("DELETE FROM workflows")
    conn.close()
    [(err, text, _)] = call(db, ("template_stats", {}), time_limit_s=0)
    assert err and "took over 0 s" in text


# --- a real stdio round trip, plain JSON-RPC --------------------------------------------------------


@pytest.mark.slow
def test_a_plain_json_rpc_client_over_stdio_finds_fetches_and_never_sees_a_credential(mirror):
    db, planted, _ = mirror
    for rare_id in planted:
        lines = round_trip(db, rare_id)
        leaked = [name for name, secret in SECRETS.items() for line in lines if secret in line]
        assert not leaked


def test_the_tools_answer_alike_on_sqlite_and_postgresql(backend):
    """The contract: the same questions, the same answers, on each backend (PostgreSQL: `workflows_tsv`)."""
    planted, live = served_mirror(backend)
    (e1, found, _), (e2, full, _), (e3, by_node, _), (e4, stats, _), (e5, changes, _), (e6, items, _) = call(
        backend, ("search_templates", {"query": RARE_WORDS[1]}), ("get_template", {"id": planted[1], "mode": "full"}),
        ("search_templates", {"nodes": ["HTTPREQUEST"], "limit": 100}), ("template_stats", {}),
        ("recent_changes", {"kinds": ["removed"]}), ("search_items", {"source": "events", "query": "jazz"}))
    assert not any((e1, e2, e3, e4, e5, e6))
    assert found["total"] == 1 and found["templates"][0]["id"] == planted[1]
    assert full["workflow"]["connections"] and full["url"] == f"https://n8n.io/workflows/{planted[1]}"
    assert set(planted) <= {t["id"] for t in by_node["templates"]}     # the planted node: an httpRequest
    assert all(any(n.endswith(".httpRequest") for n in t["nodes"]) for t in by_node["templates"])
    assert stats["templates"]["live"] == len(live) and stats["templates"]["removed"] == 1
    assert [c["change"] for c in changes["changes"]] == ["removed"]
    assert [i["key"] for i in items["items"]] == ["events:/events/jazz-night-42"]
    (err, text, _), = call(backend, ("get_template", {"id": 31337}))
    assert err and "31337" in text
    conn = store.read_only(backend, 0)        # cut off, on each backend
    slow = ("SELECT pg_sleep(5)" if backend.startswith("postgres") else
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n")
    try:
        with pytest.raises(OperationalError, match="interrupted|statement timeout"):
            conn.execute(slow).fetchone()
    finally:
        conn.close()
    # read-only, on a connection with time to say so: with no time at all (PostgreSQL's 1 ms on a busy
    # machine) the write could be cut off before it is refused
    conn = store.read_only(backend, 30)
    try:
        with pytest.raises(OperationalError, match="readonly|read-only"):
            conn.execute("DELETE FROM changes")
    finally:
        conn.close()


def test_paid_templates_are_marked_counted_and_left_out_on_request(mirror):
    db, _, live = mirror
    ids = definition_ids()
    pages = [("search_templates", {"limit": 100, "offset": o, "include_paid": i, "fields": ["id", "paid"]})
             for i in (True, False) for o in (0, 100)]
    (_, every, _), (_, rest, _), (_, free, _), (_, free_rest, _), (_, stats, _), (_, full, _) = call(
        db, *pages, ("template_stats", {}), ("get_template", {"id": ids[2], "mode": "full"}))
    paid = {t["id"]: t["paid"] for t in every["templates"] + rest["templates"]}
    assert len(paid) == every["total"] == len(live)
    assert paid[ids[2]] is True and paid[ids[3]] is None and paid[ids[4]] is False
    free_ids = {t["id"] for t in free["templates"] + free_rest["templates"]}
    assert free_ids == set(paid) - {ids[2]} and free["total"] == len(live) - 1     # unknown counts as free
    assert stats["templates"]["paid"] == 1
    assert full["paid"] is True and full["price"] == 19.0 and full["purchase_url"] == "https://shop.test/template"
