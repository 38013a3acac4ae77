"""Issue 19: the WARC export, the folder of importable workflow files, and a run's pings and notifications.

One mirror is built for the module from the n8n stand-in (real processes): a first run with pages, then an
edit (a new version, a renamed template) and a removal the mirror confirms."""

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from scraper.db import store
from scraper.mirror import answers
from scraper.policy import redact
from scraper.products import files
from scripts.standin import client
from tests.helpers import NOWHERE, ROOT, assert_one_sentence_error, in_process, invoke, rows, scraper, status_json

warcio = pytest.importorskip("warcio")
from warcio.archiveiterator import ArchiveIterator  # noqa: E402 - after the skip when warcio is missing

TEMPLATES = 24
EDITED, REMOVED = 3, 5      # positions in the corpus's ids


def _fast(site, db, *args, check=0):
    return scraper(site, db, *args, check=check, env={"SCRAPER_TRANSCRIPTS": "0"})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(stand-in, db path, ids, edited id, removed id): two runs, one edit, one confirmed removal."""
    folder = tmp_path_factory.mktemp("mirror")
    db = folder / "jobs.db"
    site = client.start(templates=TEMPLATES, rate=100, burst=50)
    try:
        run = ("run", "--workers", "2", "--rate", "100", "--burst", "50")
        _fast(site, db, "seed", "--from-search")
        _fast(site, db, *run, "--with-page")
        ids = [r["id"] for r in rows(db, "SELECT id FROM workflows ORDER BY id")]
        edited, removed = ids[EDITED], ids[REMOVED]
        site.library(edit=[edited], remove=[removed])
        _fast(site, db, "seed", "--from-search")
        _fast(site, db, *run)
        assert rows(db, "SELECT version FROM workflows WHERE id = ?", edited)[0]["version"] == 2
        assert rows(db, "SELECT removed_at FROM workflows WHERE id = ?", removed)[0]["removed_at"]
        yield site, db, ids, edited, removed
    finally:
        site.stop()


@pytest.fixture
def mirror(built, tmp_path):
    """A copy of the built mirror for one test."""
    site, db, ids, edited, removed = built
    copy = tmp_path / "jobs.db"
    shutil.copy(db, copy)
    return types.SimpleNamespace(site=site, db=copy, ids=ids, edited=edited, removed=removed)


def _stored(db):
    conn = store.connect(str(db))
    try:
        return {(r["template_id"], r["version"], r["kind"]): (answers.decompress(r["body"]), r["url"])
                for r in conn.execute("SELECT template_id, version, kind, body, url FROM answers")}
    finally:
        conn.close()


def _records(path):
    with open(path, "rb") as fh:
        return [(r.rec_type, r.rec_headers, r.http_headers, r.content_stream().read()) for r in ArchiveIterator(fh)]


def _warcio(*args):
    return subprocess.run([sys.executable, "-c", "from warcio.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120)


# --- WARC ---------------------------------------------------------------------------------------------

def test_a_warc_of_the_mirror_holds_every_stored_answer_version_as_served(mirror, tmp_path):
    out = tmp_path / "mirror.warc.gz"
    done = invoke("export", "--format", "warc", "--output", str(out), db=mirror.db)
    assert done.exit_code == 0, done.output
    records = _records(out)
    assert records[0][0] == "warcinfo" and b"software: scraper/" in records[0][3]
    assert records[0][1].protocol == "WARC/1.1"
    stored = _stored(mirror.db)
    responses_ = list(records[1:])
    assert {r[0] for r in responses_} == {"response"} and len(responses_) == len(stored)
    by_uri = {}
    for _, warc, http, payload in responses_:
        by_uri.setdefault(warc.get_header("WARC-Target-URI"), []).append(payload)
        assert http.get_statuscode() == "200" and http.get_header("Content-Type")
        assert warc.get_header("WARC-Date").endswith("Z")
    for (tid, _version, _kind), (body, url) in stored.items():
        assert url.startswith(mirror.site.url) and str(tid) in url
        assert body in by_uri[url]       # the payload equals the stored answer, byte for byte
    # both versions of the edited template, pages too
    assert len(by_uri[f"{mirror.site.api_url}/templates/workflows/{mirror.edited}"]) == 2
    assert f"{mirror.site.url}/workflows/{mirror.ids[0]}" in by_uri
    # one gzip member per record
    raw = out.read_bytes()
    assert raw.count(b"\x1f\x8b\x08") >= len(records)
    with gzip.open(out) as fh:
        assert fh.read().count(b"WARC/1.1\r\n") == len(records)
    check = _warcio("check", "-v", str(out))
    assert check.returncode == 0, check.stdout + check.stderr
    index = [json.loads(line) for line in _warcio("index", str(out)).stdout.splitlines()]
    assert len(index) == len(records) and index[0]["warc-type"] == "warcinfo"


def test_warc_filters_source_since_and_live_only(mirror, tmp_path):
    def count(*args):
        out = tmp_path / "f.warc.gz"
        done = invoke("export", "--format", "warc", "--output", str(out), *args, db=mirror.db)
        assert done.exit_code == 0, done.output
        return [r[1].get_header("WARC-Target-URI") for r in _records(out)[1:]]

    every = count()
    assert count("--source", "n8n") == every
    assert count("--since", "2999-01-01") == []
    live = count("--live-only")
    assert not any(u.endswith(f"/{mirror.removed}") for u in live) and any(u.endswith(f"/{mirror.removed}")
                                                                          for u in every)
    assert_one_sentence_error(invoke("export", "--format", "warc", "--output", str(tmp_path / "x.warc.gz"),
                                     "--source", "youtube-nope", db=mirror.db), "no stored answer belongs to a source")
    assert_one_sentence_error(invoke("export", "--format", "warc", "--output", str(tmp_path / "x.warc.gz"),
                                     "--since", "yesterday", db=mirror.db), "--since")
    assert_one_sentence_error(invoke("export", "--format", "warc", db=mirror.db), "--output")
    assert not (tmp_path / "x.warc.gz").exists() and not list(tmp_path.glob(".export-*"))


def test_answers_stored_before_urls_were_kept_get_their_url_rebuilt(mirror, tmp_path):
    conn = sqlite3.connect(mirror.db)
    conn.execute("UPDATE answers SET url = NULL, http_status = NULL, content_type = NULL")
    conn.commit()
    conn.close()
    out = tmp_path / "old.warc.gz"
    assert invoke("export", "--format", "warc", "--output", str(out), db=mirror.db).exit_code == 0
    records = _records(out)[1:]
    uris = {r[1].get_header("WARC-Target-URI") for r in records}
    assert f"{mirror.site.api_url}/templates/workflows/{mirror.ids[0]}" in uris
    assert f"{mirror.site.url}/workflows/{mirror.ids[0]}" in uris
    assert all(r[1].get_header("WARC-Scraper-Reconstructed") for r in records)


def test_a_database_of_schema_6_upgrades_in_place_losing_nothing(tmp_path):
    path = str(tmp_path / "old.db")
    conn = store.connect(path)
    store.migrate(conn, 6)
    conn.execute("INSERT INTO answers VALUES (1, 1, 'api', 'h', 't', 't', 3, ?)", (answers.compress(b"abc"),))
    conn.close()
    conn = store.open_db(path)
    row = conn.execute("SELECT body, url, http_status FROM answers").fetchone()
    assert answers.decompress(row["body"]) == b"abc" and row["url"] is None and row["http_status"] is None
    assert store.last_notification(conn) is None
    conn.close()


# --- the files export ---------------------------------------------------------------------------------

def test_files_export_is_importable_stable_and_follows_removals(mirror, tmp_path):
    out = tmp_path / "templates"
    out.mkdir()
    (out / "NOTES.md").write_text("mine\n")             # DIR may be a git working tree with files of its own
    (out / "999999-not-ours.json").write_text("{}\n")
    assert invoke("export", "--format", "files", "--output", str(out), db=mirror.db).exit_code == 0
    index = json.loads((out / "index.json").read_text())
    conn = store.connect(str(mirror.db))
    live = {r["id"]: r for r in conn.execute("SELECT * FROM workflows WHERE removed_at IS NULL")}
    conn.close()
    assert sorted(t["id"] for t in index["templates"]) == sorted(live)
    assert [r["id"] for r in index["removed"]] == [mirror.removed]
    for t in index["templates"]:
        doc = json.loads((out / t["file"]).read_text())
        stored, _ = redact.value(json.loads(live[t["id"]]["workflow"]))
        assert doc["nodes"] == stored["nodes"] and doc["connections"] == stored["connections"]
        assert doc["meta"]["templateId"] == str(t["id"]) and doc["name"] == live[t["id"]]["name"]
        assert t["file"].startswith(f"{t['id']}-") and t["version"] == live[t["id"]]["version"]
        assert {"settings", "pinData"} <= set(doc)
    assert "| id | name |" in (out / "README.md").read_text()
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert all(b.endswith(b"\n") for name, b in first.items() if name.endswith(".json"))
    assert invoke("export", "--format", "files", "--output", str(out), db=mirror.db).exit_code == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first      # byte-identical
    # the template is removed from the site, the mirror catches it, its file goes; nobody else's does
    gone = index["templates"][0]
    site = mirror.site
    site.library(remove=[gone["id"]])
    try:
        _fast(site, mirror.db, "seed", "--from-search")
        _fast(site, mirror.db, "run", "--workers", "1", "--rate", "100", "--burst", "50")
    finally:
        site.library(restore=[gone["id"]])
    done = invoke("export", "--format", "files", "--output", str(out), db=mirror.db)
    assert done.exit_code == 0 and "1 deleted" in done.output
    assert not (out / gone["file"]).exists()
    assert (out / "NOTES.md").read_text() == "mine\n" and (out / "999999-not-ours.json").exists()
    assert gone["id"] in [r["id"] for r in json.loads((out / "index.json").read_text())["removed"]]


def test_a_renamed_template_s_old_file_goes(mirror, tmp_path):
    out = tmp_path / "t"
    out.mkdir()
    conn = store.connect(str(mirror.db))
    conn.execute("UPDATE workflows SET name = 'Old name' WHERE id = ?", (mirror.ids[0],))
    files.write(conn, str(out))
    assert (out / f"{mirror.ids[0]}-old-name.json").exists()
    conn.execute("UPDATE workflows SET name = 'New name' WHERE id = ?", (mirror.ids[0],))
    summary = files.write(conn, str(out))
    conn.close()
    assert summary.deleted == [f"{mirror.ids[0]}-old-name.json"]
    assert (out / f"{mirror.ids[0]}-new-name.json").exists() and not (out / f"{mirror.ids[0]}-old-name.json").exists()


def test_a_stop_ends_the_files_export_between_files_and_says_how_many_changed(mirror, tmp_path):
    out = tmp_path / "t"
    out.mkdir()
    asked = []

    def stop():
        asked.append(1)
        return "SIGTERM" if len(asked) > 5 else None

    conn = store.connect(str(mirror.db))
    summary = files.write(conn, str(out), stop=stop)
    conn.close()
    assert summary.stopped == "SIGTERM" and summary.changed == 5
    assert len(list(out.iterdir())) == 5 and not (out / "index.json").exists()
    assert not list(out.glob(".export-*"))


def test_files_export_makes_a_missing_folder_and_refuses_a_file(mirror, tmp_path):
    out = tmp_path / "new" / "nope"
    result = invoke("export", "--format", "files", "--output", str(out), db=mirror.db)
    assert result.exit_code == 0, result.output
    assert (out / "index.json").is_file()
    (tmp_path / "a-file").write_text("x")
    assert_one_sentence_error(invoke("export", "--format", "files", "--output", str(tmp_path / "a-file"),
                                     db=mirror.db), "not a folder")
    assert_one_sentence_error(invoke("export", "--format", "files", db=mirror.db), "--output")


def test_the_documented_ci_example_uses_commands_that_exist():
    import re
    doc = (ROOT / "docs" / "operations.md").read_text()
    block = doc[doc.index("<!-- ci-example -->"):doc.index("<!-- /ci-example -->")]
    commands = re.findall(r"\bscraper\s+([a-z][\w-]*)([^&|;\n]*)", block)
    assert {c for c, _ in commands} >= {"seed", "run", "export"}
    assert "make install" in block and "git commit" in block
    for command, rest in commands:
        help_text = invoke(command, "--help")
        assert help_text.exit_code == 0, command
        for option in re.findall(r"--[a-z][\w-]*", rest):
            assert option in help_text.output, (command, option)


# --- pings and notifications ------------------------------------------------------------------------------

class _Listener:
    """A tiny HTTP server on 127.0.0.1 that records (method, path, body) of every call."""

    def __init__(self):
        calls = self.calls = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                calls.append((self.command, self.path, body))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"OK")

            do_GET = do_POST

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener():
    server = _Listener()
    yield server
    server.close()


def test_a_run_pings_start_then_success(standin, listener, tmp_path):
    site, db = standin(templates=5, rate=50, burst=20), tmp_path / "jobs.db"
    _fast(site, db, "seed", "--from-search")
    done = scraper(site, db, "run", "--workers", "1", "--rate", "50", "--burst", "20", "--notify-url",
                   listener.url + "/hook", check=0, env={"SCRAPER_TRANSCRIPTS": "0",
                                                         "SCRAPER_PING_URL": listener.url + "/ping/abc"})
    assert [(m, p) for m, p, _ in listener.calls] == [("POST", "/ping/abc/start"), ("POST", "/ping/abc")]
    assert b"nothing to do" in listener.calls[1][2]
    last = status_json(site, db)["last_notification"]
    assert last["kind"] == "success" and last["ok"] is True and last["at"] > 0
    assert "notified  success" in in_process(site, db, "status", check=0).stdout
    report = tmp_path / "r.html"
    in_process(site, db, "report", "--output", str(report), check=0)
    assert "Last notification: success" in report.read_text()
    assert "/ping/abc" not in json.dumps(rows(db, "SELECT settings FROM runs"))     # the URL is a secret
    del done


def test_a_run_whose_domain_is_down_pings_fail_and_notifies_naming_the_domain(listener, tmp_path):
    nowhere = types.SimpleNamespace(url=NOWHERE, api_url=NOWHERE + "/api")
    db = tmp_path / "jobs.db"
    ids = tmp_path / "ids.txt"
    ids.write_text("1\n2\n3\n")
    in_process(nowhere, db, "seed", "--ids", str(ids), check=0)
    done = scraper(nowhere, db, "run", "--workers", "1", "--breaker-failures", "1", "--breaker-open", "0.2",
                   "--max-open-cycles", "1", "--give-up-after", "0", "--backoff-base", "0.05", "--timeout", "1",
                   "--ping-url", listener.url + "/p", "--notify-url", listener.url + "/hook", timeout=120)
    assert done.returncode == 3, done.stderr[-2000:]
    assert [p for _, p, _ in listener.calls] == ["/p/start", "/p/fail", "/hook"]
    text = json.loads(listener.calls[2][2])["text"]
    assert "exited 3" in text and "127.0.0.1" in text and "next:" in text and "pending" in text
    assert status_json(nowhere, db)["last_notification"]["kind"] == "notify"


def test_an_unreachable_monitor_never_changes_the_exit_code(standin, tmp_path):
    site, db = standin(templates=3, rate=50, burst=20), tmp_path / "jobs.db"
    _fast(site, db, "seed", "--from-search")
    done = scraper(site, db, "run", "--workers", "1", "--ping-url", NOWHERE + "/p", check=0,
                   env={"SCRAPER_TRANSCRIPTS": "0"})
    assert "could not reach http://127.0.0.1:9/…" in done.stderr and "/p" not in done.stderr.replace("/…", "")
    last = status_json(site, db)["last_notification"]
    assert last["kind"] == "success" and last["ok"] is False


def test_no_url_no_call_and_a_bad_url_is_one_sentence(standin, tmp_path):
    site, db = standin(templates=2, rate=50, burst=20), tmp_path / "jobs.db"
    _fast(site, db, "seed", "--from-search")
    _fast(site, db, "run", "--workers", "1")
    assert status_json(site, db)["last_notification"] is None
    assert_one_sentence_error(invoke("run", "--ping-url", "ftp://x", db=db, site=site.url), "--ping-url")
    assert os.path.exists(db)


def test_a_run_keeps_its_pings_on_each_backend(backend, listener):
    """A run's pings are recorded where its jobs are: a SQLite file or a PostgreSQL URL (issue 46: the URL
    was taken for a missing file, so PostgreSQL kept none)."""
    site = types.SimpleNamespace(url=NOWHERE, api_url=NOWHERE + "/api")
    store.open_db(backend).close()      # a database with nothing to do: the run only pings
    in_process(site, backend, "run", "--workers", "1", "--ping-url", listener.url + "/p", check=0)
    assert [p for _, p, _ in listener.calls] == ["/p/start", "/p"]
    last = status_json(site, backend)["last_notification"]
    assert last["kind"] == "success" and last["ok"] is True


def test_an_update_runs_every_step_and_keeps_its_pings_on_each_backend(backend, listener):
    """On PostgreSQL too, `update` goes on after its walk (a URL is no file: it took the database for one
    the walk had failed to make, and stopped), and keeps its pings."""
    site = types.SimpleNamespace(url=NOWHERE, api_url=NOWHERE + "/api")
    store.open_db(backend).close()
    done = in_process(site, backend, "update", "--workers", "1", "--timeout", "1", "--max-attempts", "1",
                      "--ping-url", listener.url + "/p")
    assert done.returncode == 1, done.stderr     # the walk found nobody at NOWHERE
    assert "set by the walk" in done.stderr and "walk made no database" not in done.stderr
    assert len(rows(backend, "SELECT id FROM runs")) == 1     # the run step ran
    assert [p for _, p, _ in listener.calls] == ["/p/start", "/p/fail"]
    assert status_json(site, backend)["last_notification"]["kind"] == "fail"
