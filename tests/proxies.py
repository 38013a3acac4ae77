"""Real proxies for the tests, on loopback only: Debian's tinyproxy (each bound to its own outgoing
127.0.0.x, so a stand-in sees, and can ban, the proxy by its source address), a dead proxy (a port that
accepts and closes) and hostile ones (garbage, 407, a reset mid-body). `proxy_servers` (conftest) starts
them and stops every one, even when the test fails."""

import shutil
import socket
import subprocess
import threading
import time

import pytest

TINYPROXY = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_tinyproxy():
    if not shutil.which(TINYPROXY):
        pytest.skip("tinyproxy is not installed (Debian's `tinyproxy`; .ci/run installs it as root)")


class Tinyproxy:
    """tinyproxy in the foreground with a generated config: listens on 127.0.0.1, sends from `bind`."""

    def __init__(self, folder, bind, user=None, password=None, port=None):
        require_tinyproxy()
        self.port, self.bind = port or free_port(), bind
        conf = folder / f"tinyproxy-{self.port}.conf"
        lines = [f"Port {self.port}", "Listen 127.0.0.1", f"Bind {bind}", "Timeout 30", "MaxClients 64",
                 f'LogFile "{folder / f"tinyproxy-{self.port}.log"}"', "LogLevel Error", "DisableViaHeader Yes"]
        if user:
            lines.append(f"BasicAuth {user} {password}")
        conf.write_text("\n".join(lines) + "\n")
        self.proc = subprocess.Popen([TINYPROXY, "-d", "-c", str(conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        credentials = f"{user}:{password}@" if user else ""
        self.url = f"http://{credentials}127.0.0.1:{self.port}"
        self.shown = f"http://{'***:***@' if user else ''}127.0.0.1:{self.port}"
        _wait_listening(self.port, self.proc)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class ScriptedProxy:
    """A proxy that misbehaves, counting connections: `dead` accepts and closes; `garbage` answers bytes
    that are not HTTP; `407` refuses the credentials; `reset` sends headers and half a body, then resets."""

    def __init__(self, mode):
        self.mode, self.connections = mode, 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = self.shown = f"http://127.0.0.1:{self.port}"
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        try:
            if self.mode != "dead":
                conn.settimeout(5)
                conn.recv(65536)
                if self.mode == "garbage":
                    conn.sendall(b"\x00\xffSSH-2.0-not-a-proxy\r\n\x16\x03garbage\r\n\r\n")
                elif self.mode == "407":
                    conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic "
                                 b"realm=\"x\"\r\nContent-Length: 0\r\n\r\n")
                elif self.mode == "reset":
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
                                 b"{\"data\": {\"id\": 1, ")
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        except OSError:
            pass
        finally:
            conn.close()

    def stop(self):
        self._stop = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)     # wakes the blocked accept, so the port is free at once
        except OSError:
            pass
        self.sock.close()
        self.thread.join(5)


def _wait_listening(port, proc, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"tinyproxy exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"tinyproxy did not listen on {port}")
