"""What the small JSON stand-ins share (the webhook receiver, the ETL API): a threaded server on 127.0.0.1,
``start()``/``shutdown()`` in-process (cheap tests), and a command line that serves until SIGTERM/SIGINT."""

import argparse
import json
import signal
import threading

from .server import _Server
from .state import LOOPBACK


class JsonService:
    """A stand-in served by `handler` (a BaseHTTPRequestHandler whose ``self.server.site`` is this object)."""

    handler = None
    name = "standin"

    def __init__(self, host=LOOPBACK, port=0):
        if host != LOOPBACK:
            raise ValueError(f"the stand-in binds {LOOPBACK} only, not {host!r}")
        self.host, self.port = host, int(port)
        self.lock = threading.Lock()
        self.stopping = threading.Event()      # a hanging answer gives up when this is set
        self._server = self._thread = self.url = None

    def start(self):
        """Bind and serve in a daemon thread; returns self (``.url`` is then set)."""
        self._server = _Server((self.host, self.port), self.handler)
        self._server.site = self
        self.port = self._server.server_address[1]
        self.url = f"http://{self.host}:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name=self.name, daemon=True)
        self._thread.start()
        return self

    def shutdown(self):
        if self._server is None:
            return
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        self._server = None

    def __enter__(self):
        return self.start() if self._server is None else self

    def __exit__(self, *exc):
        self.shutdown()


def answer(handler, status, obj=None, headers=()):
    """Send `obj` as JSON (no body for None) with `status` and extra `headers`."""
    body = b"" if obj is None else json.dumps(obj).encode()
    handler.send_response(status)
    for k, v in headers:
        handler.send_header(k, v)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def body_of(handler):
    """The request's raw body (Content-Length bytes)."""
    return handler.rfile.read(int(handler.headers.get("content-length") or 0))


def serve_main(build, doc, add_arguments, argv=None):
    """The command line of a JSON stand-in: `add_arguments(parser)`, `build(args)` -> a JsonService; prints
    ``<name> listening on URL`` and serves until SIGTERM/SIGINT (exit 0)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--host", default=LOOPBACK, help=f"must be {LOOPBACK}")
    parser.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        site = build(args).start()
    except (ValueError, OSError) as exc:
        parser.error(str(exc))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())    # only a flag: the loop below shuts down
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"{site.name} listening on {site.url}", flush=True)
    while not stop.wait(0.5):
        pass
    site.shutdown()
    return 0


