"""Issue 28 against the stand-in run as a real process, its ranking drifting on every call and every 5th
template paid (listed with a price and a purchase URL, answered hollow): the walk finds every id within
its request budget, paid templates are marked and exported as such, a hollow answer is no new version,
a graph that is not a graph ends invalid/shape, and an existing database gains the columns."""

import json
import math
import sqlite3

import pytest
from click.testing import CliRunner

from scraper import cli
from scraper.db import store
from scraper.sites import n8n
from tests.helpers import store_template

pytestmark = pytest.mark.slow

TEMPLATES, PAID_EVERY = 300, 5     # 3 pages of 100: the ranking drifts across two page boundaries


def scraper(site, db, *args):
    runner = CliRunner()
    result = runner.invoke(cli.main, ["--db", str(db), "--api-url", site.url + "/api", "--site-url", site.url, *args])
    return result


def searches(site):
    return site.stats()["by_kind"].get("search", 0)


@pytest.fixture
def drifting(standin):
    return standin(templates=TEMPLATES, rate=0, drift=1, paid_every=PAID_EVERY)


def test_a_walk_of_a_drifting_ranking_finds_every_template_and_the_daily_walk_only_the_new(drifting, tmp_path):
    db = tmp_path / "jobs.db"
    pages = math.ceil(TEMPLATES / n8n.SEARCH_ROWS)
    first = scraper(drifting, db, "seed", "--from-search")
    assert first.exit_code == 0, first.output
    assert f"seeded {TEMPLATES} new job(s)" in first.output
    assert searches(drifting) <= 2 * pages + 1
    run = scraper(drifting, db, "run", "--workers", "2", "--rate", "200", "--burst", "50")
    assert run.exit_code == 0, run.output

    drifting.library(add=6)
    before = drifting.stats()["requests"]
    searched = searches(drifting)
    daily = scraper(drifting, db, "seed", "--from-search")
    assert "6 new, 0 changed, 0 removed" in daily.output, daily.output
    again = scraper(drifting, db, "run", "--workers", "1", "--rate", "200", "--burst", "50")
    assert again.exit_code == 0, again.output
    pages = math.ceil((TEMPLATES + 6) / n8n.SEARCH_ROWS)
    assert searches(drifting) - searched <= 2 * pages + 1
    assert drifting.stats()["requests"] - before <= pages * 2 + 1 + 6

    conn = sqlite3.connect(db)
    paid = dict(conn.execute("SELECT id, paid FROM workflows"))
    assert len(paid) == TEMPLATES + 6
    assert sum(paid.values()) == len([k for k in range(TEMPLATES + 6) if k % PAID_EVERY == PAID_EVERY - 1])
    # a paid template answers hollow; no free one does
    assert conn.execute("SELECT COUNT(*) FROM workflows WHERE hollow != paid").fetchone()[0] == 0

    rows = [json.loads(line) for line in scraper(drifting, db, "export", "--format", "jsonl").output.splitlines()
            if line.startswith("{")]
    for row in rows:
        assert row["paid"] is bool(paid[row["id"]])
        if row["paid"]:
            assert row["price"] > 0 and row["purchase_url"].endswith(f"/buy/{row['id']}") and row["hollow"] is True
        else:
            assert row["price"] is None and row["purchase_url"] is None and row["hollow"] is False

    out = tmp_path / "new" / "templates"          # does not exist yet: the export makes it
    files = scraper(drifting, db, "export", "--format", "files", "--output", str(out))
    assert files.exit_code == 0, files.output
    index = json.loads((out / "index.json").read_text())["templates"]
    listed_paid = {t["id"] for t in index if t.get("paid")}
    assert listed_paid == {i for i, p in paid.items() if p}
    assert all(t["file"] is None for t in index if t.get("paid"))
    written = {p.name.split("-")[0] for p in out.glob("*.json") if p.name != "index.json"}
    assert not written & {str(i) for i in listed_paid} and len(written) == len(paid) - len(listed_paid)
    assert "/buy/" in (out / "README.md").read_text()


def test_a_hollow_answer_is_no_new_version_and_a_shapeless_one_ends_invalid_shape(tmp_path):
    from scraper.mirror import answers
    from tests.helpers import definition_ids, detail_body

    tid = definition_ids()[0]
    conn = store.open_db(str(tmp_path / "jobs.db"))
    full = detail_body(tid)
    obj = json.loads(full)
    for node in obj["workflow"]["workflow"]["nodes"]:
        node["parameters"] = {"content": ""} if node["type"] == "n8n-nodes-base.stickyNote" else {}
    hollow = json.dumps(obj).encode()
    with store.transaction(conn) as c:
        assert store_template(c, n8n.extract(full, "2026-11-01T00:00:00+00:00"), {"api": full},
                             "2026-11-01T00:00:00+00:00") == 1
    with store.transaction(conn) as c:
        assert store_template(c, n8n.extract(hollow, "2026-11-02T00:00:00+00:00"), {"api": hollow},
                             "2026-11-02T00:00:00+00:00") == 1
    row = conn.execute("SELECT version, hollow FROM workflows WHERE id = ?", (tid,)).fetchone()
    assert tuple(row) == (1, 0)
    assert len(answers.history(conn, tid)) == 1

    from scraper.base.errors import JobInvalid
    for broken in ({"connections": {}}, {"nodes": [{"name": "x"}], "connections": {}}):
        obj["workflow"]["workflow"] = broken
        with pytest.raises(JobInvalid) as e:
            n8n.extract(json.dumps(obj), "2026-11-03T00:00:00+00:00")
        assert e.value.kind == "shape"
    conn.close()


def test_an_existing_database_gains_the_columns_and_a_walk_fills_them(standin, tmp_path):
    site = standin(templates=30, rate=0, paid_every=PAID_EVERY)
    db = tmp_path / "jobs.db"
    assert scraper(site, db, "seed", "--from-search").exit_code == 0
    assert scraper(site, db, "run", "--workers", "1", "--rate", "200", "--burst", "50").exit_code == 0
    conn = sqlite3.connect(db)
    # back to schema 16, before issue 28: what migrations 17-22 added undone (the view of 19, the kept counts of
    # 22 and the index of 18 first, as they name those columns and replace two indexes), the version set back
    conn.execute("DROP VIEW templates")
    for made in ("TRIGGER job_counts_update", "TRIGGER job_counts_delete", "TABLE job_counts"):
        conn.execute(f"DROP {made}")
    conn.execute("DROP TABLE job_counts_mark")
    conn.execute("CREATE INDEX jobs_status ON jobs (status)")
    conn.execute("CREATE INDEX jobs_site ON jobs (site, status)")
    for col in ("price", "purchase_url", "paid", "hollow"):
        conn.execute(f"ALTER TABLE workflows DROP COLUMN {col}")
    conn.execute("ALTER TABLE listing DROP COLUMN price")
    conn.execute("ALTER TABLE listing DROP COLUMN purchase_url")
    # and what migration 24 (the outbox) made; 23's proxy tables are made only when missing
    for table in ("events", "run_sources", "webhook_endpoints", "deliveries"):
        conn.execute(f"DROP TABLE {table}")
    conn.execute("ALTER TABLE runs DROP COLUMN sources")
    for col in ("memory_mb", "memory_limit_mb"):      # and migration 26's
        conn.execute(f"ALTER TABLE runs DROP COLUMN {col}")
    conn.execute("DROP TABLE browser_sessions")       # and 28's table (29 adds a column to it)
    conn.execute("PRAGMA user_version = 16")
    conn.commit()
    conn.close()
    walk = scraper(site, db, "seed", "--from-search")
    assert walk.exit_code == 0, walk.output
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
    paid = dict(conn.execute("SELECT id, paid FROM workflows"))
    assert None not in paid.values() and sum(paid.values()) == 30 // PAID_EVERY


@pytest.mark.parametrize("graph", [{"connections": {}}, {"nodes": [{"name": "no type"}], "connections": {}}])
def test_a_shapeless_answer_ends_its_job_invalid_shape_and_is_kept_not_stored(make, net, graph):
    from tests.helpers import DETAIL, TID, detail_body, job, workflow

    w, q, clock = make()
    obj = json.loads(detail_body(TID))
    obj["workflow"]["workflow"] = graph
    body = json.dumps(obj).encode()
    net.get(DETAIL, body=body)
    w.step()
    j = job(q)
    assert (j["status"], j["error_kind"]) == ("invalid", "shape")
    assert workflow(q) is None
    kept = q.conn.execute("SELECT kind, version, body FROM answers WHERE key = ?", (str(TID),)).fetchall()
    assert [(k, v) for k, v, _ in kept] == [("rejected", 0)]
    from scraper.mirror import answers
    assert answers.decompress(kept[0][2]) == body


def test_the_standin_drifts_by_default_is_stable_when_sorted_and_serves_paid_templates_hollow(standin):
    import requests

    site = standin(templates=50, rate=0, drift=1, paid_every=PAID_EVERY)

    def ids(query):
        return [i["id"] for i in requests.get(f"{site.url}/api/templates/search?page=1&rows=50{query}",
                                              timeout=10).json()["workflows"]]

    assert ids("") != ids("")                                    # the ranking moves between calls
    oldest = ids("&sort=createdAt:asc")
    assert oldest == ids("&sort=createdAt:asc") == ids("&sort=createdAt:desc")[::-1]
    listed = requests.get(f"{site.url}/api/templates/search?page=1&rows=50&sort=createdAt:asc", timeout=10).json()
    assert [i["createdAt"] for i in listed["workflows"]] == sorted(i["createdAt"] for i in listed["workflows"])
    paid = [i for i in listed["workflows"] if i.get("price")]
    assert len(paid) == 50 // PAID_EVERY and all(i["purchaseUrl"] for i in paid)
    detail = requests.get(f"{site.url}/api/templates/workflows/{paid[0]['id']}", timeout=10).json()
    assert n8n.is_hollow(detail["workflow"]["workflow"])
    free = next(i for i in listed["workflows"] if not i.get("price"))
    assert free["purchaseUrl"] is None
    assert not n8n.is_hollow(requests.get(f"{site.url}/api/templates/workflows/{free['id']}",
                                          timeout=10).json()["workflow"]["workflow"])


@pytest.mark.parametrize("entry", [
    {"price": "19", "purchaseUrl": 5}, {"price": True, "purchaseUrl": ""}, {"price": -3, "purchaseUrl": None},
    {"price": float("nan")}, {"price": [19], "purchaseUrl": {"u": 1}}, {},
])
def test_hostile_price_fields_of_a_listing_entry_read_as_free(entry):
    from scraper.mirror import sync
    assert sync.paid_of(entry) == (None, None, 0)


def test_hostile_created_at_and_nodes_say_nothing_rather_than_raise():
    from scraper.sites.n8n.extract import is_hollow
    assert n8n.in_order([{"createdAt": 5}, {"createdAt": None}, {"createdAt": "2024-01-02"}], "2024-01-01")
    assert not n8n.in_order([{"createdAt": "2024-01-02"}, {"createdAt": "2023-12-31"}])
    # a graph nobody can read is not called hollow: the shape check refuses it (invalid/shape) instead
    for nodes in ([1, "x", None], [{"type": 7, "parameters": "p"}], "nodes", [[]], None):
        assert is_hollow({"nodes": nodes}) is False
    assert is_hollow({"nodes": [1, {"type": "n8n-nodes-base.slack", "parameters": {}}]}) is False
    assert is_hollow({"nodes": [{"type": "n8n-nodes-base.slack", "parameters": {}}]}) is True
