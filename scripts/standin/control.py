"""The control routes under ``/_standin`` that every stand-in site shares (n8n and the events catalogue).

- ``GET /_standin/robots``: ``{"mode", "body"}``; ``POST /_standin/robots`` ``{"mode": M, "body": TEXT,
  "disallow": [...], "disallow_ids": "1", "allow": [...], "crawl_delay": S, "request_rate": "1/5",
  "sitemap": "/sitemap.xml"}`` (see ``robots``);
- ``POST /_standin/slow`` ``{"factor": F, "seconds": N, "after": D, "base_ms": B}`` (see ``timeline``);
- ``GET /_standin/requests[?kind=K&since=S]``: the arrival times of the counted requests per kind of path.

The handler mixing this in provides ``_json(status, obj)`` and ``_error(status, message)``; its site has
``robots`` (a ``robots.Robots``) and ``timeline`` (a ``timeline.Timeline``).
"""

import json
import math
from urllib.parse import parse_qs


def read_json(raw):
    """The JSON object of a control request's body (an empty body is ``{}``); ValueError otherwise."""
    body = json.loads(raw or b"{}")
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    return body


class SharedControl:
    """``_shared_get`` / ``_shared_post``: True when the path was one of the shared routes (answered)."""

    def _shared_get(self, path, query=""):
        site = self.server.site
        if path == "/_standin/robots":
            self._json(200, site.robots.info())
        elif path == "/_standin/requests":
            args = {k: v[0] for k, v in parse_qs(query).items()}
            try:
                since = float(args.get("since", 0))
            except ValueError:
                self._error(400, "since must be a number")
                return True
            self._json(200, site.timeline.snapshot(args.get("kind"), since))
        else:
            return False
        return True

    def _shared_post(self, path, raw):
        site = self.server.site
        if path not in ("/_standin/robots", "/_standin/slow"):
            return False
        try:
            body = read_json(raw)
            if path == "/_standin/robots":
                self._json(200, site.robots.configure(**body))
            else:
                seconds = float(body.get("seconds", 0))
                if not math.isfinite(seconds):
                    raise ValueError("seconds must be finite")
                phase = site.timeline.slow(body.get("factor", 10), seconds, body.get("after", 0),
                                           body.get("base_ms"))
                self._json(200, {"slow_phase": phase, "slow_phases": site.timeline.phases()})
        except (ValueError, TypeError) as exc:
            self._error(400, f"bad {path.rsplit('/', 1)[-1]} change: {exc}")
        return True
