"""robots.txt for the stand-ins: one ``Robots`` per site, its mode and body changeable at run time.

Modes (``MODES``):

- ``none``: no robots.txt, answered as the site answers any unknown path (404);
- ``rules``: a body, given whole (``body``) or built from ``disallow`` (path prefixes), ``disallow_ids``
  (a prefix of template ids, expanded by the site to its id paths, e.g. ``/api/templates/workflows/1``),
  ``allow``, ``crawl_delay``, ``request_rate`` (``"1/5"``: one request per 5 s) and ``sitemap`` (a path or a
  URL; a path is made absolute with the site's URL);
- ``404``: a plain 404 page; ``503``: the server is failing (a 503 page); ``429``: too many requests;
- ``unreachable``: the connection is reset without an answer (for /robots.txt only).

Command line: ``--robots MODE --robots-body TEXT --robots-disallow /a,/b --robots-disallow-ids 1
--robots-allow /x --robots-crawl-delay 2 --robots-request-rate 1/5 --robots-sitemap /sitemap.xml``
(``\\n`` in ``--robots-body`` is a line break). Note that Python's ``urllib.robotparser`` reads only whole
seconds in ``Crawl-delay`` (``2.5`` is ignored there). At run time: ``POST /_standin/robots`` with the same names
as JSON keys (``{"mode": "rules", "disallow_ids": "1", "crawl_delay": 2}``), and ``for_s`` (a mode that holds
that many seconds, then the one before comes back: a robots.txt blip); ``GET /_standin/robots`` shows
the mode and the body served.
"""

import re
import socket
import struct
import threading
import time

MODES = ("none", "rules", "404", "503", "429", "unreachable")
RULE_KEYS = ("disallow", "disallow_ids", "allow", "crawl_delay", "request_rate", "sitemap")
_RATE_RE = re.compile(r"^\d+/\d+[smh]?$")


def _as_list(value):
    """A list of strings from None, "a,b" or ["a", "b"]."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, (list, tuple)):
        return [str(part) for part in value]
    raise TypeError(f"expected a string or a list, not {value!r}")


def build_body(site_url="", id_paths=(), disallow=None, disallow_ids=None, allow=None, crawl_delay=None,
               request_rate=None, sitemap=None, user_agent="*"):
    """The text of a robots.txt made of the given rules (one ``User-agent`` group)."""
    lines = [f"User-agent: {user_agent}"]
    for prefix in _as_list(disallow_ids):
        if not prefix.isdigit():
            raise ValueError(f"disallow_ids must be digits, not {prefix!r}")
        lines += [f"Disallow: {path}{prefix}" for path in id_paths]
    lines += [f"Disallow: {path}" for path in _as_list(disallow)]
    lines += [f"Allow: {path}" for path in _as_list(allow)]
    if len(lines) == 1:
        lines.append("Allow: /")
    if crawl_delay not in (None, ""):
        delay = float(crawl_delay)
        if not delay >= 0:
            raise ValueError("crawl_delay must be >= 0")
        lines.append(f"Crawl-delay: {delay:g}")
    if request_rate not in (None, ""):
        if not _RATE_RE.match(str(request_rate)):
            raise ValueError(f"request_rate must look like 1/5, not {request_rate!r}")
        lines.append(f"Request-rate: {request_rate}")
    for target in _as_list(sitemap):
        lines.append(f"Sitemap: {site_url + target if target.startswith('/') else target}")
    return "\n".join(lines) + "\n"


class Robots:
    """The robots.txt of one site: its mode and body, thread-safe.

    ``id_paths`` are the paths a template-id prefix (``disallow_ids``) expands to; ``site_url`` is set once
    the site knows its port (relative sitemap paths are made absolute with it).
    """

    def __init__(self, mode="none", body=None, id_paths=(), defaults=None, **rules):
        self._lock = threading.Lock()
        self.id_paths = tuple(id_paths)
        self.site_url = ""
        self._defaults = dict(defaults or {})
        self._mode, self._body, self._rules = "none", None, {}
        self._until, self._then = None, None     # a mode given `for_s`: when it ends, and the mode after it
        self.configure(mode=mode, body=body, **rules)

    def configure(self, mode=None, body=None, for_s=None, **rules):
        """Change the mode and/or the rules; rules given replace all earlier ones; `for_s`: the mode holds that
        many seconds, then the one before comes back. Returns ``info()``."""
        unknown = set(rules) - set(RULE_KEYS)
        if unknown:
            raise ValueError(f"unknown robots option(s): {', '.join(sorted(unknown))}")
        if mode is not None and mode not in MODES:
            raise ValueError(f"robots mode must be one of {', '.join(MODES)}, not {mode!r}")
        if body is not None and not isinstance(body, str):
            raise TypeError("body must be a string")
        given = {key: value for key, value in rules.items() if value not in (None, "", [])}
        build_body(**{"id_paths": self.id_paths, **self._defaults, **given})  # validate before changing
        with self._lock:
            if mode is not None:
                self._then, self._until = (self._mode, time.monotonic() + float(for_s)) if for_s else (None, None)
                self._mode = mode
            if body is not None:
                self._body = body.replace("\\n", "\n") if body else None
            if rules:
                self._rules = given
                if body is None:
                    self._body = None
        return self.info()

    def text(self):
        """The body served in ``rules`` mode."""
        with self._lock:
            if self._body is not None:
                return self._body
            rules = {**self._defaults, **self._rules}
        return build_body(site_url=self.site_url, id_paths=self.id_paths, **rules)

    @property
    def mode(self):
        with self._lock:
            if self._until is not None and time.monotonic() >= self._until:
                self._mode, self._until, self._then = self._then, None, None
            return self._mode

    def info(self):
        """What ``GET /_standin/robots`` serves: the mode and the body of ``rules`` mode."""
        return {"mode": self.mode, "body": self.text()}


def add_arguments(parser, default_mode="none"):
    """The ``--robots*`` options of a stand-in's command line."""
    parser.add_argument("--robots", choices=MODES, default=default_mode, help="what GET /robots.txt answers")
    parser.add_argument("--robots-body", help="the whole robots.txt of 'rules' mode (\\n = line break)")
    parser.add_argument("--robots-disallow", help="comma-separated path prefixes to disallow")
    parser.add_argument("--robots-disallow-ids", help="disallow the ids starting with these digits (n8n)")
    parser.add_argument("--robots-allow", help="comma-separated path prefixes to allow")
    parser.add_argument("--robots-crawl-delay", type=float, help="Crawl-delay: seconds")
    parser.add_argument("--robots-request-rate", help="Request-rate: e.g. 1/5")
    parser.add_argument("--robots-sitemap", help="Sitemap: a path on this site or a URL")


def from_args(args, id_paths=(), defaults=None):
    """A ``Robots`` from parsed ``--robots*`` options."""
    rules = {key: getattr(args, f"robots_{key}") for key in RULE_KEYS}
    return Robots(mode=args.robots, body=args.robots_body, id_paths=id_paths, defaults=defaults, **rules)


def reset_connection(handler):
    """Close the handler's TCP connection without answering, so the client sees a reset (RST)."""
    handler.close_connection = True
    sock = handler.connection
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.rfile.close()  # drop makefile()'s reference, otherwise close() would not close the fd
    sock.close()


NOT_FOUND = b"<!DOCTYPE html><html><head><title>404 Not Found</title></head><body><h1>404</h1></body></html>"
TOO_MANY = b"<html><head><title>429 Too Many Requests</title></head><body><h1>429</h1></body></html>"
UNAVAILABLE = (b"<html><head><title>503 Service Unavailable</title></head>"
               b"<body><h1>503 Service Unavailable</h1></body></html>")


def answer(robots):
    """What to do for GET /robots.txt: ("text", body bytes), ("status", code, body bytes), ("reset",) or
    ("none",) for the site's own 404."""
    mode = robots.mode
    if mode == "rules":
        return ("text", robots.text().encode())
    if mode == "404":
        return ("status", 404, NOT_FOUND)
    if mode == "503":
        return ("status", 503, UNAVAILABLE)
    if mode == "429":
        return ("status", 429, TOO_MANY)
    if mode == "unreachable":
        return ("reset",)
    return ("none",)
