"""What a run's workers leave behind: the supervisor is the child subreaper of its process tree, so the
processes a worker started (a browser's driver, Chromium, its watchdog) come to the supervisor when that
worker dies, instead of to init. The supervisor reaps them as they end, and kills those left at the end
of the run. (A kill -9 of the supervisor itself is covered by each browser's watchdog; see net/browser.)"""

import collections
import contextlib
import ctypes
import logging
import os
import signal

import psutil

log = logging.getLogger(__name__)

PR_SET_CHILD_SUBREAPER = 36     # linux/prctl.h


def subreaper(on):
    """Make this process the subreaper of its descendants (or stop); False where the kernel has no such thing."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def children():
    """Pids of this process's children now."""
    try:
        return {p.pid for p in psutil.Process().children()}
    except psutil.Error:
        return set()


def adopted(known):
    """Children that are neither workers nor there before the run (`known`): orphans of dead workers."""
    return children() - set(known)


def reap(known):
    """Collect the exit status of adopted orphans that ended (else they stay zombies); never a worker's,
    which multiprocessing collects itself."""
    for pid in adopted(known):
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def kill(known):
    """Kill every adopted orphan, its descendants and the process group it leads (Chromium's); returns how
    many processes were killed (those that had ended already, zombies waiting to be collected, are only
    collected: a browser closed just before the end leaves a few)."""
    reap(known)
    victims, names = [], collections.Counter()
    for pid in adopted(known):
        try:
            p = psutil.Process(pid)
            victims += [p, *p.children(recursive=True)]
        except psutil.Error:
            continue
    for p in victims:
        with contextlib.suppress(psutil.Error):
            names[p.name()] += 1
    for p in victims:
        try:
            if os.getpgid(p.pid) == p.pid:
                os.killpg(p.pid, signal.SIGKILL)
            p.kill()
        except (ProcessLookupError, psutil.Error):
            pass
    for p in victims:
        try:
            os.waitpid(p.pid, 0)
        except ChildProcessError:
            pass    # not ours: its own parent (or init) collects it
    if victims:
        log.warning("killed %d process(es) the workers left behind (%s)", len(victims),
                    ", ".join(f"{name} x{n}" for name, n in sorted(names.items())))
    return len(victims)
