"""`--notify-url` and the pings read the outbox (issue 41, item 6): a run's failure whose command was killed
between its commit and its calls is told by the next command that starts, exactly once; a failure told live
is not told again. The calls go to the receiver stand-in on 127.0.0.1."""

import json
import os

import pytest

from scraper.db import runrecord, runstate, store
from scraper.mirror import announce
from scraper.net import notify
from scripts.standin.receiver import Receiver
from tests.helpers import invoke

T0 = 1_780_000_000.0


@pytest.fixture
def hooks():
    with Receiver() as r:
        yield r


def _health(r, db):
    return notify.Health(r.url + "/p", r.url + "/hook", outbox=announce.Outbox(db))


def _paths(r):
    return [e["path"] for e in r.received()]


def _failed_run(db, pid, code=1, host=None):
    """A run that ended with `code` (its run.finished committed), run by process `pid` on `host`."""
    conn = store.open_db(db)
    run_id = runrecord.start_run(conn, pid, T0, 1, "{}", host or runstate.host(), ["n8n"])
    runrecord.finish_run(conn, run_id, T0 + 5, {"done": 0, "failed": 0, "invalid": 0}, code)
    conn.close()
    return run_id


def test_a_failure_a_crash_kept_untold_is_told_after_the_restart_exactly_once(backend, hooks):
    db = str(backend)
    store.open_db(db).close()
    _health(hooks, db).started()                 # the command that will be killed: its start ping
    _failed_run(db, pid=999_999)                 # its run failed (exit 1) and it was killed before telling
    _failed_run(db, pid=999_998, code=3, host="elsewhere")      # another machine's: it tells its own
    _failed_run(db, pid=999_997, code=0)         # a run that ended well: nothing to tell
    restarted = _health(hooks, db)
    restarted.started()
    restarted.finished(0, "next: nothing to do")
    again = _health(hooks, db)
    again.started()
    again.finished(0, "next: nothing to do")
    got = hooks.received()
    assert _paths(hooks) == ["/p/start", "/p/fail", "/hook", "/p/start", "/p", "/p/start", "/p"]
    text = json.loads(got[2]["body"])["text"]
    assert text.startswith("scraper run exited 1: some jobs failed.") and "next:" in text
    assert got[1]["body"].startswith("next:")


def test_a_failure_told_live_is_not_told_again(tmp_path, hooks):
    db = str(tmp_path / "jobs.db")
    store.open_db(db).close()
    live = _health(hooks, db)
    live.started()
    _failed_run(db, pid=os.getpid())             # this command's own run
    live.finished(1, "next: scraper retry")
    _health(hooks, db).started()
    assert _paths(hooks) == ["/p/start", "/p/fail", "/hook", "/p/start"]


def test_run_tells_the_untold_failure_before_its_start_ping(tmp_path, hooks):
    """The CLI wires it: `scraper run` (nothing pending) after a killed run's failure."""
    db = str(tmp_path / "jobs.db")
    store.open_db(db).close()
    args = ["run", "--workers", "1", "--ping-url", hooks.url + "/p", "--notify-url", hooks.url + "/hook"]
    first = invoke(*args, db=db)
    _failed_run(db, pid=999_999)
    second = invoke(*args, db=db)
    assert (first.exit_code, second.exit_code) == (0, 0), second.output
    assert _paths(hooks) == ["/p/start", "/p", "/p/fail", "/hook", "/p/start", "/p"]
