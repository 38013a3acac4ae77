"""Helpers shared by the test files (fixtures live in conftest.py): the CLI as a real process, counts and
rows of a database, the per-row check of a run against the stand-in's corpus, real n8n answers built
from the stand-in's data, and the in-process CLI with its one-sentence errors."""

import contextlib
import copy
import http.server as http_server
import json
import logging
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
import responses
from click.testing import CliRunner
from responses import matchers

from scraper import cli
from scraper.base import logs
from scraper.base.errors import FetchError, HandedBack
from scraper.db import runrecord, schema, store
from scraper.db.queue import Queue
from scraper.mirror.sync import iso
from scraper.sites import n8n
from scripts.standin.corpus import DATA_DIR, load_json
from tests import warm

ROOT = Path(__file__).resolve().parent.parent
# A closed local port: a test that forgets to point the scraper at the stand-in fails fast
# instead of reaching the real n8n hosts.
NOWHERE = "http://127.0.0.1:9"
# every test's environment (conftest's `safe_env`; a fixture wider than a test sets it itself): the real
# hosts replaced by NOWHERE, and no transcripts (the transcript tests switch them on with a YouTube stand-in)
SAFE_ENV = {"SCRAPER_API_URL": NOWHERE + "/api", "SCRAPER_SITE_URL": NOWHERE, "SCRAPER_YOUTUBE_URL": NOWHERE,
            "SCRAPER_TRANSCRIPTS": "0"}

# the in-process tests' fake hosts (the network is `responses`) and clock
API = "http://api.test/api"
SITE = "http://site.test"
DOMAIN = "site.test"
SEARCH = f"{API}/templates/search"
NOW = 1_700_000_000.0
TID = 6270
DETAIL = f"{API}/templates/workflows/{TID}"
# `2026-11-26 02:30:00,123 Error: ...`: click's error line, timestamped like a log line
STAMPED_ERROR = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} Error: (.*)$")


# --- the CLI as a real process against a stand-in ------------------------------------------------

def scraper_env(site, db):
    """The environment of a scraper process pointed at the stand-in and the test's database (SAFE_ENV under
    what the test set, for the fixtures wider than a test, which run before `safe_env`)."""
    env = {**SAFE_ENV, **os.environ}
    env.update(SCRAPER_API_URL=site.api_url, SCRAPER_SITE_URL=site.url, SCRAPER_DB=str(db))
    return env


def scraper(site, db, *args, timeout=300, check=None, env=None):
    """Run `scraper ARGS` as a real process (`env`: extra variables); returns the CompletedProcess."""
    done = warm.run([sys.executable, "-m", "scraper", *args], env={**scraper_env(site, db), **(env or {})},
                    capture_output=True, text=True, timeout=timeout)
    if check is not None:
        assert done.returncode == check, done.stderr[-3000:]
    return done


class _RunnerStderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a line is logged (click's runner swaps it in)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def in_process(site, db, *args, check=None, env=None):
    """`scraper ARGS` in this process (click's runner) with the environment a process would get (`env`:
    extra variables): for the commands a test only needs done (a seed before a run, a status read), not
    the command line it tests. Returns what `scraper()` returns: returncode, stdout, stderr."""
    env = {k: v for k, v in {**scraper_env(site, db), **(env or {})}.items() if k.startswith("SCRAPER_")}
    # pytest's log capture holds the root logger, so the command adds no handler of its own: its log lines
    # go to the runner's stderr through this one, as a process's would
    handler = _RunnerStderr()
    handler.setFormatter(logs.Formatter())
    logging.getLogger().addHandler(handler)
    try:
        result = CliRunner().invoke(cli.main, list(args), env=env)
    finally:
        logging.getLogger().removeHandler(handler)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    done = subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)
    if check is not None:
        assert done.returncode == check, done.stderr[-3000:]
    return done


def start_scraper(site, db, *args):
    """Start `scraper ARGS` in the background (for signal tests)."""
    return warm.Popen([sys.executable, "-m", "scraper", *args], env=scraper_env(site, db),
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def rows(db, sql, *params):
    """The rows of one query, as dicts, on a connection of their own (a SQLite path or a PostgreSQL URL)."""
    conn = store.connect(str(db))
    try:
        return [dict(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def wait_until(predicate, timeout=30, every=0.05):
    """The predicate's first truthy value; raises AssertionError when `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError("condition not met in time")


def status_json(site, db):
    return json.loads(in_process(site, db, "status", "--json", check=0).stdout)

# --- counts ----------------------------------------------------------------------------------------

def count(db, sql="SELECT COUNT(*) FROM jobs", *params):
    """The single number one query returns."""
    conn = store.connect(str(db))
    try:
        return conn.execute(sql, params).fetchone()[0]
    finally:
        conn.close()


def jobs_in(db, status):
    """How many jobs have this status."""
    return count(db, "SELECT COUNT(*) FROM jobs WHERE status = ?", status)


# --- a run against the stand-in, row by row --------------------------------------------------------

def check_every_row(site, db):
    """Each job as the stand-in's corpus says it must end: a 404 invalid and not stored, a 403 failed,
    any other stored exactly as the site serves it. Returns (faults by id, jobs by id, stored rows by id)."""
    faults = {int(k): v["kind"] for k, v in site.corpus()["faults"].items()}
    jobs = {int(r["key"].split(":")[1]): r for r in rows(db, "SELECT * FROM jobs WHERE site = 'n8n'")}
    stored = {r["id"]: r for r in rows(db, "SELECT id, name, workflow FROM workflows")}
    for template_id, job in jobs.items():
        kind = faults.get(template_id)
        if kind == "404":
            assert (job["status"], job["http_status"]) == ("invalid", 404)
            assert template_id not in stored
        elif kind == "403":
            assert (job["status"], job["http_status"], job["error_kind"]) == ("failed", 403, "http_4xx")
            assert "403" in job["last_error"]
        else:
            assert job["status"] == "done", (template_id, kind, job)
            served = site.template(template_id)["workflow"]
            assert stored[template_id]["name"] == served["name"]
            assert json.loads(stored[template_id]["workflow"]) == served["workflow"]
    check_outbox(db, jobs)
    return faults, jobs, stored


def check_outbox(db, jobs):
    """The outbox tells what the mirror stored (issue 41): each template's created and updated events name
    exactly its stored versions, each job that ended failed or invalid has an event of that end, no id twice."""
    told, ended = {}, set()
    for e in rows(db, "SELECT id, type, subject, data FROM events ORDER BY seq"):
        if e["type"] in ("template.created", "template.updated"):
            told.setdefault(int(e["subject"]), []).append(json.loads(e["data"])["version"])
        elif e["type"] in ("job.failed", "job.invalid"):
            ended.add((e["subject"], e["type"][4:]))
    versions = {}
    for r in rows(db, "SELECT template_id, version FROM answers WHERE source = 'n8n' AND kind = 'api' "
                      "ORDER BY version"):
        versions.setdefault(r["template_id"], []).append(r["version"])
    assert told == versions
    assert {(f"n8n:{tid}", j["status"]) for tid, j in jobs.items() if j["status"] in ("failed", "invalid")} <= ended
    ids = [r["id"] for r in rows(db, "SELECT id FROM events")]
    assert len(ids) == len(set(ids))


# --- real n8n answers, from the stand-in's data ----------------------------------------------------

FIXTURES = DATA_DIR


@cache
def _load(name):
    return load_json(FIXTURES, name)


def search_items() -> list[dict]:
    """The 100 items of the real first search page (a fresh copy)."""
    return copy.deepcopy(_load("search_page1_rows100.json"))


def search_answer(total: int = 6022) -> dict:
    """A whole search answer around the real first page."""
    return {"totalWorkflows": total, "workflows": search_items(), "filters": []}


def definition_ids() -> list[int]:
    """Ids of the 20 templates whose workflow definition is in the fixtures."""
    return [item["id"] for item in _load("workflow_definitions_20.json")]


def definition(template_id: int) -> dict:
    """The importable workflow object of a template (6270 from its untouched answer)."""
    if template_id == 6270:
        return copy.deepcopy(_load("workflows_templates_6270.json")["workflow"])
    for item in _load("workflow_definitions_20.json"):
        if item["id"] == template_id:
            return copy.deepcopy(item["workflow"])
    raise KeyError(template_id)


def detail_answer(template_id: int, categories=None, image=None, **overrides) -> dict:
    """The detail answer of one template; `overrides` replace fields of the inner `workflow` object."""
    item = next(i for i in search_items() if i["id"] == template_id)
    inner = definition(template_id)
    types = Counter(node["type"] for node in inner["nodes"])
    if categories is None:
        names = [c["name"] for node in item["nodes"] for c in node.get("nodeCategories") or []]
        categories = [{"id": i, "name": n} for i, n in enumerate(dict.fromkeys(names), start=1)]
    workflow = {
        **item,
        "views": item["totalViews"],
        "recentViews": 0,
        "workflowInfo": {"nodeCount": len(inner["nodes"]), "nodeTypes": {t: {"count": c} for t, c in types.items()}},
        "categories": categories,
        "image": image or [],
        "workflow": inner,
    }
    workflow.update(overrides)
    return {"workflow": workflow}


def detail_body(template_id: int, **kwargs) -> bytes:
    """The detail answer as the bytes the API sends."""
    return json.dumps(detail_answer(template_id, **kwargs), ensure_ascii=False).encode("utf-8")


# --- planted credentials (tests/test_data.py, tests/test_serve.py) ----------------------------------

SECRETS = {
    "openai": "sk-proj-Q3vT9xLmP2aZ7rYw4KdN8bHc1FgJ6sUe",
    "github": "ghp_R7tY2uI9oP4aS1dF6gH3jK8lZ5xC0vB2nM7q",
    "slack": "xoxb-2837465019-9182736450-Zx8Cv7Bn6Mq5Wr4E",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkLTQyIn0.c2lnbmF0dXJlLXBsYW50ZWQtNDI",
    "bearer": "Zq8Wm3Rt6Yk1Hv4Np7Lc2Xs5",
    "password": "Pl4nted-Passw0rd",
    "apikey": "a8F3k2L9q7W1e5R4t6Y0u3I8",
    "pin": "pinned-customer-email@planted.test",
}


def planted_workflow(workflow):
    """A real workflow with one node carrying every kind of planted credential, a sticky note with a
    token in its text, and pinned data."""
    workflow = json.loads(json.dumps(workflow))
    workflow["nodes"] = list(workflow.get("nodes") or []) + [
        {"id": "planted-1", "name": "Planted HTTP", "type": "n8n-nodes-base.httpRequest", "typeVersion": 4.2,
         "position": [0, 0],
         "parameters": {
             "url": f"https://bot:{SECRETS['password']}@hooks.planted.test/v1?api_key={SECRETS['apikey']}",
             "apiKey": SECRETS["apikey"],
             "headerParameters": {"parameters": [
                 {"name": "Authorization", "value": f"Bearer {SECRETS['bearer']}"},
                 {"name": "X-Github", "value": SECRETS["github"]},
                 {"name": "Accept", "value": "application/json"}]},
             "jsonBody": json.dumps({"token": SECRETS["slack"], "jwt": SECRETS["jwt"]}),
             "reference": "={{ $env.OPENAI_API_KEY }}",
             "placeholder": "YOUR_API_KEY"}},
        {"id": "planted-2", "name": "Note", "type": n8n.STICKY_NOTE, "typeVersion": 1, "position": [0, 0],
         "parameters": {"content": f"Use the key {SECRETS['openai']} for OpenAI."}},
    ]
    workflow["pinData"] = {"Planted HTTP": [{"json": {"email": SECRETS["pin"]}}]}
    return workflow


RARE_WORDS = ("Quokkaflux", "Zephyrquill")


# --- one part of a job's result written as the worker writes it (mirror/record.write), in the caller's
# transaction ------------------------------------------------------------------------------------------

def store_template(conn, row, raw, fetched_at):
    """A template's `workflows` row and raw answers ({"api": bytes, "page": bytes?}); returns its version."""
    from scraper.db import templates
    from scraper.mirror import record
    from scraper.sites import Result
    record.write(conn, Result(versioned=((row, raw, fetched_at),)), 0.0)
    return templates.row(conn, row["id"])["version"]


def remove_template(conn, template_id, at):
    """A confirmed removal; whether the template was stored and live."""
    from scraper.mirror import record
    from scraper.sites import Result
    return bool(record.write(conn, Result(removed=(template_id,)), 0.0, at).removed)


def store_item(conn, source, key, url, rec, raw, fetched_at, volatile=()):
    """A catalogue item and its raw answer(s) ({kind: bytes}); returns its version."""
    from scraper.mirror import record
    from scraper.sites import Result
    return record.write(conn, Result(items=((source, key, url, rec, raw, fetched_at, volatile),)), 0.0).items[0].version


def remove_item(conn, source, key, at):
    """A confirmed removal (404/410); whether the item was stored and live."""
    from scraper.mirror import record
    from scraper.sites import Result
    return bool(record.write(conn, Result(removed_items=((source, key),)), 0.0, at).removed_items)


def served_mirror(path, copies=0):
    """A mirror built in-process as the worker stores it, for the serving tests: the 20 fixture templates
    (answers, versions and changes kept), the first and the eighth with planted credentials (in the workflow
    and, for the first, in its description), `copies` more live templates cloned from a clean one (ids from
    900000), a removed one, and one catalogue item; where the schema records prices, the third is paid,
    the fourth unknown, the others free. Returns (planted ids, every live id)."""
    from scraper.db.store import transaction

    ids = definition_ids()
    planted = (ids[0], ids[7])
    conn = store.open_db(str(path))
    conn.execute("INSERT INTO source (id, api_url, site_url, recorded_at) VALUES (1, ?, ?, 0)",
                 ("https://api.n8n.io/api", "https://n8n.io"))
    with transaction(conn):
        for tid in ids:
            extra = {}
            if tid in planted:       # a made-up word in the name, found in that template only
                extra["workflow"] = planted_workflow(definition(tid))
                extra["name"] = f"{detail_answer(tid)['workflow']['name']} {RARE_WORDS[planted.index(tid)]}"
            if tid == planted[0]:
                extra["description"] = f"Paste your key {SECRETS['github']} in the first node."
            body = detail_body(tid, **extra)
            store_template(conn, n8n.extract(body, "2026-11-01T00:00:00+00:00"), {"api": body},
                          "2026-11-01T00:00:00+00:00")
        remove_template(conn, ids[19], "2026-11-20T00:00:00+00:00")
        base = n8n.extract(detail_body(ids[1]), "2026-11-02T00:00:00+00:00")
        for k in range(copies):
            store.upsert(conn, "workflows", dict(base, id=900_000 + k, name=f"Copy {k} of {base['name']}"), "id")
        if "paid" in schema.column_names(conn, "workflows"):    # schema 17 on
            conn.execute("UPDATE workflows SET paid = 0")
            conn.execute("UPDATE workflows SET paid = 1, price = 19.0, purchase_url = ? WHERE id = ?",
                         ("https://shop.test/template", ids[2]))
            conn.execute("UPDATE workflows SET paid = NULL WHERE id = ?", (ids[3],))
        store_item(conn, "events", "/events/jazz-night-42", "https://events.test/events/jazz-night-42",
                    {"name": "Jazz night", "description": "Saxophones by the river"}, {"page": b"<html></html>"},
                    "2026-11-03T00:00:00+00:00")
    conn.close()
    return planted, [*ids[:19], *(900_000 + k for k in range(copies))]


def rare_word(db, template_id):
    """A word of the template's name that the full-text index finds in that template only."""
    name = rows(db, "SELECT name FROM workflows WHERE id = ?", template_id)[0]["name"]
    for word in sorted(set(re.findall(r"[A-Za-z]{4,}", name)), key=len, reverse=True):
        if [r["rowid"] for r in rows(db, "SELECT rowid FROM workflows_fts WHERE workflows_fts MATCH ?",
                                     f'"{word}"')] == [template_id]:
            return word
    raise AssertionError(f"no word of {name!r} is found in that template only")


# --- `scraper mcp` over stdio, by a plain JSON-RPC client (tests/test_mcp.py, tests/test_serve.py) ------

MCP_TOOLS = {"search_templates", "get_template", "template_stats", "recent_changes", "search_items", "get_item"}
SUMMARY_BUDGET = 40_000      # bytes of the whole answer that twenty summaries must fit in


class Plain:
    """A client of a stdio MCP server in plain JSON-RPC 2.0: one JSON object a line each way."""

    def __init__(self, args):
        self.proc = warm.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines, self.next_id = queue.Queue(), 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def notify(self, method, params=None):
        self._send({"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})})

    def request(self, method, params=None):
        """(the answer, the raw line it came in)."""
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}})
        line = self.lines.get(timeout=60)
        assert line is not None, self.proc.stderr.read()
        answer = json.loads(line)           # every line on stdout is JSON-RPC
        assert answer["jsonrpc"] == "2.0" and answer["id"] == self.next_id, answer
        return answer, line

    def _send(self, message):
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def close(self):
        """Close stdin (the server ends); (exit code, stderr)."""
        self.proc.stdin.close()
        try:
            code = self.proc.wait(30)
        finally:
            self.proc.kill()
        return code, self.proc.stderr.read()


def round_trip(db, rare_id):
    """Everything the issue's "Done when" asks of a plain client; returns every line it read."""
    client = Plain([sys.executable, "-m", "scraper", "--db", str(db), "mcp"])
    lines = []
    try:
        init, line = client.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                   "clientInfo": {"name": "plain-json-rpc", "version": "1"}})
        lines.append(line)
        assert init["result"]["serverInfo"]["name"] == "scraper"
        client.notify("notifications/initialized")
        listed, line = client.request("tools/list")
        lines.append(line)
        assert {t["name"] for t in listed["result"]["tools"]} == MCP_TOOLS

        def tool(name, **arguments):
            answer, line = client.request("tools/call", {"name": name, "arguments": arguments})
            lines.append(line)
            return answer["result"], line

        found, _ = tool("search_templates", query=rare_word(db, rare_id))
        data = json.loads(found["content"][0]["text"])
        assert data["total"] == 1 and data["templates"][0]["id"] == rare_id
        full, _ = tool("get_template", id=rare_id, mode="full")
        data = json.loads(full["content"][0]["text"])
        assert data["workflow"]["nodes"] and data["workflow"]["connections"]
        site = rows(db, "SELECT site_url FROM source WHERE id = 1")[0]["site_url"]
        assert data["url"] == f"{site}/workflows/{rare_id}"
        missing, _ = tool("get_template", id=999_999_999)
        assert missing["isError"] and "999999999" in missing["content"][0]["text"]
        many, _ = tool("search_templates", limit=1000)
        assert len(json.loads(many["content"][0]["text"])["templates"]) <= 100
        twenty, line = tool("search_templates", limit=20)
        assert len(json.loads(twenty["content"][0]["text"])["templates"]) == 20
        assert len(line.encode()) <= SUMMARY_BUDGET
        for other in ("summary", "nodes", "full"):
            tool("get_template", id=rare_id, mode=other)
    finally:
        code, stderr = client.close()
    assert code == 0, stderr[-2000:]
    assert "MCP server on stdio" in stderr        # the logs went to stderr
    return lines



# --- in-process: the jobs of a queue, the click commands ---------------------------------

def job(q, template_id=TID):
    """The jobs row of one template, as a dict."""
    return dict(q.conn.execute("SELECT * FROM jobs WHERE key = ?", (n8n.job_key(template_id),)).fetchone())


def workflow(q, template_id=TID):
    """The workflows row of one template, or None."""
    row = q.conn.execute("SELECT * FROM workflows WHERE id = ?", (template_id,)).fetchone()
    return None if row is None else dict(row)


def invoke(*args, db=None, site=SITE):
    """`scraper [--db DB] --api-url API --site-url SITE ARGS`, in-process."""
    head = ([] if db is None else ["--db", str(db)]) + ["--api-url", API, "--site-url", site]
    return CliRunner().invoke(cli.main, [*head, *args])


def search_page(rsps, page, items, total=130, status=200, body=None):
    """One page of the search API on the `responses` mock."""
    rsps.get(SEARCH, match=[matchers.query_param_matcher({"page": str(page), "rows": "100", "sort": "createdAt:asc"})],
             status=status,
             body=body if body is not None else json.dumps({"totalWorkflows": total, "workflows": items}))


def assert_one_sentence_error(result, *words):
    """Exit 2 and exactly one timestamped one-sentence error naming `words`; returns the sentence."""
    assert result.exit_code == 2, (result.output, result.exception)
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if STAMPED_ERROR.match(line)]
    assert len(errors) == 1, result.output
    message = STAMPED_ERROR.match(errors[0]).group(1)
    assert message.endswith(".") and "\n" not in message
    for word in words:
        assert word in message, message
    return message


def run_on_a_terminal(args, env):
    """Run `python -m scraper ARGS` with stderr on a pseudo-terminal; (exit code, what the terminal showed)."""
    import pty
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "scraper", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=follower)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:          # the terminal closed: the run is over
            break
        if not chunk:
            break
        seen += chunk
    code = proc.wait(30)
    os.close(leader)
    return code, seen.decode()


# --- sources files (issue 16) ---------------------------------------------------------------

EVENTS = """
[[source]]
name = "n8n"
kind = "n8n"
every = "2h"

[[source]]
name = "events"
kind = "catalogue"
priority = 2
every = "1d"
rate = 1.5
burst = 3
site = "http://127.0.0.2:8001/"
include = ["^/events/"]
type = "Event"
required = ["name", "startDate"]
fields = { organizer = "css:.organizer::text", venue = "jsonld:location.name" }
"""


def write(tmp_path, text, name="sources.toml"):
    """Write a sources file into `tmp_path`; returns its path."""
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# --- a browser in a process of its own (tests/test_browser.py) -----------------------------------

def browser_child(executable, url):
    """Entry point of a stand-in worker: render `url` in a BrowserFetcher, print one JSON line (the
    browser's pid and process group, the pids of our descendants), then wait to be killed."""
    from scraper.net.browser import BrowserFetcher
    fetcher = BrowserFetcher(executable)
    status, _, _ = fetcher.render(url, lambda u: None, 30, 2**20)
    print(json.dumps({"status": status, "browser": fetcher.browser_pid, "pids": fetcher.pids()}), flush=True)
    time.sleep(600)


def chromium_left(pids, pgid):
    """Live (not zombie) processes among `pids` or in the process group `pgid`."""
    import psutil
    left = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if (p.pid in pids or os.getpgid(p.pid) == pgid) and p.info["status"] != psutil.STATUS_ZOMBIE:
                left.append(p.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return left


def wait_gone(pids, pgid, within_s=20.0):
    """The processes still left after waiting up to `within_s` for them to go (an empty list: all gone)."""
    deadline = time.monotonic() + within_s
    while True:
        left = chromium_left(pids, pgid)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


# --- a mirror kept day after day, in-process (tests/test_atom.py, tests/test_tap.py) -------------------

class KeptMirror:
    """A mirror kept as `scraper update` keeps it, in-process: each `day()` is a walk of the listing
    (`seed --from-search` against `responses`), then a run (its `runs` row and events) that fetches every
    job the walk queued and stores it as a worker does: a renamed id's answer names it `Renamed <id>`, an
    id no longer listed answers 404 (its removal)."""

    def __init__(self, db):
        # the runs' clock starts now: a walk queues its changed ids with the real time (Queue.refetch)
        self.db, self.now, self.renamed = db, time.time(), set()

    def day(self, listed, renamed=()):
        """The walk of `listed` (ids; those of `renamed` renamed from now on), then the run; returns the run's id."""
        from tests.conftest import ANY_ROBOTS  # here: conftest imports this module

        self.renamed |= set(renamed)
        entries = {i["id"]: i for i in search_items()}
        listing = [dict(entries[i], **({"name": f"Renamed {i}"} if i in self.renamed else {})) for i in listed]
        with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
            rsps.add(responses.GET, ANY_ROBOTS, status=404)
            search_page(rsps, 1, listing, total=len(listing))
            result = invoke("seed", "--from-search", db=self.db)
        assert result.exit_code == 0, result.output
        self.now += 86_400
        conn = store.open_db(str(self.db))
        try:
            run_id = runrecord.start_run(conn, 4242, self.now, 1, "{}", "host", [n8n.SITE])
            q = Queue(conn, run_id=run_id)
            counts = {"done": 0, "failed": 0, "invalid": 0}
            while (job := q.claim("w1", self.now, 60)) is not None:
                tid, at = int(job.key.split(":")[1]), iso(self.now)
                self.now += 1
                if tid not in listed:
                    assert q.fail(job, "w1", self.now, "invalid", "gone", "HTTP 404: removed",
                                  write=lambda c, tid=tid, at=at: remove_template(c, tid, at))
                    counts["invalid"] += 1
                    continue
                body = detail_body(tid, **({"name": f"Renamed {tid}"} if tid in self.renamed else {}))
                assert q.complete(job, "w1", self.now, 10,
                                  write=lambda c, tid=tid, at=at, body=body: store_template(
                                      c, n8n.extract(body, at), {"api": body}, at))
                counts["done"] += 1
            runrecord.finish_run(conn, run_id, self.now, counts, 0)
        finally:
            conn.close()
        return run_id


@contextlib.contextmanager
def trickling_server(head):
    """A server on loopback that answers its first connection with `head` (a status line and headers promising
    more), then one byte every 0.1 s for as long as the block runs: each read is within any timeout, the whole
    answer never comes. Yields its base URL."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def trickle():
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(head)
            while not stop.wait(0.1):
                try:
                    conn.sendall(b" ")
                except OSError:
                    return

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        server.close()


def answer(handler, body, kind, status=200):
    """A whole answer from a test server's handler: its status, Content-Type and length, then the body."""
    handler.send_response(status)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class _ScriptPage(http_server.BaseHTTPRequestHandler):
    """/page: a page whose script fetches /api.json and writes its name into #app (its record comes from a
    script, as on the catalogue's /live/ pages)."""

    BODIES = {"/page": (b'<html><body><div id="app"></div><script>fetch("/api.json").then(r => r.json())'
                        b'.then(d => { document.getElementById("app").textContent = d.name; });</script></body></html>',
                        "text/html"),
              "/api.json": (b'{"name": "Jazz night"}', "application/json")}

    def do_GET(self):
        answer(self, *self.BODIES.get(self.path, (b"nothing", "text/plain")))

    def log_message(self, *args):
        pass


def script_page():
    """A `_ScriptPage` server on a free loopback port, serving in a daemon thread (the caller shuts it down)."""
    server = http_server.ThreadingHTTPServer(("127.0.0.1", 0), _ScriptPage)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()   # its shutdown: 50 ms, not 0.5 s
    return server


def assert_page_bounds(fetcher, pages, never_s):
    """A page's own request refused by its gate ends the attempt with the gate's reason, a page that never
    settles is a `timeout` (after `never_s`), one over its byte cap `too_large`: in every renderer (Playwright's,
    net/cdppage's). `pages`: the test page server's base URL (/page, /never, /big)."""
    def stop(url):
        raise HandedBack(url)

    with pytest.raises(HandedBack):
        fetcher.render(pages + "/page", stop, 20, 2**20)
    with pytest.raises(FetchError) as e:
        fetcher.render(pages + "/never", lambda u: None, never_s, 2**20)
    assert e.value.kind == "timeout"
    with pytest.raises(FetchError) as e:
        fetcher.render(pages + "/big", lambda u: None, 20, 100_000)
    assert e.value.kind == "too_large"
