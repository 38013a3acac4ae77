"""The supervisor as the child subreaper of its tree: what a dead worker left comes to it and is killed at
the end of the run (real processes, real signals)."""

import json
import subprocess
import sys

import psutil

from tests.helpers import ROOT, wait_gone

SUPERVISOR = r"""
import json, os, subprocess, sys, time
from scraper.pool import orphans
known = orphans.children()
assert orphans.subreaper(True)
pid = os.fork()
if pid == 0:    # a worker that starts a process in a group of its own (as Playwright starts Chromium), then dies
    g = subprocess.Popen(["sleep", "600"], start_new_session=True)
    print(json.dumps({"grandchild": g.pid}), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
time.sleep(0.2)
adopted = sorted(orphans.adopted(known))
killed = orphans.kill(known)
print(json.dumps({"adopted": adopted, "killed": killed}), flush=True)
"""


def test_a_dead_workers_processes_come_to_the_supervisor_and_are_killed():
    out = subprocess.run([sys.executable, "-c", SUPERVISOR], cwd=ROOT, capture_output=True, text=True, timeout=60)
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    grandchild = lines[0]["grandchild"]
    try:
        assert lines[1] == {"adopted": [grandchild], "killed": 1}, out.stderr
        assert wait_gone({grandchild}, grandchild) == []
    finally:
        if psutil.pid_exists(grandchild):
            psutil.Process(grandchild).kill()
