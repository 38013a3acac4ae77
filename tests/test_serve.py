"""`scraper serve` (issue 30): Datasette over the mirror through its in-process client, a real server
process, one page in headless Chromium, and both servers (this and `scraper mcp`) beside a writer."""

import asyncio
import json
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from scraper.db import store
from scraper.db.migrations import MIGRATIONS
from scraper.policy import redact
from scraper.products import browse, lookup, mcpserver
from tests import warm
from tests.helpers import (
    RARE_WORDS,
    SECRETS,
    Plain,
    assert_one_sentence_error,
    count,
    definition_ids,
    invoke,
    round_trip,
    rows,
    scraper_env,
    served_mirror,
    wait_until,
)

pytest.importorskip("datasette", reason="Datasette is an optional extra: pip install 'scraper[serve]'")

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)


@pytest.fixture(scope="module")
def built_mirror(tmp_path_factory):
    db = tmp_path_factory.mktemp("served") / "jobs.db"
    planted, _ = served_mirror(db, copies=5)
    return db, planted


@pytest.fixture
def mirror(built_mirror, tmp_path):
    """(db, planted ids): the served mirror (two templates with planted credentials), each test's own copy of
    one built once for the module (building it is about 2 s of CPU)."""
    built, planted = built_mirror
    db = tmp_path / "jobs.db"
    shutil.copyfile(built, db)
    return db, planted


def get(db, *urls):
    """{url: (status, body)} through Datasette's in-process client (no port)."""
    async def run():
        ds = browse.app(db)
        await ds.invoke_startup()
        return {u: ((r := await ds.client.get(u)).status_code, r.text) for u in urls}
    return asyncio.run(run())


def test_search_facets_and_canned_queries(mirror):
    db, planted = mirror
    found = get(db, f"/jobs/templates.json?_search={RARE_WORDS[0]}&_shape=array",
                "/jobs/templates.json?_size=1", "/jobs/recent_changes.json?_shape=array",
                "/jobs/top_node_types.json?_shape=array", "/jobs/failures.json?_shape=array", "/jobs")
    status, body = found[f"/jobs/templates.json?_search={RARE_WORDS[0]}&_shape=array"]
    assert status == 200 and [t["id"] for t in json.loads(body)] == [planted[0]]
    status, body = found["/jobs/templates.json?_size=1"]
    facets = json.loads(body)["facet_results"]
    assert {"categories", "node_types"} <= set(facets) and facets["node_types"]["results"]
    changes = json.loads(found["/jobs/recent_changes.json?_shape=array"][1])
    assert changes[0]["change"] == "removed" and len(changes) == 22      # 20 added, 1 removed, 1 item
    top = json.loads(found["/jobs/top_node_types.json?_shape=array"][1])
    assert top[0]["templates"] >= top[-1]["templates"] > 0
    assert found["/jobs/failures.json?_shape=array"] == (200, "[]")
    status, page = found["/jobs"]
    assert status == 200 and "templates" in page and "answers" not in page


def urls_of(db, planted):
    """Every kind of URL a visitor could try: each table's and view's page, JSON, CSV and row pages, SQL in
    every form, the canned queries, the file itself."""
    conn = sqlite3.connect(str(db))
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
    conn.close()
    urls = ["/", "/jobs", "/jobs.json", "/jobs.db", "/-/metadata.json", "/-/databases.json", "/jobs/WORKFLOWS.json",
            "/jobs/Answers.json?_shape=array", "/-/permissions", "/jobs/-/query.json?sql=select+1",
            "/dashboard", "/dashboard.json", "/jobs/dashboard_runs.json", "/jobs/dashboard_changes.json"]
    for name in names:
        urls += [f"/jobs/{name}", f"/jobs/{name}.json?_size=max&_shape=array", f"/jobs/{name}.csv?_size=max"]
    for tid in planted:
        urls += [f"/jobs/workflows/{tid}", f"/jobs/workflows/{tid}.json", f"/jobs/templates/{tid}.json",
                 f"/jobs/templates.json?id={tid}&_shape=array", f"/jobs/templates?id={tid}",
                 f"/jobs/answers/n8n,{tid},1,api.json"]
    for sql in ("select workflow from workflows", "select * from answers", "select * from workflows_fts"):
        q = urllib.request.quote(sql)
        urls += [f"/jobs?sql={q}", f"/jobs.json?sql={q}", f"/jobs/templates?sql={q}",
                 f"/jobs/recent_changes.json?sql={q}"]
    urls += ["/jobs/recent_changes", "/jobs/top_node_types", "/jobs/failures",
             "/jobs/templates.json?_size=max&_shape=array&_col=id&_col=workflow&_col=description"]
    return urls


def test_no_served_url_shows_a_planted_credential(mirror):
    db, planted = mirror
    raw = rows(db, "SELECT workflow, description FROM workflows WHERE id = ?", planted[0])[0]
    assert SECRETS["openai"] in raw["workflow"] and SECRETS["github"] in raw["description"]   # kept as served
    answers = get(db, *urls_of(db, planted))
    leaked = [(url, name) for url, (_, body) in answers.items() for name, secret in SECRETS.items() if secret in body]
    assert not leaked
    denied = {u: s for u, (s, _) in answers.items() if s != 200}
    for url in (f"/jobs/workflows/{planted[0]}.json", "/jobs/answers.json?_size=max&_shape=array", "/jobs.db",
                "/jobs.json?sql=select%20workflow%20from%20workflows", "/jobs/workflows_fts"):
        assert denied.get(url) == 403, (url, answers[url][0])
    # what is served is the redacted text: the planted node is there, its key is not
    status, body = answers["/jobs/templates.json?_size=max&_shape=array&_col=id&_col=workflow&_col=description"]
    shown = {t["id"]: t for t in json.loads(body)}
    assert "Planted HTTP" in shown[planted[0]]["workflow"] and redact.MARK in shown[planted[0]]["description"]


def test_search_cannot_spell_out_a_secret_by_prefixes(mirror):
    db, planted = mirror
    prefix = SECRETS["github"][:6] + "*"         # the description's token: in the search index as stored
    conn = sqlite3.connect(str(db))
    assert conn.execute("SELECT rowid FROM workflows_fts WHERE workflows_fts MATCH ?", (prefix,)).fetchall() \
        == [(planted[0],)]
    conn.close()
    for url in (f"/jobs/templates.json?_search={prefix}&_searchmode=raw&_shape=array",
                f"/jobs/templates.json?_search={prefix}&_fts_table=workflows_fts&_searchmode=raw&_shape=array",
                f"/jobs/templates.json?_search_description={prefix}&_searchmode=raw&_shape=array",
                f"/jobs/templates.json?_search={prefix}&_search%6Dode=raw&_shape=array",
                f"/jobs/templates.json?_search={prefix}&%5Fsearchmode=raw&_shape=array"):
        status, body = get(db, url)[url]
        assert status in (200, 400) and not (status == 200 and json.loads(body)), (url, body[:300])


def test_the_view_shows_what_the_export_redacts_and_follows_the_rules_version(mirror):
    db, _ = mirror
    # the view as the last migration that makes it has it (SQLite's text: its PostgreSQL twin is checked by
    # test_postgres' test of the view)
    view = next(m.sqlite for m in reversed(MIGRATIONS) if "CREATE VIEW templates" in m.sqlite)
    # a new rules version needs a new view: the view trusts the verdicts of this version only
    assert view.count(f"clean_at_rules = {redact.RULES_VERSION} ") == 3
    assert view.count(f"AS INTEGER) = {redact.RULES_VERSION}\n") == 3
    stored = {r["id"]: r for r in rows(db, "SELECT * FROM workflows")}
    for r in rows(db, "SELECT id, description, explainer, workflow FROM templates"):
        expected = dict(stored[r["id"]])
        redact.stored(expected)
        for col in redact.COLUMNS:
            if col == "workflow":
                assert json.loads(r[col]) == json.loads(expected[col]), r["id"]
            else:
                assert r[col] == expected[col], (r["id"], col)


def test_mistakes_are_one_sentence(mirror, tmp_path, monkeypatch):
    db, _ = mirror
    assert_one_sentence_error(invoke("--db", "postgresql://scraper@127.0.0.1:9/x", "serve"), "SQLite", "scraper mcp")
    assert_one_sentence_error(invoke("--db", str(tmp_path / "none.db"), "serve"), "no database", "scraper seed")
    assert_one_sentence_error(invoke("--db", str(tmp_path / "none.db"), "mcp"), "no database")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert_one_sentence_error(invoke("--db", str(db), "serve", "--port", str(port)), "cannot listen", str(port))
    monkeypatch.setitem(sys.modules, "datasette", None)        # as if the extras were not installed
    monkeypatch.setitem(sys.modules, "mcp", None)
    assert_one_sentence_error(invoke("--db", str(db), "serve"), "pip install 'scraper[serve]'")
    assert_one_sentence_error(invoke("--db", str(db), "mcp"), "pip install 'scraper[mcp]'")


# --- beside a writer ---------------------------------------------------------------------------------


def test_both_servers_answer_while_a_writer_holds_the_write_lock(mirror):
    db, planted = mirror
    writer = store.connect(str(db))
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE workflows SET total_views = total_views + 1")
    try:
        found = get(db, f"/jobs/templates.json?_search={RARE_WORDS[1]}&_shape=array")
        server = mcpserver.build(str(db), "https://n8n.io")

        async def ask():
            import mcp
            async with mcp.Client(server) as client:
                return (await client.call_tool("get_template", {"id": planted[1], "mode": "full"})).structured_content
        full = asyncio.run(ask())
    finally:
        writer.execute("COMMIT")        # the readers never held it up
        writer.close()
    assert [t["id"] for t in json.loads(found[f"/jobs/templates.json?_search={RARE_WORDS[1]}&_shape=array"][1])] \
        == [planted[1]]
    assert full["id"] == planted[1] and full["workflow"]["nodes"]


def free_port():
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return None, ""


@pytest.fixture
def served(mirror):
    """(db, planted ids, base URL) of a real `scraper serve --port P` process, stopped at the end."""
    db, planted = mirror
    port = free_port()
    proc = warm.Popen([sys.executable, "-m", "scraper", "--db", str(db), "serve", "--port", str(port)],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: proc.poll() is not None or fetch(base + "/-/databases.json")[0] == 200, timeout=60)
        assert proc.poll() is None, proc.stderr.read()
        yield db, planted, base
        proc.send_signal(signal.SIGINT)         # Ctrl-C: the requests in flight end, then one line, 130
        assert proc.wait(30) == 130 and "serve stopped by Ctrl-C." in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_a_server_stops_on_a_signal_with_one_line_and_its_exit_code(served):
    db, _, base = served
    assert fetch(base + "/jobs/templates.json")[0] == 200
    mcp_server = Plain([sys.executable, "-m", "scraper", "--db", str(db), "mcp"])
    answer, _ = mcp_server.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                  "clientInfo": {"name": "plain", "version": "1"}})
    assert answer["result"]["serverInfo"]["name"] == "scraper"
    mcp_server.proc.send_signal(signal.SIGTERM)
    assert mcp_server.proc.wait(30) == 143
    assert "the MCP server stopped by SIGTERM." in mcp_server.proc.stderr.read()


def render(url):
    """The text of the page's results table, as headless Chromium shows it (the system's Chromium)."""
    from playwright.sync_api import sync_playwright

    from scraper.net.chromium import launch_args
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=launch_args())
        try:
            page = browser.new_page()
            page.goto(url, timeout=60_000)
            return page.inner_text("table.rows-and-columns")
        finally:
            browser.close()


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian: apt-get install chromium)")
def test_a_real_server_beside_a_running_run_searches_and_chromium_shows_the_template(served, standin, tmp_path):
    db, planted, base = served
    site = standin(templates=40, rate=50, burst=2)
    with sqlite3.connect(str(db)) as conn:     # the mirror was seeded from this site (the run checks it)
        conn.execute("UPDATE source SET api_url = ?, site_url = ?", (site.api_url, site.url))
    conn.close()
    known = {r["id"] for r in rows(db, "SELECT id FROM workflows")}
    ids = tmp_path / "ids.txt"
    ids.write_text("".join(f"{i}\n" for i in site.corpus()["ids"] if i not in known))
    env = scraper_env(site, db)
    warm.run([sys.executable, "-m", "scraper", "seed", "--ids", str(ids)], env=env, check=True,
             capture_output=True)
    before = count(db, "SELECT COUNT(*) FROM workflows")
    run = warm.Popen([sys.executable, "-m", "scraper", "run", "--workers", "1", "--rate", "4", "--burst", "1",
                      "--no-transcripts"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: count(db, "SELECT COUNT(*) FROM workflows") > before, timeout=60)   # it writes
        status, body = fetch(f"{base}/jobs/templates.json?_search={RARE_WORDS[0]}&_shape=array")
        assert status == 200 and [t["id"] for t in json.loads(body)] == [planted[0]]
        assert not [name for name, secret in SECRETS.items() if secret in body]
        name = rows(db, "SELECT name FROM workflows WHERE id = ?", planted[0])[0]["name"]
        shown = render(f"{base}/jobs/templates?_search={RARE_WORDS[0]}")
        assert name in shown
        lines = round_trip(db, planted[0])
        assert not [name for name, secret in SECRETS.items() for line in lines if secret in line]
    finally:
        out, err = run.communicate(timeout=300)
    assert run.returncode == 0, err[-2000:]
    assert count(db, "SELECT COUNT(*) FROM workflows") > before


def test_the_mcp_tools_and_the_templates_view_agree_on_a_template(mirror):
    db, planted = mirror
    conn = store.read_only(str(db), 5)
    try:
        full = lookup.get_template(conn, "https://n8n.io", planted[0], "full")
        viewed = conn.execute("SELECT url, name, workflow FROM templates WHERE id = ?", (planted[0],)).fetchone()
    finally:
        conn.close()
    assert full["url"] == viewed["url"] and full["name"] == viewed["name"]
    assert full["workflow"]["nodes"] == json.loads(viewed["workflow"])["nodes"]


def test_paid_is_a_facet_and_a_canned_query(mirror):
    db, _ = mirror
    sold = definition_ids()[2]
    found = get(db, "/jobs/templates.json?_size=1", "/jobs/paid_templates.json?_shape=array",
                "/jobs/templates.json?paid=1&_shape=array&_col=id&_col=price&_col=purchase_url")
    facets = json.loads(found["/jobs/templates.json?_size=1"][1])["facet_results"]
    assert {r["value"]: r["count"] for r in facets["paid"]["results"]}[1] == 1
    assert [r["id"] for r in json.loads(found["/jobs/paid_templates.json?_shape=array"][1])] == [sold]
    assert json.loads(found["/jobs/templates.json?paid=1&_shape=array&_col=id&_col=price&_col=purchase_url"][1]) \
        == [{"id": sold, "price": 19.0, "purchase_url": "https://shop.test/template"}]
