"""A warm starter for the commands the tests start: `python -m MODULE ARGS` forked from a process that has
already imported the scraper and the stand-ins, instead of a new interpreter importing them again.

A test suite starts a few hundred `scraper` commands and stand-ins; each new interpreter spent 0.2-0.5 s of
CPU importing click, requests, psutil and the scraper before it did anything, and the
parallel phase is CPU-bound on 2 cores. Here one starter per test process imports them once; each command is
a fork of it, so it is still a process of its own, with its own pid, argv, environment, working folder,
pipes, exit status and (when asked) session, and real signals reach it. What differs from a new
interpreter: the imports are done and the hash seed is the starter's. The tests marked `cold` (they measure
what a process holds, or are the acceptance run) and those about the interpreter's own start start new
interpreters.

`Popen` is subprocess.Popen with the fork done by the starter: the test sends argv, environment and
folder, and the child's three standard descriptors (SCM_RIGHTS), over a SOCK_SEQPACKET connection; the
starter answers with the pid, then with the wait status when the child ends (it waits on a pidfd).
Anything else (another program, extra descriptors, another user) is a plain subprocess. It is built on
subprocess.Popen's internals and the interpreter's exit steps (CPython 3.10-3.13); tests/test_warm.py checks
what a command sees and how it ends. On another interpreter it refuses (`REFUSED` says why), and every
command starts in a new interpreter, as with --cold.
"""

import atexit
import gc
import importlib
import json
import os
import pkgutil
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

# what the tests' commands import: every module of the scraper (the optional extras' packages are imported
# by their commands, as in a new interpreter), its heavy imports and the stand-ins
PRELOAD = ("requests", "psutil", "sqlite_utils", "scripts.standin.server",
           "scripts.standin.youtube", "scripts.standin.catalogue")

# the interpreters whose internals it was read against: subprocess.Popen's _execute_child (its arguments, in
# order), _internal_poll, _try_wait, _handle_exitstatus, _waitpid_lock and _close_pipe_fds;
# threading._shutdown and atexit._run_exitfuncs (a command's exit)
CHECKED = ("cpython", ((3, 10), (3, 11), (3, 12), (3, 13)))
INTERNALS = ((subprocess.Popen, ("_execute_child", "_internal_poll", "_try_wait", "_handle_exitstatus",
                                 "_close_pipe_fds")), (threading, ("_shutdown",)), (atexit, ("_run_exitfuncs",)))


def refused(implementation=sys.implementation.name, version=sys.version_info):
    """Why this interpreter cannot start commands warm, in a sentence; None when it can."""
    name, versions = CHECKED
    shown = f"{implementation} {version[0]}.{version[1]}"
    if implementation != name or tuple(version[:2]) not in versions:
        return (f"{shown} is not an interpreter it was checked against (CPython "
                f"{versions[0][0]}.{versions[0][1]}-{versions[-1][0]}.{versions[-1][1]}), and it relies on "
                f"CPython's internals")
    missing = [f"{getattr(owner, '__name__', owner)}.{attr}" for owner, attrs in INTERNALS for attr in attrs
               if not hasattr(owner, attr)]
    if missing:
        return f"{shown} lacks {', '.join(missing)}, which it relies on"
    return None


REFUSED = refused()
# set per test by tests/conftest.py: warm but for the tests marked `cold`, and never where REFUSED
enabled = False
_starter = None


def _preload():
    import scraper
    for name in PRELOAD:
        importlib.import_module(name)
    for info in pkgutil.walk_packages(scraper.__path__, "scraper."):
        if not info.name.endswith("__main__"):
            try:
                importlib.import_module(info.name)
            except ImportError:         # a module of an extra that is not installed: its command says so
                pass


def _serve(path):
    """The starter's loop; returns (in a forked child only) the request the child is to run."""
    _preload()
    gc.collect()
    gc.freeze()             # what preloading built stays out of the children's collections (shared pages)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(0, selectors.EVENT_READ, "parent")      # EOF: the test process is gone
    waiting = {}                                                # pidfd -> (pid, connection)
    while True:
        for key, _ in selector.select():
            if key.data == "parent":
                return None
            if key.data == "accept":
                conn, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
                request = json.loads(message)
                pid = os.fork()
                if pid == 0:
                    for pidfd, (_, other) in waiting.items():
                        os.close(pidfd)
                        other.close()
                    selector.close()
                    listener.close()
                    conn.close()
                    return request, fds
                for fd in fds:
                    os.close(fd)
                conn.send(b"%d" % pid)
                pidfd = os.pidfd_open(pid)
                waiting[pidfd] = (pid, conn)
                selector.register(pidfd, selectors.EVENT_READ, "child")
            else:
                pidfd = key.fd
                pid, conn = waiting.pop(pidfd)
                selector.unregister(pidfd)
                os.close(pidfd)
                _, status = os.waitpid(pid, 0)
                try:
                    conn.send(b"%d" % status)
                except OSError:
                    pass                                        # the test gave up on it
                conn.close()


def _become(request, fds):
    """In the forked child: take the command's descriptors, folder, environment and argv, run it as
    `python -m` would, and end as the interpreter would (`_exit`)."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        if fd > 2:
            os.close(fd)
    if request["session"]:
        os.setsid()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    sys.path[0] = request["cwd"]
    sys.argv = ["-m", *request["args"]]
    code, interrupted = 0, False
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exit:
        code = exit.code
    except KeyboardInterrupt:
        traceback.print_exc()
        interrupted = True
    except BaseException:
        traceback.print_exc()
        code = 1
    _exit(code, interrupted)


def _exit(code, interrupted):
    """End as the interpreter would after SystemExit(`code`) or an uncaught Ctrl-C, without its teardown:
    freeing every object the starter imported would write to (and so copy) all the memory the fork shares."""
    threading._shutdown()                   # the non-daemon threads first, as at an interpreter's exit
    atexit._run_exitfuncs()
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if interrupted:                         # as an interpreter ends after an uncaught Ctrl-C
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)


class _Starter:
    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="warm-")
        self.path = os.path.join(self.folder, "socket")
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.warm", self.path], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, cwd=os.path.dirname(os.path.dirname(__file__)))
        line = self.proc.stdout.readline()
        if line != b"ready\n":
            self.proc.kill()
            raise RuntimeError(f"the warm starter did not start: {line!r}")

    def alive(self):
        return self.proc.poll() is None


def _starter_now():
    global _starter
    if _starter is None or not _starter.alive():
        _starter = _Starter()
    return _starter


def family():
    """The pids of the starter and of all it started: a test process's descendants that are not the test's."""
    if _starter is None or not _starter.alive():
        return set()
    import psutil
    root = psutil.Process(_starter.proc.pid)
    return {root.pid, *(p.pid for p in root.children(recursive=True))}


def stop():
    """End the starter (at the end of the session; it also ends when its test process does)."""
    global _starter
    if _starter is not None:
        _starter.proc.stdin.close()
        _starter.proc.wait(10)
        _starter.proc.stdout.close()
        os.unlink(_starter.path)
        os.rmdir(_starter.folder)
        _starter = None


def _module_of(args, executable):
    """MODULE when `args` is `python -m MODULE ...` with this interpreter, else None."""
    args = list(args) if not isinstance(args, (str, bytes, os.PathLike)) else []
    if len(args) >= 3 and args[0] == sys.executable and args[1] == "-m" and executable is None:
        return args[2]
    return None


class Popen(subprocess.Popen):
    """subprocess.Popen whose `python -m MODULE` children are forked by the warm starter (when `enabled`)."""

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                       creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
                       restore_signals, gid, gids, uid, umask, start_new_session, *rest):
        module = _module_of(args, executable)
        self._status = None
        if (not enabled or REFUSED is not None or module is None or shell or preexec_fn or pass_fds
                or any(x is not None for x in (gid, gids, uid)) or (rest and rest[0] not in (-1, None))):
            return super()._execute_child(args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                                          startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread,
                                          c2pwrite, errread, errwrite, restore_signals, gid, gids, uid,
                                          umask, start_new_session, *rest)
        request = {"module": module, "session": bool(start_new_session), "args": [os.fsdecode(a) for a in args[3:]],
                   "cwd": os.fsdecode(os.path.abspath(cwd if cwd is not None else os.getcwd())),
                   "env": {os.fsdecode(k): os.fsdecode(v) for k, v in (env if env is not None
                                                                       else os.environ).items()}}
        fds = [p2cread if p2cread != -1 else 0, c2pwrite if c2pwrite != -1 else 1,
               errwrite if errwrite != -1 else 2]
        self._status = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._status.connect(_starter_now().path)
            socket.send_fds(self._status, [json.dumps(request).encode()], fds)
            self.pid = int(self._status.recv(64))
        finally:
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)
        self._child_created = True

    def _status_now(self, block):
        """The child's wait status from the starter, or None while it runs (`block`: wait for it)."""
        self._status.setblocking(block)
        try:
            answer = self._status.recv(64)
        except BlockingIOError:
            return None
        finally:
            self._status.setblocking(True)
        self._status.close()
        return int(answer) if answer else 255 << 8          # the starter died: an unknown failure

    def _internal_poll(self, _deadstate=None, **_):
        if self._status is None:
            return super()._internal_poll(_deadstate)
        if self.returncode is None and self._waitpid_lock.acquire(False):
            try:
                if self.returncode is None:
                    status = self._status_now(block=False)
                    if status is not None:
                        self._handle_exitstatus(status)
            finally:
                self._waitpid_lock.release()
        return self.returncode

    def _try_wait(self, wait_flags):
        if self._status is None:
            return super()._try_wait(wait_flags)
        status = self._status_now(block=not wait_flags & os.WNOHANG)
        return (0, 0) if status is None else (self.pid, status)


def run(args, *, timeout=None, input=None, check=False, **options):
    """subprocess.run through `Popen` (capture_output, check, text and the rest as there)."""
    if options.pop("capture_output", False):
        options["stdout"] = options["stderr"] = subprocess.PIPE
    if input is not None:
        options["stdin"] = subprocess.PIPE
    with Popen(args, **options) as proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if check and proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, proc.args, out, err)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


if __name__ == "__main__":
    served = _serve(sys.argv[1])
    if served is not None:
        _become(*served)
