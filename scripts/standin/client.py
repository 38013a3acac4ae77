"""Start a stand-in as its own process and steer it through its control routes.

The one start helper and the one client of the tests (``tests/conftest.py``), the benchmarks and the
demo::

    with client.start(templates=60, rate=20, burst=5) as site:       # python -m scripts.standin ...
        ...  # point the scraper at site.api_url and site.url
        site.stats()["requests"]
    youtube = client.start(youtube=True, rate=5, block_after=9)     # python -m scripts.standin.youtube
    events = client.start(catalogue=True, events=60, seed=1)         # python -m scripts.standin.catalogue
    events.truth()["events"]; events.change(add=2, edit=[ids], remove=[ids])
    hook = client.start(kind="receiver"); hook.answer(503, retry_after=7); hook.received()
    relay = client.start(kind="relay", upstream=cdp_url, max_sessions=2); relay.relay_stats(); relay.cut()
    etl = client.start(kind="etl", spelling="snake"); etl.etl_state()["runs"]

Keyword options become command-line options (``latency_ms=40`` -> ``--latency-ms 40``,
``robots="rules", robots_crawl_delay=2`` -> ``--robots rules --robots-crawl-delay 2``). Standard library
only; only 127.0.0.1 and 127.0.0.2 (the catalogue's default) are ever contacted.
"""

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from .timeline import rate_series

# the repository's root: `python -m scripts.standin` resolves from there, whatever the caller's folder
ROOT = Path(__file__).resolve().parents[2]
LOOPBACK_URL = "http://127.0.0.1:"
# what starts a stand-in's process: the test suite puts its warm starter here (tests/warm.py)
popen = subprocess.Popen
LOOPBACK_URLS = (LOOPBACK_URL, "http://127.0.0.2:")
MODULES = {"n8n": "scripts.standin", "youtube": "scripts.standin.youtube", "catalogue": "scripts.standin.catalogue",
           "receiver": "scripts.standin.receiver", "etl": "scripts.standin.etl", "relay": "scripts.standin.cdprelay"}


class StandinError(RuntimeError):
    """The stand-in process did not start."""


class Standin:
    """A running stand-in process: its URL, its counters, and the control routes under ``/_standin``."""

    def __init__(self, proc, url):
        if not url.startswith(LOOPBACK_URLS):
            raise StandinError(f"the stand-in must listen on 127.0.0.1 or 127.0.0.2, not {url!r}")
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
        """Zero the counters and the request log, refill the bucket, end any storm (n8n and catalogue)."""
        return self._call("/_standin/reset", {})

    def clients(self, ban=(), secrets=()):
        """Answer 403 to requests from the source addresses `ban` (a proxy's outgoing address); count as
        leaked any request carrying one of `secrets` or a Proxy-Authorization header (``stats()["by_address"]``,
        ``stats()["secrets_seen"]``; n8n only)."""
        return self._call("/_standin/clients", {"ban": list(ban), "secrets": list(secrets)})

    def storm(self, seconds, share=1.0):
        """Answer every counted request (or `share` of them, evenly spread) with 503 for `seconds` (n8n only)."""
        return self._call("/_standin/storm", {"seconds": seconds, "share": share})

    def block(self, seconds, mode="recaptcha"):
        """Block this address for `seconds` as YouTube does (YouTube only)."""
        return self._call("/_standin/block", {"seconds": seconds, "mode": mode})

    def robots(self, mode=None, **rules):
        """Change robots.txt (``POST /_standin/robots``): mode none/rules/404/503/429/unreachable (for_s=S: for
        S seconds, then the mode before), and the rules
        (body=TEXT, disallow=[prefixes], disallow_ids="1", allow=[...], crawl_delay=S, request_rate="1/5",
        sitemap="/sitemap.xml"; given rules replace the earlier ones). Returns {"mode", "body"}."""
        change = dict(rules)
        if mode is not None:
            change["mode"] = mode
        return self._call("/_standin/robots", change)

    def robots_info(self):
        """The robots.txt mode and the body of 'rules' mode (``GET /_standin/robots``)."""
        return self._call("/_standin/robots")

    def robots_requests(self):
        """How many times /robots.txt was requested (since the start or the last reset)."""
        return self.stats()["robots"]

    def slow(self, factor=10, seconds=20, after=0, base_ms=None):
        """Start a slow phase: answers wait factor x the base latency for `seconds`, from `after` seconds on
        (``seconds=0`` ends any phase now). Returns {"slow_phase", "slow_phases"} (times since the start)."""
        body = {"factor": factor, "seconds": seconds, "after": after}
        if base_ms is not None:
            body["base_ms"] = base_ms
        return self._call("/_standin/slow", body)

    def request_log(self, kind=None, since=0.0):
        """``GET /_standin/requests``: {"t0_wall", "now_s", "by_kind": {kind: [arrival s since start]},
        "rejected_429": [s], "slow_phases": [{"start_s", "end_s", "factor", "latency_ms"}]}."""
        query = "&".join(f"{k}={v}" for k, v in (("kind", kind), ("since", since)) if v)
        return self._call("/_standin/requests" + (f"?{query}" if query else ""))

    def rate_series(self, kind=None, bucket_s=1.0):
        """Requests per bucket of `bucket_s` seconds since the start (all kinds, or one), up to now."""
        log = self.request_log(kind)
        times = sorted(t for series in log["by_kind"].values() for t in series)
        return rate_series(times, bucket_s, until=log["now_s"])

    def truth(self):
        """The expected records (``GET /_standin/truth``; catalogue only): {"events": [...], "removed",
        "pages", "seed"}."""
        return self._call("/_standin/truth")

    def change(self, add=0, edit=(), remove=()):
        """Change the catalogue between runs (``POST /_standin/catalogue``; catalogue only); returns
        {"added": [ids], "events": n}."""
        return self._call("/_standin/catalogue", {"add": add, "edit": list(edit), "remove": list(remove)})

    def received(self):
        """Every request the webhook receiver logged: [{at, method, path, status, headers, body}] (receiver only)."""
        return self._call("/_standin/received")["requests"]

    def answer(self, status=200, retry_after=None, hang_s=60.0, delay_s=0.0):
        """What the webhook receiver answers from now on: a status (after `delay_s`), or "hang" (receiver only)."""
        return self._call("/_standin/answer", {"status": status, "retry_after": retry_after, "hang_s": hang_s,
                                               "delay_s": delay_s})

    def etl_state(self):
        """The ETL API's runs with their items, its counters and faults (ETL only)."""
        return self._call("/_standin/etl")

    def etl_control(self, **change):
        """Steer the ETL API: spelling=, fail=N, slow=N, slow_s=S, hostile=N (ETL only)."""
        return self._call("/_standin/etl", change)

    def relay_stats(self):
        """The CDP relay's counters: sessions open, the most open at once, admitted, refused, cut (relay only)."""
        return self._call("/_standin/stats")

    def cut(self, on=None, times=1):
        """Cut every session the CDP relay holds now, or, with `on`, each session whose upstream sends that
        text, the next `times` times (relay only)."""
        return self._call("/_standin/cut", {"on": on, "times": times} if on else {})

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


def _module(youtube, catalogue, kind=None):
    if sum(map(bool, (youtube, catalogue, kind))) > 1:
        raise ValueError("one of youtube, catalogue or kind")
    return MODULES[kind or ("youtube" if youtube else "catalogue" if catalogue else "n8n")]


def command(*args, youtube=False, catalogue=False, kind=None, **options):
    """The command line that runs a stand-in: raw `args`, then each option as ``--name value``."""
    argv = [sys.executable, "-m", _module(youtube, catalogue, kind), *map(str, args)]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


def start(*args, youtube=False, catalogue=False, kind=None, **options):
    """Start a stand-in process (n8n; ``youtube=True``; ``catalogue=True``: the events catalogue, on
    127.0.0.2 unless ``host="127.0.0.1"``; ``kind="receiver"``, ``"etl"`` or ``"relay"``: the CDP relay) and
    wait for its ``listening on URL`` line; returns a ``Standin``."""
    proc = popen(command(*args, youtube=youtube, catalogue=catalogue, kind=kind, **options), cwd=ROOT,
                 stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "listening on " not in line:
        proc.kill()
        proc.wait()
        raise StandinError(f"the stand-in did not start: {line.strip()!r}")
    return Standin(proc, line.split()[-1])
