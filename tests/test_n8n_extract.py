"""The pure n8n functions, on real answers built from scripts/standin/data."""

import hashlib
import json

import pytest

from scraper.base.errors import ParseError
from scraper.sites import n8n
from scripts.standin.corpus import read_data
from tests.helpers import (
    FIXTURES,
    definition,
    definition_ids,
    detail_answer,
    detail_body,
    search_answer,
    search_items,
)

FETCHED_AT = "2026-01-02T03:04:05Z"
SITE = "https://n8n.io"
API = "https://api.n8n.io/api"
IMAGE = [{"id": 1790, "url": "https://n8niostorageaccount.blob.core.windows.net/n8nio-strapi-blobs-prod/assets/agent.png"}]


def body(answer: dict) -> bytes:
    return json.dumps(answer, ensure_ascii=False).encode("utf-8")


# --- URLs and keys -------------------------------------------------------------------------------

def test_urls_and_key():
    assert n8n.search_url(API, 3) == "https://api.n8n.io/api/templates/search?page=3&rows=100&sort=createdAt:asc"
    assert n8n.search_url(API + "/", 1, rows=20) == "https://api.n8n.io/api/templates/search?page=1&rows=20&sort=createdAt:asc"
    assert n8n.detail_url(API, 6270) == "https://api.n8n.io/api/templates/workflows/6270"
    assert n8n.page_url(SITE, 6270) == "https://n8n.io/workflows/6270"
    assert n8n.job_key(6270) == "n8n:6270"
    assert n8n.SITE == "n8n" and n8n.SEARCH_ROWS == 100


# --- extract: the 6270 template, field by field -------------------------------------------------

def test_extract_6270_every_field():
    item = next(i for i in search_items() if i["id"] == 6270)
    inner = definition(6270)
    row = n8n.extract(detail_body(6270, image=IMAGE), FETCHED_AT)

    assert set(row) == {
        "id", "name", "description", "author", "categories", "node_count", "node_types", "workflow",
        "total_views", "created_at", "images", "videos", "explainer", "quality_score", "fetched_at",
        "content_hash", "hollow",
    }
    assert row["id"] == 6270
    assert row["name"] == "Build Your First AI Agent"
    assert row["description"] == item["description"]
    assert row["author"] == "lucaspeyrin"
    assert json.loads(row["categories"]) == ["AI", "Langchain"]
    assert row["node_count"] == 13
    assert json.loads(row["node_types"]) == [
        "@n8n/n8n-nodes-langchain.agent",
        "@n8n/n8n-nodes-langchain.chatTrigger",
        "@n8n/n8n-nodes-langchain.lmChatGoogleGemini",
        "@n8n/n8n-nodes-langchain.memoryBufferWindow",
        "n8n-nodes-base.httpRequestTool",
        "n8n-nodes-base.rssFeedReadTool",
        "n8n-nodes-base.stickyNote",
    ]
    # Compact, non-ASCII kept, and the served key order (meta, nodes, pinData, connections) kept.
    assert row["workflow"] == json.dumps(inner, ensure_ascii=False, separators=(",", ":"))
    assert row["workflow"].startswith('{"meta":{"instanceId":"e409ea34')
    assert list(json.loads(row["workflow"])) == ["meta", "nodes", "pinData", "connections"]
    assert "“What’s the weather in Paris?”" in row["workflow"]
    assert row["total_views"] == 99862
    assert row["created_at"] == "2025-07-22T12:14:21.343Z"
    assert json.loads(row["images"]) == [IMAGE[0]["url"]]
    # The video is both linked (youtu.be) and embedded (@[youtube]) in one sticky note: one id.
    assert json.loads(row["videos"]) == ["laHIzhsz12E"]
    assert row["explainer"].startswith(item["description"].strip() + "\n\n## [Video Tutorial](https://youtu.be/laHIzhsz12E)\n@[youtube](laHIzhsz12E)")
    assert row["explainer"].count("\n\n## Try It Out!") == 1
    assert row["explainer"].endswith("* Paste into **API Key** and **Save**")
    assert "(Gmail)\n\n1. [In Google AI Studio]" in row["explainer"]  # the notes' leading blank lines dropped
    # 20 workflow + 13 nodes + 15 notes + 10 description + 5 image + 10 video + 5 category + 5 author + 9 views
    assert row["quality_score"] == 92
    assert row["fetched_at"] == FETCHED_AT
    content = {
        "name": "Build Your First AI Agent", "description": item["description"], "workflow": inner,
        "categories": ["AI", "Langchain"], "images": [IMAGE[0]["url"]], "videos": ["laHIzhsz12E"],
    }
    canonical = json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert row["content_hash"] == hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def test_extract_accepts_text_and_bytes():
    answer = detail_answer(6270)
    assert n8n.extract(json.dumps(answer), FETCHED_AT) == n8n.extract(body(answer), FETCHED_AT)


@pytest.mark.parametrize("template_id", definition_ids())
def test_all_20_definitions_extract(template_id):
    row = n8n.extract(detail_body(template_id), FETCHED_AT)
    inner = definition(template_id)
    assert row["id"] == template_id
    assert row["node_count"] == len(inner["nodes"])
    assert json.loads(row["workflow"]) == inner
    assert json.loads(row["node_types"]) == sorted({node["type"] for node in inner["nodes"]})
    assert 0 <= row["quality_score"] <= 100
    assert len(row["content_hash"]) == 64


def test_videos_of_the_real_definitions():
    found = {i: json.loads(n8n.extract(detail_body(i), FETCHED_AT)["videos"]) for i in definition_ids()}
    # 5338 also links the author's channel (youtube.com/@DRFIRASS): not a video.
    assert found[5338] == ["AzOgpdn8ngY"]
    # 5170 names one video three ways (youtu.be/...?si=, @[youtube](), watch?v=).
    assert found[5170] == ["PAmgrwYnzWs"]
    assert found[8237] == ["ROgf5dVqYPQ"]
    assert found[4484] == ["07-HZZQs5h0"]
    # 4846 and 5110 build YouTube URLs from expressions ("youtu.be/{{ ... }}"): no ids there.
    assert found[4846] == [] and found[5110] == []


def test_markdown_images_of_sticky_notes():
    images = json.loads(n8n.extract(detail_body(4600), FETCHED_AT)["images"])
    assert images[:2] == [
        "https://i.ibb.co/PZF4szJr/photo-2025-05-30-13-24-04.jpg#full-width",
        "https://i.ibb.co/2YyTWq2v/circuit.jpg#full-width#full-width",
    ]


def test_fallbacks_without_workflow_info_or_user():
    answer = detail_answer(6270, user=None, categories=[], totalViews=None, createdAt=None)
    del answer["workflow"]["workflowInfo"]
    row = n8n.extract(body(answer), FETCHED_AT)
    assert row["node_count"] == 13  # counted from the inner nodes
    assert "n8n-nodes-base.stickyNote" in json.loads(row["node_types"])
    assert row["author"] is None and row["total_views"] is None and row["created_at"] is None
    assert row["categories"] == "[]"


def test_workflow_info_wins_over_inner_nodes():
    answer = detail_answer(6270)
    answer["workflow"]["workflowInfo"] = {"nodeCount": 7, "nodeTypes": {"b.type": {"count": 1}, "a.type": {"count": 6}}}
    row = n8n.extract(body(answer), FETCHED_AT)
    assert row["node_count"] == 7
    assert json.loads(row["node_types"]) == ["a.type", "b.type"]


# --- extract: broken answers ----------------------------------------------------------------------

def test_truncated_answer_is_a_parse_error():
    real = detail_body(6270)
    with pytest.raises(ParseError, match="not valid JSON"):
        n8n.extract(real[: len(real) // 2], FETCHED_AT)


@pytest.mark.parametrize("answer, reason", [
    ({"id": 6270}, "no 'workflow' object"),
    ({"workflow": None}, "no 'workflow' object"),
    ({"workflow": "6270"}, "no 'workflow' object"),
    ([1, 2], "not a JSON object"),
])
def test_answer_without_workflow_is_a_parse_error(answer, reason):
    with pytest.raises(ParseError, match=reason):
        n8n.extract(body(answer), FETCHED_AT)


def test_missing_id_or_name_is_a_parse_error():
    for field, value in [("id", None), ("id", "6270"), ("id", True), ("name", None)]:
        answer = detail_answer(6270)
        if value is None:
            del answer["workflow"][field]
        else:
            answer["workflow"][field] = value
        with pytest.raises(ParseError, match=f"workflow.{field}"):
            n8n.extract(body(answer), FETCHED_AT)


def test_not_utf8_is_a_parse_error():
    with pytest.raises(ParseError):
        n8n.extract(b'{"workflow": "\xff\xfe"}', FETCHED_AT)


def test_null_inner_workflow_is_stored_as_none():
    answer = detail_answer(6270, workflow=None)
    del answer["workflow"]["workflowInfo"]
    row = n8n.extract(body(answer), FETCHED_AT)
    assert row["workflow"] is None
    assert row["node_count"] == 0 and row["node_types"] == "[]"
    assert row["explainer"] == answer["workflow"]["description"].strip()
    assert row["videos"] == "[]"  # the video was only in a sticky note
    assert n8n.extract(detail_body(6270), FETCHED_AT)["quality_score"] - row["quality_score"] >= 20


# --- content hash ---------------------------------------------------------------------------------

def test_content_hash_ignores_views_and_fetch_time():
    first = n8n.extract(detail_body(6270), FETCHED_AT)
    again = n8n.extract(detail_body(6270, totalViews=123456, views=5, recentViews=77), "2027-01-01T00:00:00Z")
    assert again["total_views"] == 123456
    assert again["content_hash"] == first["content_hash"]


def test_content_hash_changes_with_content():
    first = n8n.extract(detail_body(6270), FETCHED_AT)["content_hash"]
    item = next(i for i in search_items() if i["id"] == 6270)
    changed = n8n.extract(detail_body(6270, description=item["description"] + " Now with Gmail."), FETCHED_AT)
    assert changed["content_hash"] != first
    renamed = n8n.extract(detail_body(6270, name="Build Your Second AI Agent"), FETCHED_AT)
    assert renamed["content_hash"] != first
    inner = definition(6270)
    inner["nodes"][0]["parameters"]["content"] = "## Video gone"
    assert n8n.extract(detail_body(6270, workflow=inner), FETCHED_AT)["content_hash"] != first


def test_content_hash_ignores_key_order():
    answer = detail_answer(6270)
    inner = answer["workflow"]["workflow"]
    answer["workflow"]["workflow"] = dict(reversed(list(inner.items())))
    reordered = n8n.extract(body(answer), FETCHED_AT)
    assert reordered["content_hash"] == n8n.extract(detail_body(6270), FETCHED_AT)["content_hash"]
    assert reordered["workflow"] != n8n.extract(detail_body(6270), FETCHED_AT)["workflow"]  # served order kept


# --- sticky notes and explainer -------------------------------------------------------------------

def test_sticky_notes_in_node_order():
    notes = n8n.sticky_notes(definition(6270))
    assert len(notes) == 7
    assert notes[0] == "## [Video Tutorial](https://youtu.be/laHIzhsz12E)\n@[youtube](laHIzhsz12E)"
    assert notes[1].startswith("## Try It Out!")
    assert notes[-1].startswith("\n\n\n\n\n\n\n\n\n\n\n\n1. [In Google AI Studio]")
    assert n8n.sticky_notes(None) == [] and n8n.sticky_notes({"nodes": None}) == []
    assert n8n.sticky_notes({"nodes": [{"type": n8n.STICKY_NOTE, "parameters": {}}, "junk"]}) == []


def test_explainer_text_skips_blank_parts():
    assert n8n.explainer_text("Intro\n", ["\n\n\nNote one", "   ", "", "Note two"]) == "Intro\n\nNote one\n\nNote two"
    assert n8n.explainer_text(None, ["Only a note"]) == "Only a note"
    assert n8n.explainer_text("", []) == ""


# --- videos ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, ids", [
    ("@[youtube](laHIzhsz12E)", ["laHIzhsz12E"]),
    ("see https://youtu.be/dEtV7OYuMFQ?si=fOAlZWz4aDuFFovH", ["dEtV7OYuMFQ"]),
    ("https://www.youtube.com/watch?v=07-HZZQs5h0", ["07-HZZQs5h0"]),
    ("http://youtube.com/watch?feature=share&v=PAmgrwYnzWs&t=10", ["PAmgrwYnzWs"]),
    ("<a href='https://m.youtube.com/watch?app=desktop&amp;v=KgmNiV7SwkU'>", ["KgmNiV7SwkU"]),
    ("https://music.youtube.com/watch?v=hxQshcD3e1Y", ["hxQshcD3e1Y"]),
    ("<iframe src=\"https://www.youtube.com/embed/ROgf5dVqYPQ?rel=0\">", ["ROgf5dVqYPQ"]),
    ("https://www.youtube-nocookie.com/embed/AzOgpdn8ngY", ["AzOgpdn8ngY"]),
    ("https://youtube.com/shorts/a_b-c_d-e_f", ["a_b-c_d-e_f"]),
    ("[watch](https://youtu.be/KgmNiV7SwkU)", ["KgmNiV7SwkU"]),
])
def test_find_videos_positives(text, ids):
    assert n8n.find_videos(text) == ids


@pytest.mark.parametrize("text", [
    "https://www.youtube.com/@n8n-io",
    "https://youtube.com/@YaronBeen/videos",
    "https://www.youtube.com/channel/UCa1B2c3D4e5F6g7H8i9J0kL",
    "https://www.youtube.com/c/n8nio",
    "https://www.youtube.com/user/n8nio",
    "https://www.youtube.com/playlist?list=PLlET0GsrLUL59YbxstZE71WszP3pVnZfI",
    "https://youtu.be/abcdefghijkl",            # 12 characters: not an id
    "https://youtu.be/abcdefghij",              # 10 characters
    "@[youtube](abcdefghijkl)",
    "https://www.youtube.com/watch?v=abcdefghijkl",
    "https://www.youtube.com/embed/abcdefghijkl",
    "https://youtu.be/{{ $json.video_id }}",
    "https://www.youtube.com/watch?v={{ $json.id }}",
    "https://notyoutube.com/watch?v=dEtV7OYuMFQ",
    "https://notyoutu.be/dEtV7OYuMFQ",
    "https://i.ytimg.com/vi/07-HZZQs5h0/sddefault.jpg",
    "youtube_url and youtube_id fields",
])
def test_find_videos_negatives(text):
    assert n8n.find_videos(text) == []


def test_find_videos_unique_in_order_across_texts():
    assert n8n.find_videos(
        "https://youtu.be/ROgf5dVqYPQ and @[youtube](laHIzhsz12E)",
        "again https://www.youtube.com/watch?v=ROgf5dVqYPQ",
        "",
        "https://youtube.com/shorts/07-HZZQs5h0",
    ) == ["ROgf5dVqYPQ", "laHIzhsz12E", "07-HZZQs5h0"]


# --- images ---------------------------------------------------------------------------------------

def test_find_images_from_list_markdown_and_img():
    markdown = (
        "Intro ![Book Screenshot](https://i.ibb.co/rfxsJ4MV/circadian-special-agents-manual.png \"The book\")\n"
        "<img alt=\"flow\" src='https://i.ibb.co/prLbFG0w/circadian-the-flow-and-notion.png' width=300>\n"
        "![again](" + IMAGE[0]["url"] + ")\n"
        "![from storage](fileId:1790) ![unknown file](fileId:42)"
    )
    note = "<IMG SRC=\"https://fonts.gstatic.com/s/e/notoemoji/16.0/1f4a1/32.png?a=1&amp;b=2\"> ![](https://i.ibb.co/2YyTWq2v/circuit.jpg#full-width)"
    assert n8n.find_images(IMAGE, markdown, note) == [
        IMAGE[0]["url"],
        "https://i.ibb.co/rfxsJ4MV/circadian-special-agents-manual.png",
        "https://i.ibb.co/prLbFG0w/circadian-the-flow-and-notion.png",
        "https://fonts.gstatic.com/s/e/notoemoji/16.0/1f4a1/32.png?a=1&b=2",
        "https://i.ibb.co/2YyTWq2v/circuit.jpg#full-width",
    ]


def test_find_images_skips_unfetchable():
    text = '<img src="{{ $json.data.medium.url }}"> ![x](data:image/png;base64,AAAA) ![y](./local.png)'
    assert n8n.find_images(None, text) == []
    assert n8n.find_images([{"id": 1}, {"id": 2, "url": ""}, "junk"]) == []


# --- search pages ---------------------------------------------------------------------------------

def test_parse_search_page_real():
    ids, total = n8n.parse_search_page(body(search_answer(total=6022)))
    assert len(ids) == 100 and len(set(ids)) == 100
    assert ids[:5] == [6270, 5819, 10000, 7639, 5035]
    assert total == 6022
    assert n8n.parse_search_page(search_answer(total=7)) == (ids, 7)
    assert n8n.parse_search_page(json.dumps(search_answer()))[0] == ids


@pytest.mark.parametrize("payload", [
    b"<html>Just a moment...</html>",
    body(search_answer())[:5000],
    b"[]",
    b'{"workflows": []}',
    b'{"totalWorkflows": "6022", "workflows": []}',
    b'{"totalWorkflows": 6022}',
    b'{"totalWorkflows": 6022, "workflows": [{"id": "6270"}]}',
    b'{"totalWorkflows": 6022, "workflows": [{"name": "no id"}]}',
    b'{"totalWorkflows": 6022, "workflows": [6270]}',
])
def test_parse_search_page_garbage(payload):
    with pytest.raises(ParseError):
        n8n.parse_search_page(payload)


@pytest.mark.parametrize("page, rows, got, total, done", [
    (1, 100, 100, 6022, False),
    (60, 100, 100, 6022, False),
    (61, 100, 22, 6022, True),     # short page
    (61, 100, 100, 6100, True),    # reached the total exactly
    (2, 100, 100, 150, True),      # total shrank between calls
    (1, 100, 0, 0, True),
])
def test_search_done(page, rows, got, total, done):
    assert n8n.search_done(page, rows, got, total) is done


# --- seed lines -----------------------------------------------------------------------------------

@pytest.mark.parametrize("line, template_id", [
    ("1205", 1205),
    ("  1205  \n", 1205),
    ("+7", 7),
    ("https://n8n.io/workflows/1205-some-slug/", 1205),
    ("https://n8n.io/workflows/1205-some-slug", 1205),
    ("https://n8n.io/workflows/1205", 1205),
    ("https://n8n.io/workflows/1205/", 1205),
    ("http://www.n8n.io/workflows/1205-x/?utm_source=foo#top", 1205),
    ("HTTPS://WWW.N8N.IO/workflows/6270-build-your-first-ai-agent/", 6270),
])
def test_parse_id_line_ok(line, template_id):
    assert n8n.parse_id_line(line, SITE) == template_id


@pytest.mark.parametrize("line", ["", "   ", "\n", "# ids from the sitemap", "  #6270"])
def test_parse_id_line_skips(line):
    assert n8n.parse_id_line(line, SITE) is None


@pytest.mark.parametrize("line, reason", [
    ("https://example.com/workflows/1205", "names another host (example.com), expected n8n.io"),
    ("https://api.n8n.io/api/templates/workflows/1205", "names another host (api.n8n.io), expected n8n.io"),
    ("https://n8n.io/integrations/slack/", "not a workflow URL"),
    ("https://n8n.io/workflows/", "not a workflow URL"),
    ("https://n8n.io/workflows/abc-slug", "not a workflow URL"),
    ("https://n8n.io/workflows/12/extra", "not a workflow URL"),
    ("ftp://n8n.io/workflows/12", "neither a template id nor a workflow URL"),
    ("n8n workflow 1205", "neither a template id nor a workflow URL"),
    ("12.5", "neither a template id nor a workflow URL"),
    ("http://[::1/workflows/3", "neither a template id nor a workflow URL"),
    ("-3", "not a positive integer"),
    ("0", "not a positive integer"),
    ("https://n8n.io/workflows/0-zero", "not a positive integer"),
])
def test_parse_id_line_errors(line, reason):
    with pytest.raises(ParseError, match=reason.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        n8n.parse_id_line(line, SITE)


def test_parse_id_line_local_stand_in():
    local = "http://127.0.0.1:8765/n8n/"
    assert n8n.parse_id_line("http://127.0.0.1:8765/n8n/workflows/44-x", local) == 44
    with pytest.raises(ParseError, match="not a workflow URL"):
        n8n.parse_id_line("http://127.0.0.1:8765/workflows/44-x", local)
    with pytest.raises(ParseError, match=r"another host \(n8n\.io\), expected 127\.0\.0\.1"):
        n8n.parse_id_line("https://n8n.io/workflows/44", local)


def test_parse_id_lines_numbers_and_dedup():
    lines = [
        "# my favourites\n",
        "6270\n",
        "\n",
        "https://n8n.io/workflows/5170-learn-json-basics/\n",
        "https://example.com/workflows/1\n",
        "6270\n",
        "  junk  \n",
        "https://www.n8n.io/workflows/6270\n",
        "-4\n",
        "8237",
    ]
    ids, errors = n8n.parse_id_lines(lines, SITE)
    assert ids == [6270, 5170, 8237]
    assert [(number, line) for number, line, _ in errors] == [
        (5, "https://example.com/workflows/1"), (7, "junk"), (9, "-4"),
    ]
    assert errors[0][2] == "names another host (example.com), expected n8n.io"
    assert errors[1][2] == "is neither a template id nor a workflow URL"


def test_parse_id_lines_whole_sitemap():
    rows = [json.loads(line) for line in read_data(FIXTURES, "workflow_urls_6022.jsonl").splitlines()]
    ids, errors = n8n.parse_id_lines([row["url"] for row in rows], SITE)
    assert errors == []
    # The real sitemap dump has one row with an empty URL (7639): a blank line, skipped.
    assert [row["id"] for row in rows if not row["url"]] == [7639]
    assert ids == [row["id"] for row in rows if row["url"]]
    assert len(ids) == 6021


# --- the public page ------------------------------------------------------------------------------

PAGE = """<!DOCTYPE html><html lang="en"><head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>
  Build Your First AI Agent | n8n workflow template
</title>
<meta content="This template launches your very first AI Agent &mdash;an AI-powered chatbot" name="description">
<meta property="og:title" content='Build Your First AI Agent | n8n workflow template'>
<meta content="https://n8n.io/og/6270.png" property="og:image">
<meta property=og:type content=website>
<meta name="twitter:card" content="summary_large_image">
<meta name="twitter:title" content="Build Your First AI Agent &amp; more">
<meta name="robots" content="index, follow">
</head><body><svg><title>n8n logo</title></svg><h1>Build Your First AI Agent</h1>
<n8n-demo workflow="..."></n8n-demo></body></html>"""


def test_extract_page():
    page = n8n.extract_page(PAGE)
    assert page["page_title"] == "Build Your First AI Agent | n8n workflow template"
    assert page["page_description"] == "This template launches your very first AI Agent —an AI-powered chatbot"
    assert json.loads(page["page_og"]) == {
        "og:title": "Build Your First AI Agent | n8n workflow template",
        "og:image": "https://n8n.io/og/6270.png",
        "og:type": "website",
        "twitter:card": "summary_large_image",
        "twitter:title": "Build Your First AI Agent & more",
    }


def test_extract_page_missing_values():
    assert n8n.extract_page("<html><body><svg><title>icon</title></svg>hi</body></html>") == {
        "page_title": None, "page_description": None, "page_og": "{}",
    }
    assert n8n.extract_page("")["page_og"] == "{}"
    assert n8n.extract_page("<title>Cut &amp; off")["page_title"] == "Cut & off"


# --- quality score --------------------------------------------------------------------------------

def test_quality_score_bounds():
    assert n8n.quality_score({}) == 0
    empty = {"workflow": None, "node_count": 0, "explainer": "", "description": None, "images": "[]",
             "videos": "[]", "categories": "[]", "author": None, "total_views": None}
    assert n8n.quality_score(empty) == 0
    huge = {
        "workflow": json.dumps({"nodes": [{"type": "x"}] * 500}), "node_count": 500,
        "description": "d" * 100_000, "explainer": "d" * 100_000 + "n" * 100_000,
        "images": json.dumps([f"https://i/{i}.png" for i in range(50)]),
        "videos": json.dumps(["laHIzhsz12E"] * 9), "categories": '["AI"]', "author": "a",
        "total_views": 10**12,
    }
    assert n8n.quality_score(huge) == 100
    assert n8n.quality_score({**huge, "node_count": -5, "total_views": -1}) == 75  # no node or view points


def test_quality_score_needs_nodes_for_workflow_points():
    assert n8n.quality_score({"workflow": '{"nodes":[{"type":"n8n-nodes-base.set"}]}'}) == 20
    for unusable in ('{"nodes":[]}', "{}", '{"nodes":', "null", None):
        assert n8n.quality_score({"workflow": unusable}) == 0


def test_quality_score_accepts_lists_or_json_text():
    row = n8n.extract(detail_body(6270), FETCHED_AT)
    as_lists = {**row, **{k: json.loads(row[k]) for k in ("images", "videos", "categories")}}
    assert n8n.quality_score(as_lists) == row["quality_score"]


def test_quality_score_views_log_scale():
    scores = [n8n.quality_score({"total_views": v}) for v in (0, 1, 10, 99, 100, 10_000, 100_000, 10**9)]
    assert scores == [0, 0, 2, 3, 4, 8, 10, 10]


def test_quality_score_more_media_and_notes_never_lower():
    answer = detail_answer(4722)  # no sticky notes, no video, no image
    base = n8n.extract(body(answer), FETCHED_AT)
    inner = answer["workflow"]["workflow"]
    note = {"id": "n1", "name": "Sticky", "type": n8n.STICKY_NOTE, "typeVersion": 1, "position": [0, 0],
            "parameters": {"content": "## How to set up\n" + "Connect Gmail and OpenAI, then run it. " * 20}}

    def scored(extra, **kwargs):
        return n8n.extract(body(detail_answer(4722, workflow={**inner, "nodes": inner["nodes"] + [extra]}, **kwargs)),
                           FETCHED_AT)["quality_score"]

    video_note = {**note, "parameters": {"content": note["parameters"]["content"] + "\n@[youtube](laHIzhsz12E)"}}
    scores = [base["quality_score"], scored(note), scored(video_note), scored(video_note, image=IMAGE)]
    assert scores == sorted(scores) and scores[0] < scores[-1]
    with_note, with_video, with_image = scores[1:]
    assert with_video - with_note >= 10
    assert with_image - with_video == 5
    # The same holds on any real row: more of anything never lowers it.
    for template_id in definition_ids():
        row = n8n.extract(detail_body(template_id), FETCHED_AT)
        more = {
            **row,
            "images": json.dumps(json.loads(row["images"]) + ["https://i.ibb.co/x.png"]),
            "videos": json.dumps(json.loads(row["videos"]) + ["laHIzhsz12E"]),
            "explainer": row["explainer"] + "\n\n" + "note " * 100,
        }
        assert n8n.quality_score(more) >= row["quality_score"]
