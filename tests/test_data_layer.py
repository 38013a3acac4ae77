"""The data layer's functions that the mirror and the products call, on each backend (SQLite and
PostgreSQL): the same writes through the mirror core, the same answers from the readers. Each test names
the db modules it exercises; the command-level runs on PostgreSQL are in tests/test_postgres.py."""

import dataclasses
import json

import pytest

from scraper.base import settings
from scraper.base.errors import ConfigError
from scraper.base.sources import Source
from scraper.db import items as item_rows
from scraper.db import listing, runrecord, store, templates
from scraper.db.queue import Queue
from scraper.mirror import answers, items, record, seed, source, sync, versions
from scraper.products import export, export_items, failures, files, lookup, stats, status
from scraper.products import sources as sources_product
from scraper.sites import catalogue, n8n
from tests.helpers import (
    definition_ids,
    detail_body,
    remove_item,
    remove_template,
    served_mirror,
    store_item,
    store_template,
)

AT = "2026-11-01T00:00:00+00:00"
SITE = "http://shop.test"
SHOP = Source(name="shop", kind="catalogue", options=(("site", SITE), ("type", "Product")))
PRODUCT = '<script type="application/ld+json">{"@type": "Product", "name": "Lamp", "colour": "red"}</script>'


@pytest.fixture
def mirror(backend):
    """(database, planted ids, live ids): the serving tests' mirror (tests/helpers.served_mirror)."""
    planted, live = served_mirror(backend)
    return backend, planted, live


def test_items_are_stored_found_refreshed_reextracted_and_exported(backend):
    """db/items and db/answers through mirror/items, export_items and lookup."""
    conn = store.open_db(backend)
    with store.transaction(conn) as c:
        store_item(c, "shop", "/p", f"{SITE}/p", {"name": "stale"}, {"page": f"<html>{PRODUCT}</html>".encode()}, AT)
        store_item(c, "shop", "/q", f"{SITE}/q", {"name": "Chair", "legs": 4}, {"page": b"<p>"}, AT)
        store_item(c, "gone", "/r", f"{SITE}/r", {"name": "kept"}, {"page": b"<p>"}, AT)
        assert store_item(c, "shop", "/q", f"{SITE}/q", {"name": "Chair", "legs": 3}, {"page": b"<p>"}, AT) == 2
    Queue(conn).seed([("shop:/p", "catalogue", f"{SITE}/p", "shop.test", "shop"),
                      ("shop:/q", "catalogue", f"{SITE}/q", "shop.test", "shop")], 0.0)
    assert items.find_key(conn, "shop", f"{SITE}/q") == "/q" and items.find_key(conn, "shop", "/p") == "/p"
    assert items.find_key(conn, "shop", "/nothing") is None
    assert [v["version"] for v in items.history(conn, "shop", "/q")] == [1, 2]
    with store.transaction(conn) as c:
        assert remove_item(c, "shop", "/q", "2026-11-02T00:00:00+00:00")
        assert not remove_item(c, "shop", "/q", "2026-11-02T00:00:00+00:00")     # removed already
    assert items.reextract(conn, {"shop": SHOP}, catalogue.extract) == (2, 1)    # "gone" is no source any more
    assert json.loads(item_rows.row(conn, "shop", "/p")["record"])["name"] == "Lamp"
    assert item_rows.sources(conn) == ["gone", "shop"] and item_rows.live_and_removed(conn, "shop") == (1, 1)
    assert export_items.fields(conn, "shop") == ["@type", "colour", "name"]     # /q re-extracted from "<p>"
    assert [r["key"] for r in export_items.rows(conn, "shop")] == ["shop:/p", "shop:/q"]
    assert [r["key"] for r in export_items.rows(conn, "shop", live_only=True)] == ["shop:/p"]
    with pytest.raises(ConfigError, match="gone, shop"):
        export_items.check_source(conn, "nope")
    assert lookup.get_item(conn, "shop", "shop:/p")["record"]["name"] == "Lamp"
    assert [i["key"] for i in lookup.search_items(conn, "shop")["items"]] == ["shop:/p"]
    # a refresh queues the done, live items only (the jobs are pending: nothing yet)
    assert items.refresh(conn, "shop", 0, None, 1e9) == 0
    conn.execute("UPDATE jobs SET status = 'done'")
    assert items.refresh(conn, "shop", 0, None, 1e9) == 1
    row = next(r for r in sources_product.report(conn, dataclasses.replace(
        settings.build(db_path="x.db"), sources=(SHOP,)), 0.0) if r["name"] == "shop")
    assert row["items"] == {"live": 1, "removed": 1} and row["jobs"]["pending"] == 1
    conn.close()


def test_a_walk_is_remembered_and_a_listed_removed_template_restored(mirror):
    """db/listing and db/templates through mirror/sync (apply, refresh, why_none_due) and status."""
    db, _, live = mirror
    ids = definition_ids()
    conn = store.open_db(db)
    s = settings.build(db_path="x.db")
    entries = {tid: {"id": tid, "name": f"t{tid}", "price": 5 if tid == ids[0] else None} for tid in ids}
    p, new, already = sync.apply(conn, s, seed.Walk(entries, True, 1), 0.0, 100.0)
    assert p.restored == [ids[19]] and new == 20 and already == 0      # served_mirror seeded no jobs
    assert listing.price(conn, ids[0])["price"] == 5
    assert set(listing.entry_hashes(conn)) == set(ids)
    assert templates.row(conn, ids[19])["removed_at"] is None
    assert [c["change"] for c in answers.changes(conn, kinds=("restored",))] == ["restored"]
    fields = status.mirror_fields(conn, active=None)
    assert fields["listed"] == 20 and fields["stored"] == {"live": len(live) + 1, "removed": 0}
    assert fields["refreshing"] == 20 == status.mirror_fields(conn, active=10_000)["refreshing"]   # both sides
    assert "no live template is stored and done" in sync.why_none_due(conn, 1, 100.0)
    conn.execute("UPDATE jobs SET status = 'done'")
    assert "lower --older-than" in sync.why_none_due(conn, 1_000_000, 100.0)
    assert sync.refresh(conn, 0, 3, 1e9) == 3
    conn.close()


def test_the_readers_answer_from_the_same_rows(mirror):
    """db/templates, db/answers, db/stats, db/exports and db/reports through the products."""
    db, planted, live = mirror
    ids = definition_ids()
    conn = store.open_db(db)
    assert [r[0] for r in files.templates(conn)] == sorted(live)
    assert [r[0] for r in templates.removed(conn)] == [ids[19]]
    assert templates.counts(conn) == {"live": len(live), "removed": 1, "paid": 1}
    assert versions.count(conn) == 21 and versions.count(conn, live_only=True) == 20      # 20 answers and a page
    assert versions.count(conn, source="events") == 1
    stored = list(versions.stored(conn, ("https://api.n8n.io/api", "https://n8n.io"), source="n8n"))
    assert [a.template_id for a in stored] == sorted(ids) and stored[0].url.startswith("https://api.n8n.io/")
    with pytest.raises(ConfigError, match="events, n8n"):
        versions.check_source(conn, "nope")
    top = stats.top(conn, "node_types", "type", 3, live_only=True)
    assert len(top) == 3 and top[0]["templates"] >= top[-1]["templates"]
    r = stats.report(conn)
    assert r["templates"] == 20 and r["paid"] == 1 and r["paid_unknown"] == 1
    assert sum(b["templates"] for b in r["quality_score"]["histogram"]) == r["quality_score"]["scored"]
    exported = list(export.rows(conn, ["id", "name", "transcripts"], live_only=True))
    assert [e["id"] for e in exported] == sorted(live) and all(e["transcripts"] == [] for e in exported)
    assert lookup.site_url(conn, "https://elsewhere.test") == "https://n8n.io"
    assert lookup.recent_changes(conn, kinds=["removed"])["changes"][0]["id"] == ids[19]
    # a template's videos queue one job each, once
    with store.transaction(conn) as c:
        templates.replace_videos(c, ids[0], ["vid1", "vid2"])
    s = settings.build(db_path="x.db", transcripts=True)
    assert record.resume(conn, s, 0.0) == 2 and record.resume(conn, s, 0.0) == 0
    Queue(conn).seed([("n8n:1", "n8n", "https://n8n.io/workflows/1", "n8n.io")], 0.0)
    job = Queue(conn).claim("w", 1.0, 60.0)
    Queue(conn).fail(job, "w", 2.0, "failed", "http_4xx", "gone", http_status=410)
    assert [f["key"] for f in failures.listing(conn)] == [job.key]
    assert failures.listing(conn, limit=0) == []
    conn.close()


def test_a_database_moves_to_new_urls_only_when_asked(backend):
    """db/origin through mirror/source: the n8n URLs, a catalogue source's site, the n8n jobs' source."""
    conn = store.open_db(backend)
    source.check(conn, "https://api.a.test/api", "https://a.test")
    Queue(conn).seed([("n8n:1", "n8n", "https://a.test/workflows/1", "a.test"),
                      ("shop:/p", "catalogue", f"{SITE}/p", "shop.test", "shop")], 0.0)
    assert source.recorded(conn) == ("https://api.a.test/api", "https://a.test")
    with pytest.raises(ConfigError, match="--adopt-urls"):
        source.check(conn, "https://api.b.test/api", "https://b.test")
    source.check(conn, "https://api.b.test/api", "https://b.test", adopt=True)
    source.check_site(conn, SHOP)
    source.check_site(conn, dataclasses.replace(SHOP, options=(("site", "http://shop2.test"),)), adopt=True)
    urls = {r["key"]: (r["url"], r["domain"]) for r in conn.execute("SELECT key, url, domain FROM jobs")}
    assert urls == {"n8n:1": ("https://b.test/workflows/1", "b.test"),
                    "shop:/p": ("http://shop2.test/p", "shop2.test")}
    s = dataclasses.replace(settings.build(db_path="x.db"), sources=(Source(name="library", kind="n8n"),))
    assert source.own_n8n_jobs(conn, s) == 1 and source.own_n8n_jobs(conn, s) == 0
    conn.close()


def test_a_template_answer_is_versioned_and_reextracted(backend):
    """db/answers and db/templates through mirror/answers: versions, removal, re-extraction."""
    conn = store.open_db(backend)
    tid = definition_ids()[0]
    with store.transaction(conn) as c:
        body = detail_body(tid)
        page = b"<html><title>T</title></html>"
        assert store_template(c, n8n.extract(body, AT), {"api": body, "page": page}, AT) == 1
        changed = detail_body(tid, description="a new description")
        assert store_template(c, n8n.extract(changed, AT), {"api": changed}, AT) == 2
        assert remove_template(c, tid, AT) and not remove_template(c, tid, AT)
    assert [v["version"] for v in answers.history(conn, tid)] == [1, 2]
    assert templates.state(conn, tid, n8n.SITE, n8n.API).last_hash == answers.history(conn, tid)[-1]["content_hash"]
    assert answers.reextract(conn) == (1, 0)
    assert templates.row(conn, tid)["description"] == "a new description"
    assert [c["change"] for c in answers.changes(conn)] == ["added", "changed", "removed"]
    assert [c["change"] for c in answers.changes(conn, limit=1)] == ["removed"]
    conn.close()


def test_the_lint_check_finds_sql_outside_db_and_leaves_prose_alone(tmp_path):
    """scripts/check_sql_outside_db: a statement (plain, implicit concatenation, f-string) is found with
    its lines; a docstring, a log line and lower-case prose are not."""
    from scripts import check_sql_outside_db as check
    path = tmp_path / "m.py"
    path.write_text('"""SELECT the best: prose."""\n'
                    'A = "SELECT id FROM jobs"\n'
                    'B = ("UPDATE jobs "\n     "SET x = 1")\n'
                    'C = f"DELETE FROM {t} WHERE id = ?"\n'
                    'D = "select a template, update it, create a file"\n', encoding="utf-8")
    assert [(first, last) for first, last, _ in check.offences(path)] == [(2, 2), (3, 4), (5, 5)]
    assert check.main() == 0     # the package as it stands


def test_the_report_of_a_run_that_died_ends_at_its_last_trace(backend):
    """db/reports through products/report: a run without finished_at (killed) ends at its last request or
    job. PostgreSQL 15 refused the statement before issue 27's move (a subquery in FROM needs an alias)."""
    from scraper.products import report
    conn = store.open_db(backend)
    run_id = runrecord.start_run(conn, 4242, 100.0, 1, json.dumps({"site_url": "https://n8n.io", "rate_per_s": 2}))
    conn.execute("INSERT INTO requests (at, domain, kind, ms, run_id) VALUES (?, ?, ?, ?, ?)",
                 (130.0, "n8n.io", "ok", 40, run_id))
    conn.execute("INSERT INTO requests (at, domain, kind, ms, run_id) VALUES (?, ?, ?, ?, ?)",
                 (140.0, "n8n.io", "http_429", 60, run_id))
    run = report.gather(conn, 200.0)["runs"][0]
    assert not run["finished"] and run["end_at"] == 140.0 and run["duration_s"] == 40.0
    assert (run["requests"], run["ok"], run["http_429"], run["errors"]) == (2, 1, 1, 1)
    conn.close()


def test_a_result_prepared_before_its_transaction_writes_exactly_what_it_would_have(backend):
    """`record.prepare` (hashes, compressed answers, the redaction verdict, done outside the write lock) changes
    none of the rows `record.write` makes: two templates, one with a planted secret, and a catalogue item,
    written once as they are and once prepared, into two databases that must then hold the same rows."""
    from scraper.net.http import answer
    from scraper.sites import Result
    from tests.helpers import SECRETS
    tid, other = definition_ids()[:2]
    secret = detail_body(other, description=f"token {SECRETS['openai']}")
    raw = [(tid, answer(detail_body(tid), f"{SITE}/api/{tid}", 200, "application/json")), (other, secret)]
    page = answer(PRODUCT.encode(), f"{SITE}/lamp", 200, "text/html")

    def result():
        return Result(versioned=tuple((n8n.extract(body, AT), {"api": body}, AT) for _, body in raw),
                      items=(("shop", "/lamp", f"{SITE}/lamp", {"name": "Lamp"}, {"page": page}, AT, ()),),
                      rejected=(("n8n", "999", b'{"not": "a graph"}', AT),))

    prepared = record.prepare(result())
    assert all(isinstance(b, answers.Packed) for _, r, _ in prepared.versioned for b in r.values())
    dumps = []
    for i, made in enumerate((result(), prepared)):
        path = backend if i == 0 or not backend.endswith(".db") else backend.replace(".db", "-2.db")
        conn = store.open_db(path)
        if i == 1 and not backend.endswith(".db"):     # PostgreSQL: the same database, emptied
            with store.transaction(conn) as c:
                for table in ("answers", "workflows", "items", "changes", "events"):
                    c.execute(f"DELETE FROM {table}")
        with store.transaction(conn) as c:
            record.write(c, made, 0.0, AT)
        dumps.append([[tuple(r) for r in conn.execute(sql).fetchall()] for sql in (
            "SELECT source, key, version, kind, content_hash, size, body, url, http_status, content_type FROM answers "
            "ORDER BY source, key, kind",
            "SELECT id, version, workflow, clean_at_rules, redacted FROM workflows ORDER BY id",
            "SELECT source, key, version, content_hash, record FROM items",
            "SELECT source, key, template_id, change, at, version FROM changes ORDER BY seq",
            "SELECT type, source, subject, data FROM events ORDER BY seq")])
        conn.close()
    assert dumps[0] == dumps[1] and len(dumps[1][4]) == len(dumps[1][3]) == 3    # two templates, one item added
    verdicts = {w[0]: (w[3], w[4]) for w in dumps[1][1]}
    assert verdicts[tid] == (1, None)                             # clean under rules version 1
    assert verdicts[other][0] is None and SECRETS["openai"] not in verdicts[other][1]
    assert "[REDACTED]" in verdicts[other][1]                     # its redacted form saved with it


def test_a_result_written_in_one_pass_makes_the_rows_of_its_parts_written_one_by_one(backend):
    """db/results through mirror/record: one Result naming several templates and items (new, changed, removed,
    refused) writes, in one read and one write, the same answers, rows, changes and events as each part
    written as a result of its own, in the same order."""
    from scraper.net.http import answer
    from scraper.sites import Result
    a, b = definition_ids()[:2]

    def api(tid, **kw):
        body = detail_body(tid, **kw)
        return (n8n.extract(body, AT), {"api": answer(body, f"{SITE}/api/{tid}", 200, "application/json")}, AT)

    def item(key, name):
        return ("shop", key, f"{SITE}{key}", {"name": name}, {"page": answer(name.encode(), f"{SITE}{key}", 200,
                                                                            "text/html")}, AT, ())

    rounds = [Result(versioned=(api(a), api(b)), items=(item("/p", "P"), item("/q", "Q"))),
              Result(versioned=(api(a, name="Renamed"),), items=(item("/p", "P2"),), removed=(b, 999),
                     removed_items=(("shop", "/q"), ("shop", "/none")), rejected=(("n8n", "7", b"{}", AT),))]
    parts = [Result(versioned=(v,)) for v in rounds[0].versioned] + [Result(items=(i,)) for i in rounds[0].items]
    parts += [Result(versioned=rounds[1].versioned), Result(items=rounds[1].items)]
    parts += [Result(removed=(t,)) for t in rounds[1].removed]
    parts += [Result(removed_items=(k,)) for k in rounds[1].removed_items] + [Result(rejected=rounds[1].rejected)]
    dumps = []
    for i, results in enumerate((rounds, parts)):
        path = backend if i == 0 or not backend.endswith(".db") else backend.replace(".db", "-2.db")
        conn = store.open_db(path)
        if i == 1 and not backend.endswith(".db"):     # PostgreSQL: the same database, emptied
            with store.transaction(conn) as c:
                for table in ("answers", "workflows", "items", "changes", "events"):
                    c.execute(f"DELETE FROM {table}")
        for result in results:
            with store.transaction(conn) as c:
                record.write(c, result, 0.0, AT)
        dumps.append([[tuple(r) for r in conn.execute(sql).fetchall()] for sql in (
            "SELECT source, key, version, kind, content_hash, body, url FROM answers "
            "ORDER BY source, key, version, kind",
            "SELECT id, version, name, removed_at FROM workflows ORDER BY id",
            "SELECT source, key, version, record, removed_at FROM items ORDER BY source, key",
            "SELECT source, key, change, version FROM changes ORDER BY seq",
            "SELECT type, subject, data FROM events ORDER BY seq")])
        conn.close()
    assert dumps[0] == dumps[1]
    assert [c[2] for c in dumps[1][3]] == ["added"] * 4 + ["changed", "changed", "removed", "removed"]
