"""Validators for the stand-ins (issue 43): ETag and Last-Modified on their answers, a 304 to a matching
conditional request, and the modes of the traps real servers set (see the project's notes on refreshes):

- ``none`` (the n8n stand-in's default: no public record shows api.n8n.io sending any): no validator;
- ``strong``: ``"<hash of the body>"`` and a Last-Modified of the content; If-None-Match compared weakly
  (RFC 9110 §13.1.2), If-Modified-Since only without it, matched byte for byte;
- ``views``: ``strong``, but a detail's tag is made without its view counters (the n8n stand-in's details: a
  template whose views alone moved answers 304; its listing's tag still moves with them);
- ``weak``: ``W/"<hash>"``, and 304 only when that exact text comes back (apps behind a gzip proxy);
- ``no-etag-304``: ``strong``, but the 304 omits its ETag (Heritrix's trap);
- ``dates``: Last-Modified only, and If-Modified-Since must be its exact text (strict servers);
- ``gzip``: the tag depends on Accept-Encoding (``"<hash>-gzip"`` when gzip is accepted; Apache's
  mod_deflate), and only the tag of the request's own coding matches;
- ``ignore``: ``strong``'s validators sent, never a 304 (nginx and CDNs that drop them);
- ``lie``: one tag per URL whatever the content, and a 304 to it (a 304 although the content changed).

Standard library only. ``Validators.answer`` says what to send; the servers send it."""

import collections
import email.utils
import hashlib
import re
import threading

MODES = ("none", "strong", "views", "weak", "no-etag-304", "dates", "gzip", "ignore", "lie")
_VIEWS = re.compile(rb'"(views|recentViews|totalViews)":\s*[0-9]+')
EPOCH = 1_600_000_000       # the content dates: a time from the content's hash, after this one


def without_views(body):
    """The body with its view counters blanked (what a `views` tag is made of)."""
    return _VIEWS.sub(rb'"\1":0', body)


def _hash(body):
    return hashlib.sha256(body).hexdigest()[:16]


def _date_of(digest):
    """An IMF-fixdate derived from the content (it moves when the content does)."""
    return email.utils.formatdate(EPOCH + int(digest, 16) % 10**8, usegmt=True)


def _opaque(tag):
    return tag[2:] if tag.startswith("W/") else tag


class Validators:
    """A stand-in's validators in one `mode` (changed at run time by its control route); counts its 304s."""

    def __init__(self, mode="none"):
        self.set_mode(mode)
        self._lock = threading.Lock()
        self.not_modified = collections.Counter()      # kind -> 304s answered

    def set_mode(self, mode):
        if mode not in MODES:
            raise ValueError(f"validators mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode

    def answer(self, request_headers, body, kind="other", detail=False, path=""):
        """(status, headers): (200, the validators to send with `body`) or (304, the 304's header fields)."""
        mode = self.mode
        if mode == "none":
            return 200, {}
        digest = _hash(without_views(body) if mode == "views" and detail else body)
        tag = f'"{digest}"'
        if mode == "weak":
            tag = f'W/"{digest}"'
        elif mode == "gzip" and "gzip" in (request_headers.get("Accept-Encoding") or ""):
            tag = f'"{digest}-gzip"'
        elif mode == "lie":
            tag = f'"{_hash(path.encode())}"'
        headers = {"Last-Modified": _date_of(digest)} if mode == "dates" else {"ETag": tag}
        if mode not in ("dates", "lie", "weak", "gzip"):
            headers["Last-Modified"] = _date_of(digest)
        if mode != "ignore" and self._matches(request_headers, headers, mode):
            with self._lock:
                self.not_modified[kind] += 1
            return 304, ({} if mode == "no-etag-304" else headers)
        return 200, headers

    @staticmethod
    def _matches(request_headers, headers, mode):
        inm, ims = request_headers.get("If-None-Match"), request_headers.get("If-Modified-Since")
        tag = headers.get("ETag")
        if inm is not None and tag is not None:
            sent = [t.strip() for t in inm.split(",")]
            if mode in ("weak", "gzip"):
                return tag in sent                  # the exact text only
            return "*" in sent or _opaque(tag) in {_opaque(t) for t in sent}
        if inm is None and ims is not None and "Last-Modified" in headers:
            return ims == headers["Last-Modified"]  # byte for byte, as strict servers compare
        return False

    def stats(self):
        with self._lock:
            return {"mode": self.mode, "not_modified": dict(self.not_modified)}
