"""Issue 16 end to end, in real processes: `python -m scraper` against the n8n stand-in (127.0.0.1) and the
events calendar (a catalogue, 127.0.0.2) in one sources file; one seed and one run store both sites, a
second seed at once sends nothing, a walk after the calendar changed catches new, edited and removed
events, and each domain stays within its rate. Plain-HTTP /events/ pages only (the /live/ pages need a
browser)."""

import json

import pytest

from scripts.standin import client
from tests.helpers import check_every_row, rows, scraper, write

pytestmark = pytest.mark.slow

N8N_RATE, N8N_BURST = 20, 5
EVENTS_RATE, EVENTS_BURST = 8, 2

SOURCES = """
[[source]]
name = "n8n"
kind = "n8n"
priority = 1
rate = {n8n_rate}
burst = {n8n_burst}

[[source]]
name = "events"
kind = "catalogue"
priority = 2
every = "1d"
rate = {events_rate}
burst = {events_burst}
site = "{site}/"
include = ["^/events/"]
type = "Event"
required = ["name", "startDate"]

[source.fields]
organizer = "css:.organizer::text"
venue = "jsonld:location.name"
"""


@pytest.fixture
def two_sites(standin, tmp_path):
    """(n8n stand-in, calendar stand-in, sources file, database), both rate-limited as the file says."""
    site = standin(templates=24, rate=N8N_RATE, burst=N8N_BURST)
    with client.start(catalogue=True, events=40, seed=5, rate=EVENTS_RATE, burst=EVENTS_BURST) as calendar:
        path = write(tmp_path, SOURCES.format(n8n_rate=N8N_RATE, n8n_burst=N8N_BURST, events_rate=EVENTS_RATE,
                                              events_burst=EVENTS_BURST, site=calendar.url))
        yield site, calendar, path, tmp_path / "jobs.db"


def events_of(calendar):
    """The stand-in's truth of the plain-HTML events, by URL."""
    return {e["url"]: e for e in calendar.truth()["events"] if "/events/" in e["url"]}


def items(db):
    return {r["url"]: dict(r, record=json.loads(r["record"])) for r in rows(db, "SELECT * FROM items")}


def within_rate(stats, rate, burst):
    assert stats["http_429"] == 0, stats
    assert stats["max_in_1s"] <= rate + burst, stats


def test_one_seed_and_one_run_mirror_both_sources_then_a_walk_catches_the_calendars_changes(two_sites):
    site, calendar, path, db = two_sites
    seeded = scraper(site, db, "--sources", path, "seed", check=0)
    assert "n8n: walked" in seeded.stderr + seeded.stdout and "events: walked" in seeded.stderr + seeded.stdout
    scraper(site, db, "--sources", path, "run", "--workers", "4", check=0)

    # every template as the n8n stand-in serves it
    _, jobs, stored = check_every_row(site, db)
    assert len(stored) == len(jobs) == 24
    # every plain-HTML event as the calendar serves it, the `fields` included
    truth = events_of(calendar)
    got = items(db)
    assert set(got) == set(truth)
    for url, row in got.items():
        want, record = truth[url], row["record"]
        assert (record["name"], record["startDate"], record["endDate"]) == \
            (want["name"], want["startDate"], want["endDate"]), url
        assert record["organizer"] == want["organizer"], url     # from the HTML where the JSON-LD has none
        assert record["venue"] == want["location_name"], url
        assert (row["source"], row["key"], row["version"], row["removed_at"]) == \
            ("events", url.removeprefix(calendar.url), 1, None)
    # nothing for the pages that are not events: none of them was ever requested
    stats = calendar.stats()
    asked = set(stats["by_path"])
    pages = {p.removeprefix(calendar.url) or "/" for p in calendar.truth()["pages"]}
    assert not asked & pages, asked & pages
    assert not {"page", "live_page", "live_json", "other"} & set(stats["by_kind"]), stats["by_kind"]
    assert stats["by_kind"]["event"] == len(truth)
    assert stats["robots"] == 1 and stats["by_kind"]["sitemap"] == 3      # robots.txt named the sitemap index
    # both domains within their rates, zero 429s
    within_rate(site.stats(), N8N_RATE, N8N_BURST)
    within_rate(stats, EVENTS_RATE, EVENTS_BURST)

    # `sources --json` shows both, walked, with their next walk
    listed = json.loads(scraper(site, db, "--sources", path, "sources", "--json", check=0).stdout)
    assert [s["name"] for s in listed] == ["n8n", "events"]
    for s in listed:
        assert s["last_walk_at"] and s["next_due_at"] and s["next_due_at"] > s["last_walk_at"], s
    assert listed[1]["items"] == {"live": len(truth), "removed": 0}

    # a second seed at once sends nothing
    sent = site.stats()["requests"], calendar.stats()["requests"]
    again = scraper(site, db, "--sources", path, "seed", check=0)
    assert "not due" in again.stderr + again.stdout
    assert (site.stats()["requests"], calendar.stats()["requests"]) == sent

    # the calendar changes; `seed --source events` then `run` catch it, with few requests
    ids = sorted(int(url.rsplit("-", 1)[1]) for url in truth)
    edited, removed = ids[:3], ids[3:5]
    added = calendar.change(add=4, edit=edited, remove=removed)["added"]
    calendar.reset()
    n8n_sent = site.stats()["requests"]
    scraper(site, db, "--sources", path, "seed", "--source", "events", check=0)
    scraper(site, db, "--sources", path, "run", "--workers", "4", check=0)
    stats = calendar.stats()
    new_pages = [e for e in events_of(calendar).values() if e["id"] in added]
    sitemap_files, robots_txt = 4, 1
    assert stats["requests"] <= sitemap_files + robots_txt + len(new_pages) + len(edited) + len(removed) + 3, stats
    assert site.stats()["requests"] == n8n_sent         # the n8n source was not walked, nothing of it was due
    within_rate(stats, EVENTS_RATE, EVENTS_BURST)
    after = items(db)
    assert set(after) == set(truth) | {e["url"] for e in new_pages}
    for url, row in after.items():
        eid = int(url.rsplit("-", 1)[1])
        if eid in edited:
            assert row["version"] == 2 and "(revised 2)" in row["record"]["name"], row
        elif eid in removed:
            assert row["removed_at"] is not None and row["version"] == 1, row
        else:
            assert row["version"] == 1 and row["removed_at"] is None, row
    listed = {s["name"]: s for s in json.loads(scraper(site, db, "--sources", path, "sources", "--json",
                                                       check=0).stdout)}
    assert listed["events"]["items"] == {"live": len(after) - len(removed), "removed": len(removed)}
