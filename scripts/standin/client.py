"""Start a stand-in as its own process and steer it through its control routes.

The one start helper and the one client of the tests (``tests/conftest.py``), the benchmarks and the
demo::

    with client.start(templates=60, rate=20, burst=5) as site:       # python -m scripts.standin ...
        ...  # point the scraper at site.api_url and site.url
        site.stats()["requests"]
    youtube = client.start(youtube=True, rate=5, block_after=9)     # python -m scripts.standin.youtube

Keyword options become command-line options (``latency_ms=40`` -> ``--latency-ms 40``). Standard
library only; only 127.0.0.1 is ever contacted.
"""

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

# the repository's root: `python -m scripts.standin` resolves from there, whatever the caller's folder
ROOT = Path(__file__).resolve().parents[2]
LOOPBACK_URL = "http://127.0.0.1:"


class StandinError(RuntimeError):
    """The stand-in process did not start."""


class Standin:
    """A running stand-in process: its URL, its counters, and the control routes under ``/_standin``."""

    def __init__(self, proc, url):
        if not url.startswith(LOOPBACK_URL):
            raise StandinError(f"the stand-in must listen on 127.0.0.1, not {url!r}")
        self.proc = proc
        self.url = url
        self.api_url = url + "/api"

    def _call(self, path, body=None):
        """GET `path` (POST with a JSON body when given); the answer's JSON. HTTP errors raise HTTPError."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method="GET" if data is None else "POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())

    def stats(self):
        """The counters (``GET /_standin/stats``)."""
        return self._call("/_standin/stats")

    def corpus(self):
        """Which ids exist, are missing, removed or carry a fault (``GET /_standin/corpus``; n8n only)."""
        return self._call("/_standin/corpus")

    def template(self, template_id):
        """The detail answer of one template, without faults and uncounted (n8n only)."""
        return self._call(f"/_standin/template/{template_id}")

    def library(self, **change):
        """Change the library between runs (add=N, edit=[ids], edit_workflow=[ids], remove=[ids],
        restore=[ids], views=rounds); returns the stand-in's answer ({"added": [ids], "listed": n})."""
        return self._call("/_standin/library", change)

    def reset(self):
        """Zero the counters, refill the bucket, end any storm (n8n only)."""
        return self._call("/_standin/reset", {})

    def storm(self, seconds):
        """Answer every counted request with 503 for `seconds` (n8n only)."""
        return self._call("/_standin/storm", {"seconds": seconds})

    def block(self, seconds, mode="recaptcha"):
        """Block this address for `seconds` as YouTube does (YouTube only)."""
        return self._call("/_standin/block", {"seconds": seconds, "mode": mode})

    def stop(self):
        """SIGTERM, then SIGKILL after 10 s; idempotent."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def command(*args, youtube=False, **options):
    """The command line that runs a stand-in: raw `args`, then each option as ``--name value``."""
    argv = [sys.executable, "-m", "scripts.standin.youtube" if youtube else "scripts.standin", *map(str, args)]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


def start(*args, youtube=False, **options):
    """Start a stand-in process and wait for its ``listening on URL`` line; returns a ``Standin``."""
    proc = subprocess.Popen(command(*args, youtube=youtube, **options), cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    if "listening on " not in line:
        proc.kill()
        proc.wait()
        raise StandinError(f"the stand-in did not start: {line.strip()!r}")
    return Standin(proc, line.split()[-1])
