"""A browser elsewhere, on loopback: Debian's Chromium, headless, with ``--remote-debugging-port=0`` and a
fresh profile, as a DevTools (CDP) endpoint for ``browser_endpoint = "cdp:URL"`` (the tests and
scripts/bench_browser.py start it; the CDP relay, ``cdprelay``, can stand in front of it).

    with cdp.endpoint(executable, folder) as (url, proc):     # url: http://127.0.0.1:PORT
        ...

It runs in a session of its own (outside the caller's process group); at the end its whole process group is
stopped: Debian's ``chromium-headless-shell`` is a shell script that runs the browser without exec, so ending
the script alone would leave the browser running, orphaned. Standard library only.
"""

import contextlib
import os
import re
import signal
import subprocess
import time

START_S = 15.0      # Chromium says where it listens within this, or it is not going to
STOP_S = 10.0       # after SIGTERM, what is left of the group then is killed
FLAGS = ("--headless", "--remote-debugging-port=0", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync")


@contextlib.contextmanager
def endpoint(executable, folder):
    """Start `executable` as a DevTools endpoint with its profile and log in `folder`; yields (its http base
    URL, the process); stops its whole process group at the end, however the block ends."""
    profile, log_path = os.path.join(folder, "cdp-profile"), os.path.join(folder, "cdp.log")
    os.makedirs(profile, exist_ok=True)
    with open(log_path, "w") as err:
        proc = subprocess.Popen([executable, *FLAGS, f"--user-data-dir={profile}", "about:blank",
                                 *(["--no-sandbox"] if os.geteuid() == 0 else [])],    # as net/browser launches it
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        deadline = time.monotonic() + START_S
        while not (found := re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", _read(log_path))):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"Chromium did not listen as a DevTools endpoint: {_read(log_path)[-500:]!r}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{found.group(1)}", proc
    finally:
        stop_group(proc)


def stop_group(proc):
    """SIGTERM to `proc`'s process group, SIGKILL to whatever of it is left after STOP_S."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait()
    deadline = time.monotonic() + STOP_S
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _read(path):
    with open(path, errors="replace") as f:
        return f.read()
