"""Issue 32: the readers speak of the sources that exist. On a database that mirrors only an events
calendar (a real seed and run against the catalogue stand-in), `search WORD` finds the events without
--source, each row naming its source; `status` mentions neither n8n.io nor youtube.com nor templates;
`stats` and the report describe the calendar. A database with templates and items searches both."""

import json
import os
import re
import sys

import pytest
from click.testing import CliRunner

from scraper.cli import main
from scripts.standin import client
from tests import warm
from tests.helpers import served_mirror, store_item, write

SOURCES = """
[[source]]
name = "events"
kind = "catalogue"
rate = 50.0
burst = 5
site = "{url}/"
include = ["^/events/"]
type = "Event"
required = ["name", "startDate"]
"""


@pytest.fixture(scope="module")
def calendar_db(tmp_path_factory):
    """(db path, sources path) of a catalogue-only mirror made by `scraper seed` and `scraper run`."""
    folder = tmp_path_factory.mktemp("calendar")
    with client.start(catalogue=True, events=30, seed=3) as site:
        sources = write(folder, SOURCES.format(url=site.url))
        env = {**os.environ, "SCRAPER_DB": str(folder / "jobs.db"), "SCRAPER_SOURCES": sources,
               "SCRAPER_TRANSCRIPTS": "0"}
        for args in (["seed"], ["run", "--workers", "2"]):
            done = warm.run([sys.executable, "-m", "scraper", *args], env=env, capture_output=True, text=True,
                            timeout=300)
            assert done.returncode == 0, done.stderr[-2000:]
        static = [e for e in site.truth()["events"] if not e["script_rendered"]]
    return str(folder / "jobs.db"), sources, static


def jazz(events):
    return [e for e in events if "jazz" in e["name"].lower()]


def cli(db, sources, *args):
    result = CliRunner().invoke(main, ["--db", db, "--sources", sources, *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_search_without_source_finds_the_items_and_names_their_source(calendar_db):
    db, sources, events = calendar_db
    wanted = jazz(events)
    assert wanted, "the seed gives static jazz events"
    text = cli(db, sources, "search", "jazz", "--limit", "50")
    assert "no template" not in text and "item(s) of events match 'jazz'" in text
    for event in wanted:
        assert event["name"] in text
    found = json.loads(cli(db, sources, "search", "jazz", "--json", "--limit", "50"))
    only = json.loads(cli(db, sources, "search", "jazz", "--source", "events", "--json", "--limit", "50"))
    assert {r["source"] for r in found} == {"events"} and found == only
    assert "nothing matches 'zzqx' in the items of events." in cli(db, sources, "search", "zzqx")


def test_status_on_a_catalogue_only_database_mentions_neither_n8n_nor_youtube(calendar_db):
    db, sources, events = calendar_db
    text = cli(db, sources, "status")
    assert not re.search(r"n8n\.io|youtube\.com|template|listing", text), text
    assert f"stored    {len(events)} item(s) of events: {len(events)} live, 0 removed" in text
    assert "domain    127.0.0.2" in text
    report = json.loads(cli(db, sources, "status", "--json"))
    assert report["n8n"] is False and set(report["domains"]) == {"127.0.0.2"}
    # without the sources file the data alone decides
    plain = CliRunner().invoke(main, ["--db", db, "status"])
    assert plain.exit_code == 0 and "n8n.io" not in plain.output and "youtube" not in plain.output


def test_stats_and_the_report_describe_the_calendar(calendar_db, tmp_path):
    db, sources, events = calendar_db
    n = len(events)
    text = cli(db, sources, "stats")
    assert text.startswith(f"source events: {n} live item(s), 0 removed") and "templates" not in text
    assert re.search(rf"startDate\s+{n}\n", text)
    data = json.loads(cli(db, sources, "stats", "--json"))
    assert data["sources"]["events"]["live"] == n
    out = tmp_path / "report.html"
    CliRunner().invoke(main, ["--db", db, "--sources", sources, "report", "--output", str(out)])
    page = out.read_text()
    payload = json.loads(re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1))
    assert payload["n8n"] is False and payload["items"] == {"events": {"live": n, "removed": 0}}
    assert payload["run"]["domain"] == "127.0.0.2" and payload["run"]["rate_per_s"] == 50.0
    assert "n8n.io" not in page


def test_search_on_a_mirror_of_both_gives_templates_and_items(tmp_path):
    db = str(tmp_path / "both.db")
    served_mirror(db)
    result = CliRunner().invoke(main, ["--db", db, "search", "river OR saxophones OR slack", "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert {r["source"] for r in found} == {"n8n", "events"}
    assert [r["key"] for r in found if r["source"] == "events"] == ["events:/events/jazz-night-42"]
    text = CliRunner().invoke(main, ["--db", db, "search", "saxophones"]).output
    assert "no template matches" not in text and "1 item(s) of events" in text


def test_snippets_show_html_entities_as_their_characters(tmp_path):
    # n8n's descriptions are stored as served, with `&gt;` for a Markdown quote; a snippet is for people
    from scraper.db import store
    db = str(tmp_path / "entities.db")
    conn = store.open_db(db)
    with store.transaction(conn):
        store_item(conn, "events", "/e/1", "https://events.test/e/1",
                    {"name": "Quokka night", "description": "&gt; Bring a lamp &amp; a chair"},
                    {"page": b"<html></html>"}, "2026-11-03T00:00:00+00:00")
    conn.close()
    found = json.loads(CliRunner().invoke(main, ["--db", db, "search", "quokka OR lamp", "--json"]).output)
    assert found and all("&gt;" not in r["snippet"] and "&amp;" not in r["snippet"] for r in found)
    assert any("> Bring a lamp & a chair" in r["snippet"].replace("«", "").replace("»", "") for r in found)
