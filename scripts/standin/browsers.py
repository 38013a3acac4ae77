"""Browsers elsewhere, on loopback, for tests and benches: Debian's Chromium as a DevTools (CDP) endpoint, and
a Playwright server in front of it (Playwright's own protocol).

    with browsers.chromium(folder) as base:             # http://127.0.0.1:PORT (its /json/version, /json/list)
        ...
    with browsers.playwright_server(folder) as ws_url:  # ws://127.0.0.1:PORT/GUID, for `chromium.connect`
        ...

Each stops its whole process group on the way out (Chromium at once with SIGKILL: its profile is the
caller's folder; the Playwright server with SIGTERM, so that it closes its browser and deletes the profile it
made), then any browser group it started (Debian's
`chromium-headless-shell` is a script that runs the browser without exec, and Playwright starts its browser
in a group of its own): nothing is left running. Port 0 everywhere: the browser or the server picks a free
port and says which. Only 127.0.0.1 is listened on.
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time

from scraper.net import chromium as local_chromium

START_S = 15.0      # a cold Chromium on a busy machine takes a few seconds
STOP_S = 10.0


def _wait_for(probe, what, timeout=START_S):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = probe()
        if found:
            return found
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not start within {timeout:g} s")


def _group_gone(pgid):
    """No process of the group runs (zombies left for the init process to reap count as gone: here it
    reaped them a second or so later)."""
    import psutil
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    for p in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) == pgid:
                return False
    return True


def stop_group(proc, also=(), sig=signal.SIGTERM):
    """`sig` to `proc`'s process group (and the groups `also`), SIGKILL to whatever is left after 10 s."""
    groups = [proc.pid, *also]
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
    proc.wait()
    end = time.monotonic() + STOP_S
    while not all(map(_group_gone, groups)) and time.monotonic() < end:
        time.sleep(0.05)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def _browser_groups(pid):
    """The process groups led by descendants of `pid` (the browser Playwright started in a group of its own)."""
    import psutil
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    groups = set()
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            if os.getpgid(child.pid) == child.pid:
                groups.add(child.pid)
    return sorted(groups)


def _no_sandbox():
    return ["--no-sandbox"] if os.geteuid() == 0 else []    # as net/browser launches it


@contextlib.contextmanager
def chromium(folder, executable="chromium"):
    """Debian's Chromium, headless, with a fresh profile in `folder` and DevTools on a free loopback port:
    yields its http base URL."""
    profile, log_path = os.path.join(folder, "cdp-profile"), os.path.join(folder, "cdp.log")
    os.makedirs(profile, exist_ok=True)
    with open(log_path, "w") as err:
        proc = subprocess.Popen([local_chromium.find_browser(executable), "--headless", "--remote-debugging-port=0",
                                 f"--user-data-dir={profile}", "--no-first-run", "--disable-background-networking",
                                 "--disable-component-update", "--disable-sync", "about:blank", *_no_sandbox()],
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        def listening():
            with open(log_path) as f:
                return re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", f.read())
        found = _wait_for(listening, "Chromium's DevTools")
        yield f"http://127.0.0.1:{found.group(1)}"
    finally:
        # at once: a stand-in keeps nothing, and its profile is `folder`'s, gone with it (SIGTERM took 1.3 s)
        stop_group(proc, sig=signal.SIGKILL)


@contextlib.contextmanager
def playwright_server(folder, executable="chromium"):
    """`python -m playwright launch-server` with Debian's Chromium (plain `run-server` starts only browsers of
    Playwright's registry): yields its ws URL, which `chromium.connect()` takes. The same pip package on
    both ends, so the client's and the server's versions match."""
    config = os.path.join(folder, "playwright-server.json")
    with open(config, "w") as f:
        json.dump({"executablePath": local_chromium.find_browser(executable), "headless": True,
                   "host": "127.0.0.1", "port": 0, "args": _no_sandbox()}, f)
    proc = subprocess.Popen([sys.executable, "-m", "playwright", "launch-server", "--browser", "chromium",
                             "--config", config], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    browsers = []
    try:
        line = proc.stdout.readline().strip()
        if not line.startswith("ws://127.0.0.1:"):
            raise RuntimeError(f"the Playwright server did not start (it said {line[:200]!r})")
        browsers = _browser_groups(proc.pid)
        yield line
    finally:
        browsers = browsers or _browser_groups(proc.pid)
        stop_group(proc, also=browsers)
        proc.stdout.close()
