"""Shared fixtures: a safe environment, the stand-in site as a real process, the CLI as a real process."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "scripts" / "standin_site.py"
STANDIN_YOUTUBE = ROOT / "scripts" / "standin_youtube.py"
# A closed local port: a test that forgets to point the scraper at the stand-in fails fast
# instead of reaching the real n8n hosts.
NOWHERE = "http://127.0.0.1:9"


@pytest.fixture(autouse=True)
def safe_env(monkeypatch, tmp_path):
    monkeypatch.setenv("SCRAPER_API_URL", NOWHERE + "/api")
    monkeypatch.setenv("SCRAPER_SITE_URL", NOWHERE)
    monkeypatch.setenv("SCRAPER_DB", str(tmp_path / "jobs.db"))
    monkeypatch.setenv("SCRAPER_YOUTUBE_URL", NOWHERE)
    # the n8n-only tests run without transcripts; the transcript tests switch them on with a YouTube stand-in
    monkeypatch.setenv("SCRAPER_TRANSCRIPTS", "0")


class Standin:
    """The stand-in site running in its own process."""

    def __init__(self, proc, url):
        self.proc = proc
        self.url = url
        self.api_url = url + "/api"

    def stats(self):
        return requests.get(self.url + "/_standin/stats", timeout=5).json()

    def corpus(self):
        return requests.get(self.url + "/_standin/corpus", timeout=5).json()

    def template(self, template_id):
        return requests.get(f"{self.url}/_standin/template/{template_id}", timeout=5).json()

    def library(self, **change):
        """Change the library between runs (add=N, edit=[ids], edit_workflow=[ids], remove=[ids],
        restore=[ids], views=rounds); returns the stand-in's answer ({"added": [ids], "listed": n})."""
        resp = requests.post(self.url + "/_standin/library", json=change, timeout=5)
        resp.raise_for_status()
        return resp.json()

    def reset(self):
        requests.post(self.url + "/_standin/reset", timeout=5).raise_for_status()

    def storm(self, seconds):
        requests.post(self.url + "/_standin/storm", json={"seconds": seconds}, timeout=5).raise_for_status()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def standin():
    """A factory: standin(templates=60, rate=20, burst=5, latency_ms=0, faults="", ...) -> Standin."""
    started = []

    def start(**options):
        args = [sys.executable, str(STANDIN)]
        for key, value in options.items():
            args += [f"--{key.replace('_', '-')}", str(value)]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        line = proc.stdout.readline()
        if "listening on" not in line:
            proc.kill()
            raise RuntimeError(f"the stand-in did not start: {line!r}")
        site = Standin(proc, line.strip().rsplit(" ", 1)[1])
        started.append(site)
        return site

    yield start
    for site in started:
        site.stop()


class YouTubeStandin:
    """The YouTube stand-in running in its own process."""

    def __init__(self, proc, url):
        self.proc = proc
        self.url = url

    def stats(self):
        return requests.get(self.url + "/_standin/stats", timeout=5).json()

    def block(self, seconds, mode="recaptcha"):
        requests.post(self.url + "/_standin/block", json={"seconds": seconds, "mode": mode},
                      timeout=5).raise_for_status()

    stop = Standin.stop


def _start(script, options):
    args = [sys.executable, str(script)]
    for key, value in options.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise RuntimeError(f"the stand-in did not start: {line!r}")
    return proc, line.strip().rsplit(" ", 1)[1]


@pytest.fixture
def youtube_standin():
    """A factory: youtube_standin(rate=5, burst=2, latency_ms=0, block_after=N, block_s=S, block_mode=M)."""
    started = []

    def start(**options):
        site = YouTubeStandin(*_start(STANDIN_YOUTUBE, options))
        started.append(site)
        return site

    yield start
    for site in started:
        site.stop()


def scraper_env(site, db):
    """The environment of a scraper process pointed at the stand-in and the test's database."""
    env = dict(os.environ)
    env.update(SCRAPER_API_URL=site.api_url, SCRAPER_SITE_URL=site.url, SCRAPER_DB=str(db),
               PYTHONPATH=str(ROOT))
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
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def wait_until(predicate, timeout=30, every=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError("condition not met in time")


def status_json(site, db):
    return json.loads(scraper(site, db, "status", "--json", check=0).stdout)
