"""A webhook receiver stand-in: it logs every request (method, path, headers, body, arrival time) and answers
as told, switchable while it runs.

    python -m scripts.standin.receiver [--status 200] [--retry-after 7] [--hang-s 60] [--delay-s 0.2]

It prints ``receiver listening on http://127.0.0.1:PORT`` and serves until SIGTERM/SIGINT (exit 0).
Any POST outside ``/_standin`` is logged and answered with the current answer: a status (200, 204, 500,
503, 429 with ``Retry-After``, 410, 302 to ``/moved``), or ``hang`` (no answer for ``hang_s`` seconds); a
status after ``delay_s`` seconds (a slow receiver: a deliverer killed meanwhile dies mid-attempt).
Control routes: ``GET /_standin/received`` (``{"requests": [...]}``, each ``{at, method, path, status, headers,
body}``: the status it answered, or ``hang``), ``POST /_standin/answer {"status": 503 | "hang", "retry_after": S,
"hang_s": S, "delay_s": S}``, ``POST /_standin/reset`` (forget the log). Standard library only; binds 127.0.0.1 only.
"""

import sys
import time
from http.server import BaseHTTPRequestHandler

from .control import read_json
from .service import JsonService, answer, body_of, serve_main

STATUSES = (200, 201, 202, 204, 302, 400, 404, 410, 429, 500, 502, 503)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/_standin/received":
            answer(self, 200, {"requests": self.server.site.received()})
        else:
            answer(self, 404, {"error": "not found"})

    def do_POST(self):
        site, raw = self.server.site, body_of(self)
        if self.path == "/_standin/answer":
            try:
                answer(self, 200, site.set_answer(**read_json(raw)))
            except (ValueError, TypeError) as exc:
                answer(self, 400, {"error": str(exc)})
            return
        if self.path == "/_standin/reset":
            site.reset()
            answer(self, 200, {})
            return
        now = time.time()
        how = site.current()
        site.log({"at": now, "method": "POST", "path": self.path, "status": how["status"],
                  "headers": {k.lower(): v for k, v in self.headers.items()}, "body": raw.decode("utf-8", "replace")})
        if how["status"] == "hang":
            site.stopping.wait(how["hang_s"])
            self.close_connection = True
            return
        if how["delay_s"]:
            site.stopping.wait(how["delay_s"])
        status = how["status"]
        headers = [("Retry-After", str(how["retry_after"]))] if status in (429, 503) and how["retry_after"] else []
        if status == 302:
            headers.append(("Location", "/moved"))
        answer(self, status, None if status == 204 else {"status": status}, headers)


class Receiver(JsonService):
    """The receiver: ``received()`` is the log, ``set_answer(status=..)`` switches what it answers."""

    handler = _Handler
    name = "receiver"

    def __init__(self, status=200, retry_after=None, hang_s=60.0, delay_s=0.0, **kw):
        super().__init__(**kw)
        self._log = []
        self._answer = {}
        self.set_answer(status, retry_after, hang_s, delay_s)

    def set_answer(self, status=200, retry_after=None, hang_s=60.0, delay_s=0.0):
        if status != "hang" and status not in STATUSES:
            raise ValueError(f"status must be hang or one of {', '.join(map(str, STATUSES))}")
        with self.lock:
            self._answer = {"status": status, "retry_after": retry_after, "hang_s": float(hang_s),
                            "delay_s": float(delay_s)}
            return dict(self._answer)

    def current(self):
        with self.lock:
            return dict(self._answer)

    def log(self, entry):
        with self.lock:
            self._log.append(entry)

    def received(self):
        with self.lock:
            return list(self._log)

    def reset(self):
        with self.lock:
            self._log.clear()


def _arguments(parser):
    parser.add_argument("--status", default="200",
                        help="hang, or the status answered: " + ", ".join(map(str, STATUSES)))
    parser.add_argument("--retry-after", type=int, default=None, help="seconds, sent with 429 and 503")
    parser.add_argument("--hang-s", type=float, default=60.0, help="how long `hang` keeps a request unanswered")
    parser.add_argument("--delay-s", type=float, default=0.0, help="seconds before each answer (a slow receiver)")


def main(argv=None):
    return serve_main(lambda a: Receiver(a.status if a.status == "hang" else int(a.status), a.retry_after, a.hang_s,
                                         a.delay_s, host=a.host, port=a.port), __doc__, _arguments, argv)


if __name__ == "__main__":
    sys.exit(main())
