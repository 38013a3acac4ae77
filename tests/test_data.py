"""The data, ready to use (issue 10): search, stats, redaction, CSV cell limit, --columns, Parquet, the
run report. The pure parts in-process; the rest on a library scraped from the stand-in by real processes."""

import csv
import gzip
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

import pytest
from click.testing import CliRunner

from scraper import cli
from scraper.db import runrecord, store
from scraper.policy import redact
from scraper.products import export, report, search
from scraper.sites import n8n
from scripts.standin import client
from scripts.standin.corpus import load_json
from tests.helpers import (
    FIXTURES,
    NOWHERE,
    SECRETS,
    definition_ids,
    detail_body,
    in_process,
    planted_workflow,
    rows,
    scraper,
)

ERROR_LINE = re.compile(r"^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} )?Error: (.*)$")   # timestamped, as every CLI line


def invoke(db, *args):
    return CliRunner().invoke(cli.main, ["--db", str(db), *args])


def one_sentence_error(result, *words):
    assert result.exit_code == 2, (result.output, result.exception)
    assert "Traceback" not in result.output
    errors = [m.group(1) for m in map(ERROR_LINE.match, result.output.splitlines()) if m]
    assert len(errors) == 1 and errors[0].endswith("."), result.output
    for word in words:
        assert word in errors[0], errors[0]


@pytest.fixture
def small_db(tmp_path):
    """Five real templates stored the way the worker stores them."""
    db = tmp_path / "jobs.db"
    conn = store.open_db(str(db))
    for template_id in definition_ids()[:5]:
        store.upsert(conn, "workflows", n8n.extract(detail_body(template_id), "2026-01-02T03:04:05+00:00"), "id")
    conn.close()
    return db


# --- redaction (pure) --------------------------------------------------------------------------------



def test_redaction_replaces_every_planted_kind_and_leaves_references_alone():
    wf = planted_workflow({"nodes": []})
    before = json.dumps(wf)
    clean, n = redact.value(wf)
    assert json.dumps(wf) == before                           # the input is left as it was
    text = json.dumps(clean)
    for name, secret in SECRETS.items():
        assert secret not in text, name
    params = clean["nodes"][0]["parameters"]
    assert params["headerParameters"]["parameters"][0]["value"] == "Bearer " + redact.MARK
    assert params["headerParameters"]["parameters"][2]["value"] == "application/json"
    assert params["url"] == f"https://bot:{redact.MARK}@hooks.planted.test/v1?api_key={redact.MARK}"
    assert params["reference"] == "={{ $env.OPENAI_API_KEY }}" and params["placeholder"] == "YOUR_API_KEY"
    assert clean["pinData"] == {}
    # url: password + query key; apiKey; 2 headers; jsonBody: slack + jwt; the note's token; 1 pinned node
    assert n == 2 + 1 + 2 + 2 + 1 + 1


@pytest.mark.parametrize("harmless", [
    "Bearer $REPLICATE_API_TOKEN", "Name: Authorization, Value: Apikey YOUR_API_KEY_HERE",
    "the basic workflow-automation guide", "https://x.test/?key={{ $json.key }}", "maxTokens: 500",
    "postgres://user:{{ $env.PGPASSWORD }}@db.test/x", "sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxx",
])
def test_redaction_leaves_prose_expressions_and_placeholders(harmless):
    assert redact.text(harmless) == (harmless, 0)


def test_a_long_csv_cell_is_cut_within_the_limit_with_a_visible_mark():
    short = "x" * 100
    assert export.fit_cell(short) == (short, False)
    # emoji are two UTF-16 units each, which is what a spreadsheet counts
    long = "😀" * 20_000
    cell, cut = export.fit_cell(long)
    assert cut and len(cell.encode("utf-16-le")) // 2 <= export.CSV_CELL_MAX
    assert cell.startswith("😀" * 100) and cell.endswith("for the whole value]") and "more characters" in cell


# --- search index, in-process ------------------------------------------------------------------------

def fts_rows(conn):
    return {r[0]: tuple(r[1:]) for r in conn.execute(
        "SELECT rowid, name, description, node_types, categories, author FROM workflows_fts")}


def test_the_index_follows_every_write_to_workflows(small_db):
    conn = store.open_db(str(small_db))
    ids = [r[0] for r in conn.execute("SELECT id FROM workflows ORDER BY id")]
    assert set(fts_rows(conn)) == set(ids)
    # an upsert of a changed row (the worker's path) replaces the indexed text
    row = n8n.extract(detail_body(ids[0]), "x")
    row["name"] = "Zebracorn invoice sorter"
    store.upsert(conn, "workflows", row, "id")
    assert [r["id"] for r in search.query(conn, "zebracorn")] == [ids[0]]
    # any other writer too: a plain UPDATE, a DELETE
    conn.execute("UPDATE workflows SET description = 'quokka ledger' WHERE id = ?", (ids[1],))
    assert [r["id"] for r in search.query(conn, "quokka")] == [ids[1]]
    conn.execute("DELETE FROM workflows WHERE id = ?", (ids[2],))
    assert ids[2] not in fts_rows(conn)
    # a rebuild gives exactly what the triggers kept
    kept = fts_rows(conn)
    assert search.rebuild(conn) == len(ids) - 1
    assert fts_rows(conn) == kept
    conn.close()


def test_the_migration_indexes_rows_stored_before_it(tmp_path):
    db = str(tmp_path / "old.db")
    conn = store.connect(db)
    store.migrate(conn, 1)
    row = n8n.extract(detail_body(definition_ids()[0]), "x")
    row.pop("hollow")       # schema 17's column
    # as the code of schema 1 wrote it (store.upsert now writes columns that schema has not)
    conn.execute(f"INSERT INTO workflows ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values()))
    store.migrate(conn)
    hits = search.query(conn, json.loads(row["node_types"])[0].rsplit(".", 1)[1])
    assert [h["id"] for h in hits] == [row["id"]]
    conn.close()


@pytest.mark.parametrize("bad", ['"unclosed', "n8n-nodes-base.slack", "nosuchcolumn:word", "AND", "   "])
def test_a_bad_query_is_one_sentence(small_db, bad):
    one_sentence_error(invoke(small_db, "search", bad), "query")


def test_search_json_has_id_name_snippet_rank_best_first(small_db):
    result = invoke(small_db, "search", "--json", "--limit", "3", "openai OR telegram OR gmail")
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert 0 < len(found) <= 3
    assert all({"id", "name", "snippet", "rank"} <= set(r) for r in found)
    assert [r["rank"] for r in found] == sorted(r["rank"] for r in found)
    assert all(search.MARK_START in r["snippet"] for r in found)


# --- export options, in-process ---------------------------------------------------------------------

@pytest.mark.parametrize("fmt", export.FORMATS)
def test_unknown_columns_are_one_sentence_in_every_format(small_db, tmp_path, fmt):
    one_sentence_error(invoke(small_db, "export", "--format", fmt, "--columns", "id,nmae",
                              "--output", str(tmp_path / "x.out")), "nmae", "the columns are")
    assert not (tmp_path / "x.out").exists()


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv"])
def test_columns_choose_and_order_the_fields(small_db, fmt):
    result = invoke(small_db, "export", "--format", fmt, "--columns", "quality_score,id")
    assert result.exit_code == 0, result.output
    out = result.stdout
    if fmt == "csv":
        got = list(csv.reader(io.StringIO(out)))
        assert got[0] == ["quality_score", "id"] and len(got) == 6
    else:
        items = [json.loads(line) for line in out.splitlines()] if fmt == "jsonl" else json.loads(out)
        assert [list(i) for i in items] == [["quality_score", "id"]] * 5


def test_parquet_without_pyarrow_says_how_to_install_it(small_db, tmp_path):
    code = ("import sys; sys.modules['pyarrow'] = None; sys.modules['pyarrow.parquet'] = None; "
            "from scraper.cli import main; main()")
    out = tmp_path / "w.parquet"
    done = subprocess.run([sys.executable, "-c", code, "--db", str(small_db), "export", "--format", "parquet",
                           "--output", str(out)], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "pip install 'scraper[parquet]'" in done.stderr
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".export-")]


# --- a scraped stand-in library -----------------------------------------------------------------------

PLANTED_DEFINITIONS = (0, 7)        # the fixture definitions that carry planted credentials


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """A stand-in library of 120 templates (some with planted credentials, some faults), scraped by a real
    `scraper run`; yields (site, db)."""
    folder = tmp_path_factory.mktemp("library")
    data = folder / "data"
    shutil.copytree(FIXTURES, data)
    definitions = load_json(data, "workflow_definitions_20.json")
    for k in PLANTED_DEFINITIONS:
        definitions[k]["workflow"] = planted_workflow(definitions[k]["workflow"])
    with gzip.open(data / "workflow_definitions_20.json.gz", "wt", encoding="utf-8") as f:
        json.dump(definitions, f)
    site = client.start(templates=120, rate=200, burst=20, faults="503:0.05,404:0.03", seed=5, data_dir=data)
    db = folder / "jobs.db"
    # a module fixture is set up before the autouse safe_env: point every other host at a closed port here
    closed = {"SCRAPER_YOUTUBE_URL": NOWHERE}
    try:
        in_process(site, db, "seed", "--from-search", "--rate", "200", "--burst", "20", check=0, env=closed)
        scraper(site, db, "run", "--workers", "2", "--rate", "100", "--burst", "10", "--backoff-base", "0.05",
                "--no-transcripts", check=0, env=closed)
        yield site, db
    finally:
        site.stop()


def stored(db):
    return {r["id"]: r for r in rows(db, "SELECT * FROM workflows ORDER BY id")}


def cli_json(site, db, *args):
    done = scraper(site, db, *args, check=0)
    return json.loads(done.stdout)


@pytest.mark.slow
def test_search_finds_templates_by_name_description_and_node_types(library):
    site, db = library
    workflows = stored(db)
    def words(text):
        return re.findall(r"[A-Za-z]{6,}", text or "")

    described = [i for i, w in workflows.items() if words(w["name"]) and words(w["description"])]
    assert len(described) >= 20
    for template_id in described[:: len(described) // 5]:
        w = workflows[template_id]
        for column in ("name", "description"):
            word = words(w[column])[-1]
            found = cli_json(site, db, "search", f"{column}:{word}", "--json", "--limit", "500")
            assert template_id in [f["id"] for f in found], (column, word)
            assert all(search.MARK_START in f["snippet"] for f in found)
    # node types: every template whose node types include a Telegram node, and only those
    expected = {i for i, w in workflows.items() if any(t.endswith(".telegram") for t in json.loads(w["node_types"]))}
    assert expected
    found = cli_json(site, db, "search", "node_types:telegram", "--json", "--limit", "1000")
    assert {f["id"] for f in found} == expected
    assert all(f"{search.MARK_START}telegram" in f["snippet"].lower() for f in found)
    # a re-extraction rewrites every row: the index follows it, and equals one made from scratch
    in_process(site, db, "reextract", check=0)
    conn = store.connect(str(db))
    kept = fts_rows(conn)
    assert len(kept) == len(workflows) and search.rebuild(conn) == len(workflows) and fts_rows(conn) == kept
    conn.close()


@pytest.mark.slow
def test_stats_counts_node_types_per_template_exactly(library):
    site, db = library
    report = cli_json(site, db, "stats", "--json")
    ids = list(stored(db))
    # what the site served, counted independently: each template once per node type it uses
    per_type = Counter()
    for template_id in ids:
        served = site.template(template_id)["workflow"]
        per_type.update({node["type"] for node in served["workflow"]["nodes"]})
    expected = sorted(({"type": t, "templates": n} for t, n in per_type.items()),
                      key=lambda x: (-x["templates"], x["type"]))
    assert report["node_types"] == expected
    assert report["templates"] == len(ids)
    assert sum(m["templates"] for m in report["created_per_month"]) + report["created_unknown"] == len(ids)
    assert sum(b["templates"] for b in report["quality_score"]["histogram"]) == report["quality_score"]["scored"]
    assert report["transcripts"]["videos_with_transcript"] == 0     # the run was --no-transcripts
    text = in_process(site, db, "stats", check=0).stdout
    assert expected[0]["type"] in text and "quality score" in text


@pytest.mark.slow
def test_planted_credentials_export_redacted_by_default_and_as_stored_with_no_redact(library, tmp_path):
    site, db = library
    workflows = stored(db)
    carriers = {i for i, w in workflows.items() if SECRETS["openai"] in (w["workflow"] or "")}
    assert len(carriers) >= 4                      # the database keeps the answers as served
    for fmt, more in (("jsonl", ()), ("json", ()), ("csv", ("--columns", "id,workflow,explainer")),
                      ("parquet", ())):
        out = tmp_path / f"w.{fmt}"
        done = in_process(site, db, "export", "--format", fmt, "--output", str(out), *more, check=0)
        counted = re.search(r"redacted (\d+) value\(s\) in (\d+) workflow\(s\)", done.stderr)
        assert counted and int(counted.group(1)) >= 10 * len(carriers), done.stderr
        assert int(counted.group(2)) >= len(carriers)
        content = out.read_bytes().decode("utf-8", "replace") if fmt != "parquet" else parquet_text(out)
        for name, secret in SECRETS.items():
            assert secret not in content, (fmt, name)
        assert redact.MARK in content
    # --no-redact: every row exactly as stored
    out = tmp_path / "raw.jsonl"
    done = in_process(site, db, "export", "--format", "jsonl", "--no-redact", "--output", str(out), check=0)
    assert "not redacted" in done.stderr
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["workflow"] for g in got] == [json.loads(w["workflow"]) for w in workflows.values()]
    assert [g["explainer"] for g in got] == [w["explainer"] for w in workflows.values()]
    assert stored(db) == workflows                 # exporting changed nothing in the database


def parquet_text(path):
    pq = pytest.importorskip("pyarrow.parquet")
    return json.dumps(pq.read_table(path).to_pylist(), default=str)


@pytest.mark.slow
def test_every_csv_cell_fits_a_spreadsheet(library, tmp_path):
    site, db = library
    conn = store.connect(str(db))
    every = ",".join(export.table_columns(conn))
    conn.close()
    for more in ((), ("--columns", every)):
        out = tmp_path / "w.csv"
        done = in_process(site, db, "export", "--format", "csv", "--output", str(out), *more, check=0)
        cells = [c for row in csv.reader(io.StringIO(out.read_text(encoding="utf-8"), newline="")) for c in row]
        assert max(len(c.encode("utf-16-le")) // 2 for c in cells) <= export.CSV_CELL_MAX
        if more:   # the whole workflow JSON of some templates is longer: cut, and marked
            marked = [c for c in cells if c.endswith("for the whole value]")]
            assert marked and f"{len(marked)} CSV cell(s)" in done.stderr
        else:
            assert "workflow" not in next(csv.reader(io.StringIO(out.read_text())))


@pytest.mark.slow
def test_parquet_round_trips_every_row(library, tmp_path, monkeypatch):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from scraper.products import parquet

    site, db = library
    monkeypatch.setattr(parquet, "ROW_GROUP_ROWS", 25)        # several row groups from a small library
    out = tmp_path / "w.parquet"
    result = invoke(db, "export", "--format", "parquet", "--no-redact", "--output", str(out))
    assert result.exit_code == 0, result.output
    f = pq.ParquetFile(out)
    assert f.metadata.num_row_groups > 1
    assert f.schema_arrow.field("node_types").type == pa.list_(pa.string())
    assert f.schema_arrow.field("created_at").type == pa.timestamp("ms", tz="UTC")
    assert f.schema_arrow.field("quality_score").type == pa.int64()
    got = f.read().to_pylist()
    workflows = list(stored(db).values())
    assert len(got) == len(workflows)
    for g, w in zip(got, workflows, strict=True):
        for col, value in w.items():
            if col in (export.VERDICT, export.SAVED):
                assert col not in g         # bookkeeping, never exported
            elif col in parquet.TIMESTAMPS:
                assert g[col] == parquet._timestamp(value), col
            elif col == "page_og":
                assert (None if value is None else list(json.loads(value).items())) == g[col]
            elif col in export.JSON_COLUMNS and col != "workflow":
                assert g[col] == json.loads(value), col
            else:
                assert g[col] == value, col


@pytest.mark.slow
def test_the_run_records_every_request_it_sends(library):
    site, db = library
    served = site.stats()
    logged = Counter(r["kind"] for r in rows(db, "SELECT kind FROM requests WHERE run_id IS NOT NULL"))
    # the run's rows: every detail request it sent
    assert sum(logged.values()) == served["by_kind"]["detail"]
    assert logged["ok"] == len(stored(db))
    assert logged["http_5xx"] == sum(n for s, n in served["by_status"].items() if s.startswith("5"))
    # the seed's walk sends through the same polite client, so its requests (robots.txt, the search pages) are
    # logged too, without a run
    walk = Counter(r["kind"] for r in rows(db, "SELECT kind FROM requests WHERE run_id IS NULL"))
    assert sum(walk.values()) == served["by_kind"].get("search", 0) + served["by_kind"].get("robots", 0) >= 1


@pytest.mark.slow
def test_the_report_is_one_self_contained_page(library, tmp_path):
    site, db = library
    out = tmp_path / "report.html"
    done = in_process(site, db, "report", "--output", str(out), check=0)
    assert "wrote the report" in done.stderr
    page = out.read_text()
    # nothing to fetch: no external script, style, image, font or frame
    assert not re.search(r"<(?:script|img|iframe|link)[^>]+(?:src|href)=", page, re.I)
    assert "url(" not in page and "@import" not in page
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>',
                                page, re.S).group(1))
    assert data["run"]["done_in_run"] == len(stored(db)) and data["runs"][0]["requests"] > 0
    one_sentence_error(invoke(db, "report", "--output", str(tmp_path / "r.html"), "--run", "99"), "no run 99")


CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian: apt-get install chromium); "
                                             "the report's charts cannot be checked in a browser")
@pytest.mark.timing
@pytest.mark.chromium
def test_the_report_renders_its_charts_in_headless_chromium(library, tmp_path):
    site, db = library
    out = tmp_path / "report.html"
    in_process(site, db, "report", "--output", str(out), check=0)
    conn = store.connect(str(db))
    data = report.gather(conn, 0)
    conn.close()
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                               "--no-first-run", "--disable-background-networking", "--disable-component-update",
                               "--disable-sync", f"--user-data-dir={profile}", "--dump-dom", out.as_uri()],
                              capture_output=True, text=True, timeout=120)
    dom = done.stdout
    assert 'data-drawn="yes"' in dom, done.stderr[-2000:]
    marks = dict(re.findall(r'<div class="chart" id="(chart-[a-z]+)" data-marks="(\d+)"', dom))
    run = data["run"]
    assert marks == {
        "chart-done": str(len(run["t"])), "chart-rate": str(len(run["t"])),
        "chart-errors": str(len(run["errors"])), "chart-latency": str(sum(1 for n in run["latency"] if n)),
        "chart-quality": str(sum(1 for b in data["quality"]["histogram"] if b["templates"])),
        "chart-nodes": str(min(report.TOP_NODE_TYPES, data["node_types_total"])), "chart-runs": "1",
    }
    assert all(int(n) > 0 for n in marks.values())
    # the drawn marks themselves: one bar per node type, the limit line, the cumulative line
    nodes = re.search(r'id="chart-nodes".*?</svg>', dom, re.S).group(0)
    assert nodes.count('class="bar"') == int(marks["chart-nodes"])
    assert data["node_types"][0]["type"] in nodes
    rate = re.search(r'id="chart-rate".*?</svg>', dom, re.S).group(0)
    assert 'class="limit"' in rate and 'class="line"' in rate


# --- request log and report, in-process -----------------------------------------------------------------

def test_the_request_log_records_answers_and_failures_and_never_fails_a_request(tmp_path):
    from scraper.base.errors import FetchError
    from scraper.db import requestlog

    conn = store.open_db(str(tmp_path / "jobs.db"))
    with requestlog.timed(conn, "n8n.io", clock=lambda: 100.0):
        pass
    with pytest.raises(FetchError), requestlog.timed(conn, "n8n.io", clock=lambda: 101.0):
        raise FetchError("http_5xx", "HTTP 503", status=503)
    assert [tuple(r) for r in conn.execute("SELECT at, domain, kind, status FROM requests ORDER BY at")] == [
        (100.0, "n8n.io", "ok", None), (101.0, "n8n.io", "http_5xx", 503)]
    conn.execute("DROP TABLE requests")        # a log that cannot be written costs nothing but a warning
    with requestlog.timed(conn, "n8n.io"):
        pass
    conn.close()


def test_a_report_without_any_run_still_renders(small_db, tmp_path):
    out = tmp_path / "r.html"
    result = invoke(small_db, "report", "--output", str(out))
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert "No run recorded yet" in page and 'id="chart-nodes"' in page
    conn = store.connect(str(small_db))
    data = report.gather(conn, 0)
    conn.close()
    assert data["run"] is None and data["templates"] == 5 and data["node_types"]


def test_the_rate_chart_counts_the_sites_domain_against_its_limit_and_the_history_counts_all(small_db):
    conn = store.connect(str(small_db))
    conn.execute("INSERT INTO runs (pid, started_at, finished_at, workers, settings) VALUES (1, 1000, 1010, 2, ?)",
                 (json.dumps({"site_url": "https://n8n.io", "rate_per_s": 2.0, "burst": 5, "limiter": True}),))
    for i in range(10):
        conn.execute("INSERT INTO requests (at, domain, kind, status, ms, run_id) "
                     "VALUES (?, 'n8n.io', 'ok', NULL, 40, 1)", (1000.5 + i,))
    for i in range(6):
        conn.execute("INSERT INTO requests (at, domain, kind, status, ms, run_id) "
                     "VALUES (?, 'youtube.com', 'ok', NULL, 90, 1)", (1000.5 + i,))
    data = report.gather(conn, 2000)
    conn.close()
    run = data["run"]
    assert run["domain"] == "n8n.io" and run["rate_per_s"] == 2.0
    assert round(sum(run["request_rate"]) * run["bucket_s"]) == 10     # youtube.com has its own budget
    assert data["runs"][0]["requests"] == 16 and sum(run["latency"]) == 16


def test_a_killed_run_is_killed_in_the_report_and_names_the_run_that_resumed_it(tmp_path):
    """It stayed "running or crashed" for good, though the next run had finished its work (issue 46)."""
    conn = store.open_db(str(tmp_path / "jobs.db"))
    killed = runrecord.start_run(conn, 1, 1000.0, 2, "{}")             # its heartbeat stopped at its start
    resumed = runrecord.start_run(conn, 2, 2000.0, 2, "{}")
    runrecord.finish_run(conn, resumed, 2100.0, {"done": 5, "failed": 0, "invalid": 0}, 0)
    running = runrecord.start_run(conn, 3, 2950.0, 2, "{}")            # beating at `now`
    killed_last = runrecord.start_run(conn, 4, 1500.0, 2, "{}")
    data = report.gather(conn, 2960.0)
    conn.close()
    by_id = {r["id"]: r for r in data["runs"]}
    assert [(by_id[i]["state"], by_id[i]["resumed_by"]) for i in (killed, resumed, running)] == [
        ("killed", resumed), ("finished", None), ("running", None)]
    assert by_id[killed_last]["state"] == "killed" and by_id[killed_last]["resumed_by"] is None
    table = report.render(data)
    assert f"killed; run {resumed} resumed it" in table and "<td>running</td>" in table
    assert "killed; the next run resumes it" in table and "running or crashed" not in table


def test_text_from_the_site_cannot_break_out_of_the_reports_data(small_db, tmp_path):
    conn = store.connect(str(small_db))
    hostile = '</script><script>document.title="pwned"</script><!--'
    conn.execute("UPDATE workflows SET node_types = ? WHERE id = (SELECT MIN(id) FROM workflows)",
                  (json.dumps([hostile]),))
    conn.close()
    out = tmp_path / "r.html"
    assert invoke(small_db, "report", "--output", str(out)).exit_code == 0
    page = out.read_text()
    assert hostile not in page and "<!--" not in page
    data = json.loads(re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1))
    assert hostile in [n["type"] for n in data["node_types"]]


def test_transcripts_are_searchable_and_nested_in_parquet(small_db, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    conn = store.open_db(str(small_db))
    template_id = conn.execute("SELECT MIN(id) FROM workflows").fetchone()[0]
    # the links and the transcript arrive after the template, as a run writes them
    conn.execute("UPDATE workflows SET videos = ? WHERE id = ?", (json.dumps(["vid00000001"]), template_id))
    conn.execute("INSERT INTO template_videos VALUES (?, 'vid00000001')", (template_id,))
    assert search.query(conn, "capybara") == []
    conn.execute("INSERT INTO transcripts VALUES ('vid00000001', 'en', 1, 'a capybara explains webhooks', '[]', 't')")
    found = search.query(conn, "capybara")
    assert [f["id"] for f in found] == [template_id] and "«capybara»" in found[0]["snippet"]
    assert search.query(conn, "transcripts:webhooks")[0]["id"] == template_id
    conn.close()
    out = tmp_path / "w.parquet"
    assert invoke(small_db, "export", "--format", "parquet", "--output", str(out)).exit_code == 0
    got = {r["id"]: r["transcripts"] for r in pq.read_table(out, columns=["id", "transcripts"]).to_pylist()}
    assert got[template_id] == [{"video_id": "vid00000001", "language_code": "en", "is_generated": True,
                                 "text": "a capybara explains webhooks"}]
    assert sum(map(len, got.values())) == 1
