"""Helpers shared by the test files (fixtures live in conftest.py): the CLI as a real process, counts and
rows of a database, the per-row check of a run against the stand-in's corpus, real n8n answers built
from the stand-in's data, and the in-process CLI with its one-sentence errors."""

import copy
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from functools import cache
from pathlib import Path

from click.testing import CliRunner
from responses import matchers

from scraper import cli
from scraper.db import store
from scraper.sites import n8n
from scripts.standin.corpus import DATA_DIR, load_json

ROOT = Path(__file__).resolve().parent.parent
# A closed local port: a test that forgets to point the scraper at the stand-in fails fast
# instead of reaching the real n8n hosts.
NOWHERE = "http://127.0.0.1:9"

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
    """The environment of a scraper process pointed at the stand-in and the test's database."""
    env = dict(os.environ)
    env.update(SCRAPER_API_URL=site.api_url, SCRAPER_SITE_URL=site.url, SCRAPER_DB=str(db))
    return env


def scraper(site, db, *args, timeout=300, check=None, env=None):
    """Run `scraper ARGS` as a real process (`env`: extra variables); returns the CompletedProcess."""
    done = subprocess.run([sys.executable, "-m", "scraper", *args], env={**scraper_env(site, db), **(env or {})},
                          capture_output=True, text=True, timeout=timeout)
    if check is not None:
        assert done.returncode == check, done.stderr[-3000:]
    return done


def start_scraper(site, db, *args):
    """Start `scraper ARGS` in the background (for signal tests)."""
    return subprocess.Popen([sys.executable, "-m", "scraper", *args], env=scraper_env(site, db),
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
    return json.loads(scraper(site, db, "status", "--json", check=0).stdout)

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
    return faults, jobs, stored


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


# --- in-process: a clock, the jobs of a queue, the click commands ---------------------------------

class Clock:
    """A clock the test moves by hand: call it for the time, set `.t` to move it."""

    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


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
