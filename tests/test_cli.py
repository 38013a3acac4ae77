"""The click commands in-process (CliRunner), then what is really in the database and on disk."""

import csv
import fcntl
import io
import json
import os
import subprocess
import sys
import time

import pytest
import responses
from click.testing import CliRunner

from scraper import cli
from scraper.base import settings
from scraper.base.errors import ConfigError
from scraper.db import store
from scraper.db.queue import Queue
from scraper.policy import breaker
from scraper.sites import n8n
from tests.conftest import ANY_ROBOTS
from tests.helpers import (
    API,
    SITE,
    STAMPED_ERROR,
    assert_one_sentence_error,
    count,
    definition_ids,
    detail_body,
    invoke,
    run_on_a_terminal,
    search_items,
    search_page,
)


def files_in(folder):
    return sorted(os.listdir(folder))


# --- help ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [[], ["seed"], ["run"], ["status"], ["retry"], ["failures"], ["export"],
                                     ["refresh"], ["changes"], ["history"], ["reextract"], ["search"], ["stats"],
                                     ["report"]])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_command_has_help_with_an_example(command, flag):
    result = CliRunner().invoke(cli.main, [*command, flag])
    assert result.exit_code == 0
    assert "Example" in result.output
    assert "scraper " in result.output.split("Example", 1)[1]


def test_every_commands_help_starts_cold_in_a_new_interpreter(tmp_path):
    """`python -m scraper CMD --help`, one new interpreter per command (the rest of the suite forks its
    commands from a warm process that has imported every module: a command that imports only when another
    has imported first shows only here). Started side by side; each exits 0 with its Example."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPER_")}
    procs = {name: subprocess.Popen([sys.executable, "-m", "scraper", name, "--help"], cwd=tmp_path, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in sorted(cli.COMMANDS)}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and not err, (name, err[-2000:])
        assert f"Usage: scraper {name} " in out and "Example" in out, name
    assert set(procs) == set(cli.main.list_commands(None)) and len(procs) >= 20


def test_version():
    result = CliRunner().invoke(cli.main, ["--version"])
    assert result.exit_code == 0 and "scraper" in result.output and cli.__version__ in result.output


# --- bad inputs: exit 2, one sentence, nothing on disk --------------------------------------------

def test_at_a_terminal_an_error_is_one_plain_sentence_and_a_pipe_keeps_the_timestamp(tmp_path):
    """Timestamps belong in logs: at a terminal a usage error was three stamped lines (usage, hint, error)."""
    env = {**os.environ, "SCRAPER_DB": str(tmp_path / "jobs.db")}
    for args, sentence in ((["run", "--bogus"], "Error: No such option '--bogus' (did you mean one of: '--burst', "
                                                "'--robots'?); `scraper run --help` shows what it takes."),
                           (["status"], f"Error: there is no database at {tmp_path / 'jobs.db'}; run `scraper seed` "
                                        f"first.")):
        code, shown = run_on_a_terminal(args, env)
        assert (code, shown) == (2, sentence + "\r\n")
    piped = CliRunner().invoke(cli.main, ["run", "--bogus"])
    assert piped.exit_code == 2 and len(piped.output.splitlines()) == 3
    assert all(STAMPED_ERROR.match(line) for line in piped.output.splitlines() if "Error" in line)


@pytest.mark.parametrize("args, words", [
    (["run", "--workers", "0"], ["workers", "--workers", "1 or more"]),
    (["run", "--rate", "0"], ["--rate"]),
    (["run", "--rate", "-1"], ["--rate"]),
    (["run", "--burst", "0"], ["--burst"]),
    (["run", "--memory-limit", "10"], ["memory_limit", "too small"]),
    (["run", "--memory-limit", "100", "--workers", "8"], ["memory_limit", "8 workers"]),
    (["run", "--max-attempts", "0"], ["--max-attempts"]),
    (["run", "--timeout", "0"], ["--timeout"]),
    (["export", "--format", "xml"], ["xml"]),
    (["seed", "--source", "nope"], ["--source nope", "no such source"]),   # issue 16: a bare seed walks
    (["seed", "--from-search", "--ids", "ids.txt"], ["at most one"]),
    (["seed", "--source", "n8n", "--ids", "ids.txt"], ["at most one"]),
    (["seed", "--ids", "missing.txt"], ["missing.txt", "does not exist"]),
    (["seed", "--ids", "missing.txt", "--limit", "5"], ["--limit"]),
    (["status"], ["no database"]),
    (["retry"], ["no database"]),
    (["export", "--format", "json"], ["no database"]),
])
def test_bad_input_exits_2_with_one_sentence_and_creates_nothing(tmp_path, db, monkeypatch, args, words):
    monkeypatch.chdir(tmp_path)
    before = files_in(tmp_path)
    result = invoke(*args, db=db)
    assert_one_sentence_error(result, *words)
    assert not db.exists()
    assert files_in(tmp_path) == before


def test_a_db_in_a_missing_folder(tmp_path):
    result = invoke("run", db="/no/such/folder/jobs.db")
    assert_one_sentence_error(result, "/no/such/folder", "does not exist")
    assert not os.path.exists("/no/such/folder")


def test_a_db_path_that_is_a_folder(tmp_path):
    assert_one_sentence_error(invoke("status", db=tmp_path), "folder")


@pytest.mark.parametrize("args", [["run"], ["status"], ["seed", "--ids", "ids.txt"], ["retry"],
                                  ["export", "--format", "csv"]])
def test_a_db_that_is_a_text_file(tmp_path, db, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ids.txt").write_text("1\n")
    db.write_text("id,name\n1,not a database\n")
    before = files_in(tmp_path)
    assert_one_sentence_error(invoke(*args, db=db), "not a SQLite database")
    assert db.read_text() == "id,name\n1,not a database\n"
    assert files_in(tmp_path) == before


@pytest.mark.parametrize("args", [["seed", "--ids", "ids.txt"], ["run"], ["status"], ["retry"],
                                  ["export", "--format", "csv"]])
def test_a_corrupt_sqlite_file(tmp_path, db, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ids.txt").write_text("1\n")
    damaged = b"SQLite format 3\x00" + bytes(range(256)) * 8
    db.write_bytes(damaged)
    before = files_in(tmp_path)
    assert_one_sentence_error(invoke(*args, db=db), str(db))
    assert db.read_bytes() == damaged
    assert files_in(tmp_path) == before


def test_an_infinite_rate_is_refused():
    # `run --rate inf` would pass click's float type; each worker's limiter then dies on Rate(4, 0 ms)
    with pytest.raises(ConfigError, match="the setting rate is inf"):
        settings.build(db_path="jobs.db", api_url=API, site_url=SITE, rate_per_s=float("inf"))


def test_export_to_a_missing_folder(db, tmp_path):
    store.open_db(str(db)).close()
    before = files_in(tmp_path)
    assert_one_sentence_error(invoke("export", "--format", "csv", "--output", "/no/such/dir/x.csv", db=db),
                              "/no/such/dir", "does not exist")
    assert not os.path.exists("/no/such/dir")
    assert files_in(tmp_path) == before


# --- seed --ids ----------------------------------------------------------------------------------

IDS_OK = "1205\nhttps://n8n.io/workflows/1205-some-slug/\n\n# a comment\nhttps://www.n8n.io/workflows/77\n  42  \n"


@pytest.fixture
def no_network():
    with responses.RequestsMock() as rsps:     # any request would raise
        yield rsps


def test_seed_ids_with_bad_lines_names_each_and_seeds_nothing(tmp_path, db, no_network):
    assert invoke("seed", "--ids", _ids(tmp_path, "3\n"), db=db, site="https://n8n.io").exit_code == 0
    bad = "1205\nnot-an-id\nhttps://n8n.io/workflows/9-x/\nhttps://example.com/workflows/5\n0\n# fine\n7\nhttps://n8n.io/blog/x\n"
    result = invoke("seed", "--ids", _ids(tmp_path, bad, "bad.txt"), db=db, site="https://n8n.io")
    message = assert_one_sentence_error(result, "nothing was seeded")
    for line in (2, 4, 5, 8):
        assert f"line {line}:" in message
    for line in (1, 3, 6, 7):
        assert f"line {line}:" not in message
    assert count(db) == 1


def test_seed_ids_seeds_ids_and_urls_then_reports_them_known(tmp_path, db, no_network):
    path = _ids(tmp_path, IDS_OK)
    result = invoke("seed", "--ids", path, db=db, site="https://n8n.io")
    assert result.exit_code == 0, result.output
    assert "seeded 3 new job(s); 0 already known." in result.output
    conn = store.connect(str(db))
    jobs = [tuple(r) for r in conn.execute("SELECT key, site, url, domain, status FROM jobs ORDER BY id")]
    conn.close()
    assert jobs == [
        ("n8n:1205", "n8n", "https://n8n.io/workflows/1205", "n8n.io", "pending"),
        ("n8n:77", "n8n", "https://n8n.io/workflows/77", "n8n.io", "pending"),
        ("n8n:42", "n8n", "https://n8n.io/workflows/42", "n8n.io", "pending"),
    ]
    again = invoke("seed", "--ids", path, db=db, site="https://n8n.io")
    assert again.exit_code == 0 and "seeded 0 new job(s); 3 already known." in again.output
    assert count(db) == 3


def test_seed_if_empty_does_nothing_on_a_seeded_db(tmp_path, db, no_network):
    invoke("seed", "--ids", _ids(tmp_path, "1\n"), db=db)
    result = invoke("seed", "--ids", _ids(tmp_path, "2\n3\n", "more.txt"), "--if-empty", db=db)
    assert result.exit_code == 0 and count(db) == 1


def _ids(tmp_path, text, name="ids.txt"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# --- seed --from-search --------------------------------------------------------------------------

@pytest.fixture
def search_130():
    page1 = search_items()
    page2 = [{"id": 900_000 + i, "name": f"t{i}"} for i in range(30)]
    with responses.RequestsMock() as rsps:
        rsps.add(responses.GET, ANY_ROBOTS, status=404)   # no rules
        search_page(rsps, 1, page1)
        search_page(rsps, 2, page2)
        yield rsps, [i["id"] for i in page1 + page2]


def test_seed_from_search_pages_through_every_page(db, search_130):
    rsps, ids = search_130
    result = invoke("seed", "--from-search", db=db)
    assert result.exit_code == 0, result.output
    assert "seeded 130 new job(s)" in result.output
    conn = store.connect(str(db))
    keys = {r[0] for r in conn.execute("SELECT key FROM jobs")}
    conn.close()
    assert keys == {n8n.job_key(i) for i in ids}
    assert len(rsps.calls) == 3                      # robots.txt (404: no rules), then two pages
    assert os.path.exists(str(db) + "-limiter")      # the search went through the shared rate limit


def test_seed_from_search_with_a_limit(db):
    with responses.RequestsMock() as rsps:
        rsps.add(responses.GET, ANY_ROBOTS, status=404)   # no rules
        search_page(rsps, 1, search_items())
        result = invoke("seed", "--from-search", "--limit", "50", db=db)
    assert result.exit_code == 0, result.output
    assert count(db) == 50
    assert count(db, "SELECT COUNT(*) FROM jobs WHERE key = ?", f"n8n:{search_items()[49]['id']}") == 1


@pytest.mark.parametrize("body, status", [("<html>oops</html>", 200), ('{"totalWorkflows": 130, "workflo', 200),
                                          ("busy", 503)])
def test_seed_from_search_with_an_unusable_answer_exits_1_and_seeds_nothing(db, body, status):
    with responses.RequestsMock() as rsps:
        rsps.add(responses.GET, ANY_ROBOTS, status=404)   # no rules
        search_page(rsps, 1, None, status=status, body=body)
        result = invoke("seed", "--from-search", "--backoff-base", "0", db=db)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "nothing was seeded" in result.output
    assert not db.exists()          # the database is only created once there is something to seed


def test_seed_from_search_failing_on_page_2_seeds_nothing(db):
    with responses.RequestsMock() as rsps:
        rsps.add(responses.GET, ANY_ROBOTS, status=404)   # no rules
        search_page(rsps, 1, search_items())
        search_page(rsps, 2, None, body="not json")
        result = invoke("seed", "--from-search", "--backoff-base", "0", db=db)
    assert result.exit_code == 1 and not db.exists()


# --- status --------------------------------------------------------------------------------------

@pytest.fixture
def hand_built(db):
    """2 done a few seconds ago, 1 failed 200 s ago, 1 invalid an hour ago, 3 pending, 1 running;
    counters: two 429s, one network error."""
    now = time.time()
    conn = store.open_db(str(db))
    q = Queue(conn)
    q.seed([(n8n.job_key(i), "n8n", f"{SITE}/workflows/{i}", "site.test") for i in range(1, 9)], now=now - 4000)
    finish = [("done", now - 5), ("done", now - 10), ("failed", now - 200), ("invalid", now - 3600)]
    for status, t in finish:
        job = q.claim("w1", t - 1, 60)
        if status == "done":
            q.complete(job, "w1", t, 10)
        else:
            q.fail(job, "w1", t, status, "http_4xx" if status == "invalid" else "network", "x")
    for t in (now - 300, now - 299):
        job = q.claim("w1", t, 60)
        q.fail(job, "w1", t, "pending", "http_429", "HTTP 429", 429, available_at=t + 1)
    q.claim("w9", now, 60)
    conn.close()
    return db


@pytest.fixture
def live_run(hand_built):
    """A run holding the hand-built database: this process holds its run lock and has its `runs` row,
    started two minutes ago."""
    fd = os.open(f"{hand_built}-run.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    started = time.time() - 120
    conn = store.open_db(str(hand_built))
    conn.execute("INSERT INTO runs (pid, started_at, workers) VALUES (?, ?, 1)", (os.getpid(), started))
    conn.close()
    yield started
    os.close(fd)


def test_status_json_on_a_hand_built_db(hand_built, live_run):
    result = invoke("status", "--json", db=hand_built)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert {"total", "pending", "running", "done", "failed", "invalid", "rate_per_min", "eta_s", "http_429",
            "errors_by_kind", "run", "stale_running"} <= set(report)
    assert (report["total"], report["pending"], report["running"], report["done"], report["failed"],
            report["invalid"]) == (8, 3, 1, 2, 1, 1)
    assert report["run"] == {"pid": os.getpid(), "started_at": live_run, "alive": True}
    assert report["stale_running"] == 0           # the running row belongs to the live run
    assert report["rate_per_min"] == 2.0          # two finished in the last minute
    assert report["eta_s"] == 120.0               # four left at two a minute
    assert report["http_429"] == 2
    assert report["errors_by_kind"] == {"http_429": 2, "http_4xx": 1, "network": 1}


def test_status_without_a_live_run_has_no_rate_and_counts_orphans(hand_built):
    conn = store.open_db(str(hand_built))      # a run that was killed: its row never got its end
    conn.execute("INSERT INTO runs (pid, started_at, workers) VALUES (?, ?, 1)", (2**22 + 7, time.time() - 30))
    conn.close()
    report = json.loads(invoke("status", "--json", db=hand_built).stdout)
    assert report["run"] is None
    assert (report["running"], report["stale_running"]) == (1, 1)
    assert (report["rate_per_min"], report["eta_s"]) == (0.0, None)
    assert report["finished_last_1m"] == 2     # what happened is still told
    text = invoke("status", db=hand_built).output
    assert "no run holds this database" in text
    assert "1 row(s) marked running belong to no live run" in text


def test_status_text(hand_built, live_run):
    result = invoke("status", db=hand_built)
    assert result.exit_code == 0
    assert f"run       pid {os.getpid()} since " in result.output
    assert "8 total: 3 pending, 1 running, 2 done, 1 failed, 1 invalid" in result.output
    assert "stale" not in result.output
    assert "2.0/min over the last 60 s, ETA 2m00s" in result.output
    assert "429s      2" in result.output
    assert "http_429 2" in result.output


def test_status_shows_an_open_breaker(hand_built):
    conn = store.open_db(str(hand_built))
    Queue(conn).update_domain("site.test", lambda b: breaker.Breaker(breaker.OPEN, 10, time.time() + 600), 0)
    conn.close()
    report = json.loads(invoke("status", "--json", db=hand_built).stdout)
    assert report["domains"]["site.test"]["state"] == "open"
    assert 590 < report["domains"]["site.test"]["open_for_s"] <= 600
    assert "breaker open (10 consecutive failures), open for" in invoke("status", db=hand_built).output


def test_status_of_an_empty_db(db):
    store.open_db(str(db)).close()
    report = json.loads(invoke("status", "--json", db=db).stdout)
    assert (report["total"], report["rate_per_min"], report["eta_s"], report["errors_by_kind"]) == (0, 0.0, 0.0, {})
    assert (report["run"], report["stale_running"]) == (None, 0)


# --- retry ---------------------------------------------------------------------------------------

def job_states(db):
    conn = store.connect(str(db))
    try:
        return {r[0]: (r[1], r[2]) for r in conn.execute("SELECT key, status, attempts FROM jobs")}
    finally:
        conn.close()


@pytest.mark.parametrize("flag, moved", [
    ([], {"n8n:3"}), (["--failed"], {"n8n:3"}), (["--invalid"], {"n8n:4"}), (["--all"], {"n8n:3", "n8n:4"}),
    (["--failed", "--invalid"], {"n8n:3", "n8n:4"}), (["--invalid", "--failed"], {"n8n:3", "n8n:4"}),
])
def test_retry_moves_the_right_rows_and_resets_attempts(hand_built, flag, moved):
    before = job_states(hand_built)
    result = invoke("retry", *flag, db=hand_built)
    assert result.exit_code == 0, result.output
    assert f"moved {len(moved)} " in result.output
    after = job_states(hand_built)
    for key, state in after.items():
        assert state == (("pending", 0) if key in moved else before[key])


# --- export --------------------------------------------------------------------------------------

EXPORT_IDS = sorted(definition_ids()[:3])


@pytest.fixture
def export_db(db):
    conn = store.open_db(str(db))
    for template_id in EXPORT_IDS:
        store.upsert(conn, "workflows", n8n.extract(detail_body(template_id), "2026-01-02T03:04:05+00:00"), "id")
    conn.close()
    return db


def set_name(db, template_id, name):
    conn = store.connect(str(db))
    conn.execute("UPDATE workflows SET name = ? WHERE id = ?", (name, template_id))
    conn.close()


def export(db, fmt, *more):
    result = invoke("export", "--format", fmt, *more, db=db)
    assert result.exit_code == 0, result.output
    return result


def test_export_jsonl_to_stdout(export_db):
    lines = export(export_db, "jsonl").stdout.splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["id"] for r in rows] == EXPORT_IDS
    assert isinstance(rows[0]["workflow"], dict) and isinstance(rows[0]["categories"], list)


def test_export_json_to_stdout(export_db):
    rows = json.loads(export(export_db, "json").stdout)
    assert isinstance(rows, list) and [r["id"] for r in rows] == EXPORT_IDS
    assert isinstance(rows[0]["node_types"], list)


def test_export_csv_to_stdout(export_db):
    rows = list(csv.DictReader(io.StringIO(export(export_db, "csv").stdout)))
    assert [int(r["id"]) for r in rows] == EXPORT_IDS
    # issue 10: the workflow JSON (up to 2 MB) is left out of CSV unless --columns asks for it
    assert "workflow" not in rows[0] and json.loads(rows[0]["node_types"])


def test_export_of_an_empty_table_is_valid(db):
    store.open_db(str(db)).close()
    assert json.loads(export(db, "json").stdout) == []
    assert export(db, "jsonl").stdout == ""


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv"])
def test_export_to_a_file(export_db, tmp_path, fmt):
    out = tmp_path / f"out.{fmt}"
    result = export(export_db, fmt, "--output", str(out))
    assert f"exported 3 workflow(s) to {out}" in result.output
    text = out.read_text(encoding="utf-8")
    if fmt == "jsonl":
        ids = [json.loads(line)["id"] for line in text.splitlines()]
    elif fmt == "json":
        ids = [r["id"] for r in json.loads(text)]
    else:
        ids = [int(r["id"]) for r in csv.DictReader(io.StringIO(text, newline=""))]
    assert ids == EXPORT_IDS


@pytest.mark.parametrize("prefix", ["=", "+", "-", "@"])
def test_csv_neutralises_formulas_but_json_keeps_the_text(export_db, prefix):
    name = prefix + "HYPERLINK(\"http://evil.test\",\"x\")"
    set_name(export_db, EXPORT_IDS[1], name)
    csv_rows = list(csv.DictReader(io.StringIO(export(export_db, "csv").stdout)))
    assert csv_rows[1]["name"] == "'" + name
    assert csv_rows[0]["name"] == n8n.extract(detail_body(EXPORT_IDS[0]), "x")["name"]   # others untouched
    assert json.loads(export(export_db, "json").stdout)[1]["name"] == name
    assert json.loads(export(export_db, "jsonl").stdout.splitlines()[1])["name"] == name


def test_export_output_replaces_the_file_atomically(export_db, tmp_path):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "workflows.json"
    out.write_text("old content that is longer than nothing")
    export(export_db, "json", "--output", str(out))
    assert [r["id"] for r in json.loads(out.read_text())] == EXPORT_IDS
    assert files_in(out_dir) == ["workflows.json"]      # no temporary file left behind


def test_export_output_has_the_permissions_of_an_ordinary_new_file(export_db, tmp_path):
    ordinary = tmp_path / "ordinary.txt"
    ordinary.write_text("")                             # what `> file` would give under this umask
    out = tmp_path / "workflows.jsonl"
    export(export_db, "jsonl", "--output", str(out))
    assert oct(out.stat().st_mode & 0o777) == oct(ordinary.stat().st_mode & 0o777)


def test_export_output_that_is_a_folder_is_refused(export_db, tmp_path):
    result = invoke("export", "--format", "csv", "--output", str(tmp_path), db=export_db)
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_run_on_a_missing_database_refuses_and_creates_nothing(db, tmp_path):
    result = invoke("run", db=db)
    assert result.exit_code == 2
    assert "no database" in result.output and "scraper seed" in result.output
    assert files_in(tmp_path) == []


def test_seed_takes_its_own_rate_and_refuses_a_bad_one(db, tmp_path):
    result = invoke("seed", "--from-search", "--rate", "0", db=db)
    assert result.exit_code == 2 and "--rate" in result.output
    assert files_in(tmp_path) == []


def test_csv_export_of_an_empty_table_still_has_its_header(db):
    store.open_db(str(db)).close()
    result = invoke("export", "--format", "csv", db=db)
    assert result.exit_code == 0
    header = next(csv.reader(io.StringIO(result.output)))
    assert header[:3] == ["id", "name", "description"] and "quality_score" in header
