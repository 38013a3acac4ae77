"""The warm starter (tests/warm.py) gives a command what a new interpreter would: its own process, argv,
environment, folder, pipes, session and exit status, with real signals; only the imports are done."""

import json
import os
import signal
import subprocess
import sys

import pytest

from tests import warm

# a module run with -m that reports what it was given, then exits as its first argument says
PROBE = """
import json, os, sys, time
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "env": os.environ.get("WARM_PROBE"),
                  "tz": time.strftime("%Z", time.localtime(0)), "pid": os.getpid(), "ppid": os.getppid(),
                  "sid": os.getsid(0), "stdin": sys.stdin.read(), "warm": "scraper.pool.supervisor" in sys.modules}))
sys.stdout.flush()
how = sys.argv[1]
if how == "wait":
    time.sleep(60)
elif how == "interrupt":
    raise KeyboardInterrupt
elif how == "message":
    sys.exit("one sentence")
sys.exit(int(how))
"""


@pytest.fixture
def probe(tmp_path, monkeypatch):
    (tmp_path / "warm_probe.py").write_text(PROBE)
    monkeypatch.setattr(warm, "enabled", True)

    def start(*args, **options):
        return warm.Popen([sys.executable, "-m", "warm_probe", *args], cwd=tmp_path, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "WARM_PROBE": "yes", "TZ": "Asia/Tokyo"}, **options)
    return start


def test_a_warm_command_gets_its_own_argv_folder_environment_stdin_and_exit_code(probe, tmp_path):
    proc = probe("3", "x y")
    out, err = proc.communicate("typed\n", timeout=30)
    seen = json.loads(out)
    assert proc.returncode == 3, err
    assert seen["argv"][1:] == ["3", "x y"] and seen["argv"][0].endswith("warm_probe.py")
    assert seen["cwd"] == str(tmp_path) and seen["env"] == "yes" and seen["tz"] == "JST"
    assert seen["stdin"] == "typed\n" and seen["pid"] == proc.pid
    assert seen["warm"], "the command was not forked from the starter"
    assert seen["ppid"] != os.getpid() and seen["sid"] == os.getsid(0)


def test_exits_and_signals_end_a_warm_command_as_they_end_a_new_interpreter(probe):
    proc = probe("message")
    _, err = proc.communicate("", timeout=30)
    assert proc.returncode == 1 and err.strip() == "one sentence"
    proc = probe("interrupt")
    _, err = proc.communicate("", timeout=30)
    assert proc.returncode == -signal.SIGINT and "KeyboardInterrupt" in err
    proc = probe("wait")
    proc.stdin.close()
    assert json.loads(proc.stdout.readline())["pid"] == proc.pid
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(0.2)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL
    proc.stdout.close()
    proc.stderr.close()


def test_a_new_session_and_a_cold_start_are_what_they_say(probe, monkeypatch):
    proc = probe("0", start_new_session=True)
    out, _ = proc.communicate("", timeout=30)
    seen = json.loads(out)
    assert proc.returncode == 0 and seen["sid"] == seen["pid"] == proc.pid
    monkeypatch.setattr(warm, "enabled", False)
    proc = probe("0")
    out, _ = proc.communicate("", timeout=30)
    seen = json.loads(out)
    assert seen["ppid"] == os.getpid() and not seen["warm"]


def test_it_refuses_an_interpreter_it_was_not_checked_against_and_the_suite_starts_cold(probe, monkeypatch):
    """It relies on CPython's internals: on another version or implementation it says why, once, at the top
    of the run, and every command starts in a new interpreter (issue 46)."""
    if sys.implementation.name == "cpython" and sys.version_info[:2] in warm.CHECKED[1]:
        assert warm.REFUSED is None         # this machine's: the suite runs warm
    for implementation, version in (("cpython", (3, 14, 0)), ("cpython", (3, 9, 18)), ("pypy", (3, 10, 14))):
        said = warm.refused(implementation, version)
        assert f"{implementation} {version[0]}.{version[1]} is not an interpreter it was checked against" in said
    assert warm.refused("cpython", (3, 12, 1)) is None
    monkeypatch.setattr(warm, "REFUSED", warm.refused("cpython", (3, 14, 0)))
    proc = probe("0")                     # enabled, but refused: a new interpreter
    out, _ = proc.communicate("", timeout=30)
    assert json.loads(out)["ppid"] == os.getpid() and not json.loads(out)["warm"]
    from tests import conftest
    assert conftest.pytest_report_header(None) == ("warm starter: off, every command starts in a new interpreter "
                                                   f"({warm.REFUSED})")
    monkeypatch.delattr(warm.threading, "_shutdown")
    assert "lacks threading._shutdown" in warm.refused("cpython", (3, 12, 1))
