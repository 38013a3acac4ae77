"""The system's Chromium: finding it, its launch flags, the one-sentence check before any work, and the
browser slots that bound how many browsers the pool runs at once (each costs about 250 MB of PSS).

Nothing here is ever downloaded: the browser is the system's (Debian's `chromium`), or `--browser-path`.
"""

import contextlib
import fcntl
import os
import shutil

from scraper.base.errors import ConfigError
from scraper.base.settings import BROWSER

LAUNCH_FLAGS = (
    "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
    # crashpad's handlers double-fork out of the browser's process group and tree: a leak by design
    "--disable-crashpad-for-testing",
)
# Lean memory flags, measured (one browser after 10 catalogue pages, PSS of its processes: 354 MB by
# default, 280 MB with one renderer, 255 MB with the GPU and network services folded into the browser
# process): one renderer for every site instead of one per site, no GPU or network process of their own,
# a small V8 heap, no extensions.
LEAN_FLAGS = (
    "--renderer-process-limit=1", "--in-process-gpu", "--enable-features=NetworkServiceInProcess2",
    "--disable-features=site-per-process,Translate,MediaRouter",
    "--disable-site-isolation-trials", "--js-flags=--max-old-space-size=128",
    "--disable-dev-shm-usage", "--disable-extensions", "--disable-breakpad", "--mute-audio",
    "--disable-renderer-backgrounding", "--metrics-recording-only",
)
NEEDS_BROWSER = "install Debian's chromium or set --browser-path"
SLOT_WAIT_S = 0.2               # how often a worker without a browser slot looks again
BUSY_PROCESS_MB = 40        # measured (2026-11): a python process once it has worked jobs (protego, the parsers):
                            # 30-40 MB of PSS; the browsers are planned on it
# Measured: a real 4-worker `auto` run with 2 browsers peaked at 977-1043 MB of PSS: the python processes
# 181 MB, Chromium's processes about 210 MB a browser, and each browser's Playwright driver (node) about
# 180 MB. So a browser costs about 390-430 MB with its driver; with 430, 4 workers under 1 GB get one
# browser and the pool stays under its ceiling (2 browsers went over it under load).
BROWSER_MB = 430


def slots_for(memory_limit_mb, workers):
    """How many browsers may be open at once in the pool: what fits under the memory limit once the
    supervisor and the workers have their part, at least one, at most one per worker."""
    room = memory_limit_mb - BUSY_PROCESS_MB * (workers + 1)
    return max(1, min(workers, int(room // BROWSER_MB)))


# Debian's headless build of the same Chromium (package chromium-headless-shell), which Playwright itself
# launches for headless pages. Measured on the events stand-in (25 script-built pages, one browser, the
# lean flags): 0.21 s of CPU and 0.29 s a page, 301 MB of PSS, against 0.65 s, 0.72 s and 451 MB for the
# full browser, which starts the parts of a desktop browser a headless page never uses.
HEADLESS_NAME = "chromium-headless-shell"


def find_browser(path):
    """The executable for `path` (a file path, or a name looked up on PATH), or None. The default name,
    `chromium`, is Debian's headless shell of it when that is installed, else the full browser; a path, or
    any other name, is used as it is."""
    if not path:
        return None
    if os.sep in path:
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    if path == BROWSER:
        return shutil.which(HEADLESS_NAME) or shutil.which(path)
    return shutil.which(path)


def problem(path):
    """The one sentence saying why no browser can be started with `path`, or None when one can (the check
    `seed` and `run` make before any work when a source needs a browser)."""
    try:
        import playwright  # noqa: F401 - only whether the optional extra is installed
    except ImportError:
        return "a source needs a browser, but Playwright is missing: pip install 'scraper[browser]'."
    if find_browser(path) is None:
        return f"a source needs a browser, but no Chromium was found at {path!r}: {NEEDS_BROWSER}."
    return None


def require(path):
    """The browser's executable; ConfigError (the one sentence) when there is none."""
    sentence = problem(path)
    if sentence:
        raise ConfigError(sentence)
    return find_browser(path)


def launch_args(lean=True):
    """Chromium's flags: --no-sandbox only as root (Chromium refuses to run sandboxed as root)."""
    args = list(LAUNCH_FLAGS) + (list(LEAN_FLAGS) if lean else [])
    if os.geteuid() == 0:
        args.append("--no-sandbox")     # (--no-zygote would save a process but crashes with crashpad off)
    return args


class BrowserSlots:
    """At most `n` browsers open at once across the pool's processes: one byte-range lock each in one file
    beside the database (held while a browser lives; the kernel frees it when its process dies)."""

    def __init__(self, path, n):
        self.path, self.n = path, n
        self.fd = None
        self.held = None
        self.wanting = False

    def try_acquire(self):
        """Take a free slot; False when all are taken, or when another process waits for one with a page it
        cannot give back: the slot a holder closed for it is left to it (the holder, back first from its
        own look, would otherwise take it again and again, launching a browser for every page)."""
        if self.held is not None:
            return True
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not self.wanting and self.wanted():
            return False
        for i in range(self.n):
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, i)
            except OSError:
                continue
            self.held = i
            return True
        return False

    def release(self):
        if self.held is not None:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, self.held)
            self.held = None

    # A worker that waits for a slot with a job it cannot hand back for free (its page already fetched by
    # plain HTTP) says so with a shared lock on the byte after the slots; a holder that sees it closes its
    # browser after the page it is on, so that worker is not held up for the rest of the run.

    def want(self):
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, self.n)
        except OSError:
            return  # a holder is looking this instant: the next look says it again
        self.wanting = True

    def unwant(self):
        if self.fd is not None:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, self.n)
        self.wanting = False

    def wanted(self):
        """True when another process waits for a slot with a page it cannot give back."""
        if self.fd is None:
            return False
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, self.n)
        except OSError:
            return True
        fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, self.n)
        return False

    # A remote endpoint's slots also say when a session of the pool last opened or rendered a page: the lock
    # file's mtime. An endpoint that refuses while others are served is full; one that serves nobody is down.

    def served(self):
        os.utime(self.path)

    def served_at(self):
        """Wall time a session last opened or rendered a page (or the file was made), None without the file."""
        try:
            return os.stat(self.path).st_mtime
        except FileNotFoundError:
            return None

    # A worker that decides where a page of a remote source goes (policy/sessions: its session, a new one, or a
    # wait) holds the byte after the wanting one meanwhile, so two workers never decide on the same view.

    @contextlib.contextmanager
    def picking(self):
        """Held while one process decides (a read of the run's sessions and a write of its answer: milliseconds)."""
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.lockf(self.fd, fcntl.LOCK_EX, 1, self.n + 1)
        try:
            yield
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, self.n + 1)

    def close(self):
        self.release()
        self.unwant()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def sources_without_browser(settings, sources):
    """(sentence, names): when some of `sources` (scraper.base.sources.Source) use fetcher browser or auto and
    no browser can be started, the one sentence `seed` and `run` print before any work, and the names of
    those sources (their jobs stay pending, the run exits 3); (None, ()) otherwise."""
    # a source rendered elsewhere (a remote browser_endpoint) needs no Chromium here
    names = tuple(s.name for s in sources if s.opt("fetcher", "http") in ("browser", "auto")
                  and not settings.browser_of(s).endpoint.remote)
    sentence = problem(settings.browser_path) if names else None
    if sentence is None:
        return None, ()
    return f"{sentence[:-1]} (source{'s' if len(names) > 1 else ''} {', '.join(names)} left pending).", names
