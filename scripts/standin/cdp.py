"""A browser elsewhere, on loopback: Debian's Chromium, headless, with ``--remote-debugging-port=0`` and a
fresh profile, as a DevTools (CDP) endpoint for ``browser_endpoint = "cdp:URL"`` (the tests and
scripts/bench_browser.py start it; the CDP relay, ``cdprelay``, and the Browserbase-like stand-in,
``browserbase``, stand in front of it).

    with cdp.endpoint(executable, folder) as (url, proc):     # url: http://127.0.0.1:PORT
        ...

It runs in a session of its own (outside the caller's process group); at the end its whole process group is
killed at once: a stand-in keeps nothing, its profile is the caller's folder (SIGTERM took 1.3 s), and Debian's
``chromium-headless-shell`` is a shell script that runs the browser without exec, so ending the script alone
would leave the browser running, orphaned. ``stop_group`` also stops the Playwright server of ``browsers``.
Standard library only, and psutil to tell a zombie from a process that still runs.
"""

import contextlib
import os
import re
import signal
import subprocess
import time

START_S = 15.0      # Chromium says where it listens within this, or it is not going to (a cold one on a busy machine)
STOP_S = 10.0       # after the signal, what is left of the group then is killed
FLAGS = ("--headless", "--remote-debugging-port=0", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync")


def no_sandbox():
    """The flag net/browser launches Chromium with as root (its sandbox refuses to start as root)."""
    return ["--no-sandbox"] if os.geteuid() == 0 else []


@contextlib.contextmanager
def endpoint(executable, folder):
    """Start `executable` as a DevTools endpoint with its profile and log in `folder`; yields (its http base
    URL, the process); kills its whole process group at the end, however the block ends."""
    profile, log_path = os.path.join(folder, "cdp-profile"), os.path.join(folder, "cdp.log")
    os.makedirs(profile, exist_ok=True)
    with open(log_path, "w") as err:
        proc = subprocess.Popen([executable, *FLAGS, f"--user-data-dir={profile}", "about:blank", *no_sandbox()],
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        deadline = time.monotonic() + START_S
        while not (found := re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", _read(log_path))):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"Chromium did not listen as a DevTools endpoint: {_read(log_path)[-500:]!r}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{found.group(1)}", proc
    finally:
        stop_group(proc, sig=signal.SIGKILL)


def stop_group(proc, also=(), sig=signal.SIGTERM):
    """`sig` to `proc`'s process group (and the groups `also`), SIGKILL to whatever is left after STOP_S."""
    groups = [proc.pid, *also]
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
    proc.wait()
    deadline = time.monotonic() + STOP_S
    while not all(map(_group_gone, groups)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


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


def _read(path):
    with open(path, errors="replace") as f:
        return f.read()
