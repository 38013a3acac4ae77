"""Issue 16 end to end, in real processes: `python -m scraper` against the n8n stand-in (127.0.0.1) and the
events calendar (a catalogue, 127.0.0.2) in one sources file; one seed and one run store both sites, a
second seed at once sends nothing, a walk after the calendar changed catches new, edited and removed
events, and each domain stays within its rate. Plain-HTTP /events/ pages only (the /live/ pages need a
browser). A database of the previous release upgrades in place, keeps every row and runs on."""

import json
import sqlite3
import time

import pytest

from scraper.db import store
from scraper.sites import n8n
from scripts.standin import client
from tests.helpers import check_every_row, in_process, rows, scraper, write

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


@pytest.mark.timing
def test_one_seed_and_one_run_mirror_both_sources_then_a_walk_catches_the_calendars_changes(two_sites):
    site, calendar, path, db = two_sites
    seeded = scraper(site, db, "--sources", path, "seed", check=0)
    said = seeded.stderr + seeded.stdout
    assert "n8n: walked (complete, 1 request(s)): 24 new" in said
    assert "events: walked (complete, 5 request(s))" in said      # robots.txt, the index, its 3 files (README)
    ran = scraper(site, db, "--sources", path, "run", "--workers", "4", check=0)
    assert "`scraper seed` walks each source when it is due" in ran.stderr     # not n8n's --from-search alone

    # every template as the n8n stand-in serves it
    _, jobs, stored = check_every_row(site, db)
    assert len(stored) == len(jobs) == 24
    # every plain-HTML event as the calendar serves it, the `fields` included
    truth = events_of(calendar)
    assert any(not e["organizer_in_jsonld"] for e in truth.values())      # the css field has work to do
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
    new_pages = [e for e in events_of(calendar).values() if e["id"] in added]
    n8n_sent = site.stats()["requests"]
    walked = scraper(site, db, "--sources", path, "seed", "--source", "events", check=0)
    # the index and its 3 files: robots.txt, read by the first walk the same day, is kept for 24 hours
    assert (f"events: walked (complete, 4 request(s)): {len(new_pages)} new, 3 changed, 2 removed"
            in walked.stderr + walked.stdout)
    scraper(site, db, "--sources", path, "run", "--workers", "4", check=0)
    stats = calendar.stats()
    sitemap_files, robots_txt = 4, 0
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
            assert row["record"] == got[url]["record"]          # the data is kept
        else:
            assert row["version"] == 1 and row["removed_at"] is None, row
    listed = {s["name"]: s for s in json.loads(scraper(site, db, "--sources", path, "sources", "--json",
                                                       check=0).stdout)}
    assert listed["events"]["items"] == {"live": len(after) - len(removed), "removed": len(removed)}


# --- a database of the previous release ------------------------------------------------------------

PREVIOUS = 6        # the schema of the release before sources and the catalogue kind (issue 16)


def previous_release_database(path, site):
    """A database as the previous release left it: the first PREVIOUS migrations, a row in every table
    (a stored template with its answers, change, video and transcript; a done, a failed and a pending
    job on the stand-in), made with plain SQL as that release did. Returns the ids (stored, pending)."""
    conn = store.connect(str(path))
    store.migrate(conn, PREVIOUS)
    stored, failed, pending = site.corpus()["ids"][:3]
    now = time.time() - 3600
    for tid, status in ((stored, "done"), (failed, "failed"), (pending, "pending")):
        conn.execute("INSERT INTO jobs (key, site, url, domain, status, attempts, created_at, updated_at, finished_at,"
                     " error_kind) VALUES (?, 'n8n', ?, '127.0.0.1', ?, ?, ?, ?, ?, ?)",
                     (n8n.job_key(tid), n8n.page_url(site.url, tid), status, int(status != "pending"), now, now,
                      None if status == "pending" else now, "http_5xx" if status == "failed" else None))
    conn.execute("INSERT INTO workflows (id, name, description, workflow, fetched_at, content_hash, version, "
                 "first_seen_at, last_seen_at) VALUES (?, 'Quokka relay', 'd', '{}', 'f', 'h', 1, 'f', 'f')",
                 (stored,))
    conn.execute("INSERT INTO domains (domain, updated_at) VALUES ('127.0.0.1', ?)", (now,))
    conn.execute("INSERT INTO runs (pid, started_at, finished_at, workers, done, failed, invalid, exit_code) "
                 "VALUES (1, ?, ?, 2, 1, 1, 0, 1)", (now - 60, now))
    conn.execute("INSERT INTO counters (name, value) VALUES ('recycles', 3)")
    conn.execute("INSERT INTO source (id, api_url, site_url, recorded_at) VALUES (1, ?, ?, ?)",
                 (site.api_url, site.url, now))
    conn.execute("INSERT INTO transcripts VALUES ('vid1', 'en', 0, 'hello', '[]', 'f')")
    conn.execute("INSERT INTO template_videos VALUES (?, 'vid1')", (stored,))
    for kind in ("api", "page"):
        conn.execute("INSERT INTO answers VALUES (?, 1, ?, 'h', 'f', 'f', 1, x'7b7d')", (stored, kind))
    conn.execute("INSERT INTO listing VALUES (?, 'eh', 'f')", (stored,))
    conn.execute("INSERT INTO changes (template_id, change, at, version) VALUES (?, 'added', 'f', 1)", (stored,))
    conn.execute("INSERT INTO walks (started_at, finished_at, complete, pages, listed, new, changed, removed, "
                 "restored) VALUES ('2026-01-01T00:00:00+00:00', '2026-01-01T00:00:05+00:00', 1, 1, 3, 3, 0, 0, 0)")
    conn.execute("INSERT INTO requests (at, domain, kind, status, ms) VALUES (?, '127.0.0.1', 'ok', 200, 5)", (now,))
    conn.close()
    return stored, pending


def snapshot(path):
    """{table: (columns, rows)} of every table but the full-text index's own."""
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                             "AND name NOT LIKE '%fts%' AND name NOT LIKE 'sqlite_%'")]
        out = {}
        for t in tables:
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({t})")]
            out[t] = (columns, sorted(map(tuple, conn.execute(f"SELECT * FROM {t}")), key=repr))
        return out
    finally:
        conn.close()


def test_a_database_of_the_previous_release_upgrades_in_place_keeps_every_row_and_runs(standin, tmp_path):
    site = standin(templates=6)
    db = tmp_path / "old.db"
    stored, pending = previous_release_database(db, site)
    before = snapshot(db)
    assert all(rows_ for _, rows_ in before.values()), [t for t, (_, r) in before.items() if not r]
    status = json.loads(in_process(site, db, "status", "--json", check=0).stdout)     # the upgrade, in place
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
    after = snapshot(db)
    for table, (columns, old_rows) in before.items():
        assert table in after, table
        conn = sqlite3.connect(db)
        kept = sorted(map(tuple, conn.execute(f"SELECT {', '.join(columns)} FROM {table}")), key=repr)
        conn.close()
        assert kept == old_rows, table
    assert (status["total"], status["pending"], status["done"], status["failed"]) == (3, 1, 1, 1)
    found = json.loads(in_process(site, db, "search", "quokka", "--json", check=0).stdout)
    assert [r["id"] for r in found] == [stored]
    assert "version 1" in in_process(site, db, "history", str(stored), check=0).stdout
    # and the upgraded database works on: the pending template is fetched and stored
    scraper(site, db, "run", "--workers", "2", check=1)      # 1: the old failed job is still failed
    assert rows(db, "SELECT status FROM jobs WHERE key = ?", n8n.job_key(pending)) == [{"status": "done"}]
    assert rows(db, "SELECT name FROM workflows WHERE id = ?", pending)[0]["name"] == \
        site.template(pending)["workflow"]["name"]
    listed = json.loads(in_process(site, db, "sources", "--json", check=0).stdout)
    assert [s["name"] for s in listed] == ["n8n"]
    assert listed[0]["last_walk_at"] == "2026-01-01T00:00:05+00:00"   # the old release's walk counts
