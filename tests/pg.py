"""A throw-away PostgreSQL server for the tests: Debian's `postgresql` package, `initdb` and `pg_ctl` on a
temporary folder, run as an unprivileged user (PostgreSQL refuses root), listening on 127.0.0.1 and a Unix
socket in that folder only. Stopped by the fixture that started it, even when tests fail.

Where PostgreSQL or psycopg is not installed, the tests that need it are skipped with the reason."""

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid

import pytest

PG_USER = "nobody"          # exists on every Debian system; owns the cluster's folder while it runs
START_TIMEOUT_S = 60


def bin_dir():
    """The newest installed PostgreSQL's bin folder (Debian keeps one per major version), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(p.split("/")[-3]) if p.split("/")[-3].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def why_not():
    """Why the PostgreSQL tests cannot run here (None: they can)."""
    try:
        import psycopg  # noqa: F401 - only whether it is there
    except ImportError:
        return "psycopg is not installed (pip install 'scraper[postgres]')"
    if bin_dir() is None:
        return "PostgreSQL is not installed (apt-get install postgresql)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: PostgreSQL cannot be started as an unprivileged user"
    return None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One running cluster; `new_url()` creates an empty database on it and returns its URL."""

    def __init__(self):
        self.bin = bin_dir()
        self.root = tempfile.mkdtemp(prefix="scraper-pg-")
        self.data = os.path.join(self.root, "data")
        self.port = _free_port()
        self._template = None       # the database migrated once, which `migrated_url` copies
        self.user = PG_USER if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
        if os.geteuid() == 0:
            os.chmod(self.root, 0o755)
            uid = pwd.getpwnam(PG_USER)
            os.chown(self.root, uid.pw_uid, uid.pw_gid)

    def _as_user(self, *argv):
        cmd = list(argv)
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", PG_USER, "--"] + cmd
        return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=self.root,
                              timeout=START_TIMEOUT_S)

    def start(self):
        self._as_user(os.path.join(self.bin, "initdb"), "-D", self.data, "-U", self.user, "--auth=trust",
                      "-E", "UTF8", "--locale=C.UTF-8" if _has_c_utf8() else "--locale=C")
        return self.boot()

    def boot(self):
        """Start the cluster (again, after `shut_down`)."""
        options = (f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.root} "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
                   "-c shared_buffers=32MB")
        self._as_user(os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-l", os.path.join(self.root, "log"),
                      "-o", options, "-w", "-t", str(START_TIMEOUT_S), "start")
        return self

    def shut_down(self, mode="fast"):
        """Stop the cluster as an upgrade (`fast`: sessions ended, a checkpoint) or a crash (`immediate`: no
        checkpoint, recovery at the next start) stops it; `boot()` starts it again."""
        self._as_user(os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", mode, "-w", "stop")

    def restart(self, mode="fast"):
        """`shut_down(mode)` then `boot()`: the seconds the database was unreachable."""
        import time
        began = time.monotonic()
        self.shut_down(mode)
        self.boot()
        return time.monotonic() - began

    def durable_url(self):
        """`migrated_url()` whose commits survive a crash of the server (synchronous_commit on for that
        database: the cluster trades it for speed), for the tests that crash it."""
        import psycopg
        url = self.migrated_url()
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"ALTER DATABASE {url.rsplit('/', 1)[1]} SET synchronous_commit = on")
        return url

    def stop(self):
        try:
            self._as_user(os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "immediate", "-w", "stop")
        except (subprocess.SubprocessError, OSError):
            pass
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, dbname="postgres"):
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def new_url(self, template=None):
        """A new database: empty, or a copy of `template` (a database of this server)."""
        import psycopg
        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
        return self.url(name)

    def migrated_url(self):
        """A new database holding the whole schema: a copy of one migrated once for the session, so a test
        does not pay for every migration (copying is about half the time of migrating)."""
        if self._template is None:
            from scraper.db import store
            url = self.new_url()
            store.open_db(url).close()      # migrated; closed, as a template must have no connection
            self._template = url.rsplit("/", 1)[1]
        return self.new_url(self._template)


def _has_c_utf8():
    return os.path.isdir("/usr/lib/locale/C.utf8") or os.path.isdir("/usr/lib/locale/C.UTF-8")


@pytest.fixture(scope="session")
def pg_server():
    """The session's PostgreSQL server (skipped, with the reason, where there is none)."""
    reason = why_not()
    if reason:
        pytest.skip(reason)
    server = Server()
    try:
        server.start()
    except subprocess.CalledProcessError as e:
        server.stop()
        pytest.skip(f"PostgreSQL did not start: {(e.stderr or e.stdout or '').strip()[:300]}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server):
    """The URL of a new, empty database."""
    return pg_server.new_url()


@pytest.fixture
def pg_migrated_url(pg_server):
    """The URL of a new database that holds the schema already (a copy of the session's template)."""
    return pg_server.migrated_url()
