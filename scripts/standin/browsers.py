"""A Playwright server on loopback, for tests and benches: ``python -m playwright launch-server`` driving
Debian's Chromium, for ``browser_endpoint = "playwright:WS-URL"`` (Playwright's own protocol; the plain CDP
endpoint is ``cdp``'s).

    with browsers.playwright_server(folder) as ws_url:  # ws://127.0.0.1:PORT/GUID, for `chromium.connect`
        ...

On the way out its process group gets SIGTERM (so that it closes its browser and deletes the profile it made),
then any browser group it started (Playwright starts its browser in a group of its own) is stopped too
(``cdp.stop_group``): nothing is left running. Port 0: the server picks a free port and says which. Only
127.0.0.1 is listened on.
"""

import contextlib
import json
import os
import subprocess
import sys

from scraper.net import chromium as local_chromium

from .cdp import no_sandbox, stop_group


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


@contextlib.contextmanager
def playwright_server(folder, executable="chromium"):
    """`python -m playwright launch-server` with Debian's Chromium (plain `run-server` starts only browsers of
    Playwright's registry): yields its ws URL, which `chromium.connect()` takes. The same pip package on
    both ends, so the client's and the server's versions match."""
    config = os.path.join(folder, "playwright-server.json")
    with open(config, "w") as f:
        json.dump({"executablePath": local_chromium.find_browser(executable), "headless": True,
                   "host": "127.0.0.1", "port": 0, "args": no_sandbox()}, f)
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
