"""Browserbase's session API (`browser_endpoint = "browserbase"`), over plain HTTP (no SDK).

`POST {browserbase_url}/v1/sessions` with the key in `X-BB-API-Key` and `{projectId, timeout}` (never
`keepAlive`: a session must end when its client goes) creates a session; the answer's `connectUrl` is where
`connect_over_cdp` attaches; `POST /v1/sessions/{id}` `{"status": "REQUEST_RELEASE"}` ends it early (each
session is billed a minute at least, so one session serves many pages and is released once it is retired).

The key, `connectUrl` and `signingKey` are secrets: `Session` keeps the URL out of its repr, and no reason
this module raises or logs quotes an answer's body (an error page may echo what it was sent). The session's
id is not a secret: it is stored and shown.

Every answer is hostile until parsed: bounded in time and bytes, JSON, an object, with a usable `id` and a
ws(s) `connectUrl`. A 429 (the plan's concurrency or creation rate), a 502-504 or no answer at all is
`Busy`: the provider's capacity, a wait for the job, never the site's fault; anything else that is no
session is `ApiError` with a reason (that job's attempt ends with it); a 401 or 403, `KeyRefused`, ends the
run's browser work (net/browser).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
import time
from typing import Any
from urllib.parse import urlsplit

import requests

from scraper.base.errors import FetchError
from scraper.net import http
from scraper.policy import retry

log = logging.getLogger(__name__)

TIMEOUT_S = 15.0                    # one API call, whole answer
ANSWER_MAX_BYTES = 64 * 1024        # a session's answer is under 1 KB
CONNECT_URL_MAX_CHARS = 4096
SESSION_TIMEOUT_S = (60, 21600)     # what the API accepts for a session's `timeout`
BUSY_STATUSES = frozenset({429, 502, 503, 504})
_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


class Busy(Exception):
    """The API refused for capacity (429, 502-504) or could not be reached: the job waits for a session."""


class ApiError(Exception):
    """An answer that is no session (or a refusal that no wait cures, such as a 401); the reason names no secret.
    `session_id`: the id the answer did carry, when it had a usable one (that session is released)."""

    def __init__(self, reason: str, session_id: str | None = None) -> None:
        super().__init__(reason)
        self.session_id = session_id


class KeyRefused(ApiError):
    """The API refused the key (`status` 401 or 403): no session comes with it however long one waits."""

    def __init__(self, reason: str, status: int) -> None:
        super().__init__(reason)
        self.status = status


@dataclasses.dataclass(frozen=True)
class Session:
    """A created session: its id (shown, stored) and where to attach (a secret: not in the repr)."""

    id: str
    connect_url: str = dataclasses.field(repr=False)


def session_timeout(age_s: float | None, page_s: float) -> int | None:
    """The `timeout` (s) asked for a session retired at `age_s` (None: the provider's default), with room for
    the page under way when it comes of age, within what the API accepts."""
    if age_s is None:
        return None
    low, high = SESSION_TIMEOUT_S
    return int(min(high, max(low, math.ceil(age_s + page_s))))


def parse_session(raw: bytes) -> Session:
    """The Session of a create's answer; ApiError (with a reason that quotes nothing of it) otherwise."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ApiError("the answer is not UTF-8") from None
    except ValueError:
        raise ApiError("the answer is not JSON") from None
    if not isinstance(obj, dict):
        raise ApiError(f"the answer is a JSON {type(obj).__name__}, not a session object")
    session_id, connect_url = obj.get("id"), obj.get("connectUrl")
    if not isinstance(session_id, str) or not _ID.fullmatch(session_id):
        raise ApiError("the answer has no usable session id")
    if not isinstance(connect_url, str) or len(connect_url) > CONNECT_URL_MAX_CHARS:
        raise ApiError(f"session {session_id}: the answer has no usable connectUrl", session_id)
    parts = urlsplit(connect_url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname or re.search(r"\s", connect_url):
        raise ApiError(f"session {session_id}: the connectUrl is not a ws(s) URL", session_id)
    return Session(session_id, connect_url)


class Api:
    """Calls to one Browserbase session API; `key` a base.webhooks.Secret, never shown."""

    def __init__(self, url: str, key: Any, project: str | None = None, timeout_s: int | None = None,
                 user_agent: str | None = None) -> None:
        self.url, self.key, self.project, self.timeout_s = url.rstrip("/"), key, project, timeout_s
        self.user_agent = user_agent

    def _post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        """(status, body) of one POST, bounded; Busy when no answer came."""
        headers = {"X-BB-API-Key": self.key.value, "Content-Type": "application/json", "Accept": "application/json"}
        if self.user_agent:
            headers["User-Agent"] = self.user_agent
        started = time.monotonic()
        try:
            resp = requests.post(self.url + path, json=body, headers=headers, timeout=TIMEOUT_S,
                                 allow_redirects=False, stream=True)
        except requests.RequestException as e:
            raise Busy(f"POST {path}: no answer ({type(e).__name__})") from None
        try:
            raw = bytes(http.read_body(resp, self.url + path, started + TIMEOUT_S, TIMEOUT_S, ANSWER_MAX_BYTES))
        except FetchError as e:
            if e.kind == retry.TIMEOUT:
                raise Busy(f"POST {path}: no whole answer within {TIMEOUT_S:g} s") from None
            what = (f"an answer larger than {ANSWER_MAX_BYTES // 1024} KB" if e.kind == retry.TOO_LARGE
                    else f"{e.kind} while reading the answer")
            raise ApiError(f"POST {path}: {what}") from None
        except OSError as e:
            raise Busy(f"POST {path}: {type(e).__name__} while reading the answer") from None
        finally:
            resp.close()
        return resp.status_code, raw

    def create(self) -> Session:
        """A new session (never keepAlive); Busy or ApiError."""
        body: dict[str, Any] = {"keepAlive": False}
        if self.project:
            body["projectId"] = self.project
        if self.timeout_s is not None:
            body["timeout"] = self.timeout_s
        status, raw = self._post("/v1/sessions", body)
        if status in BUSY_STATUSES:
            raise Busy(f"POST /v1/sessions: HTTP {status}")
        if status in (401, 403):
            raise KeyRefused(f"POST /v1/sessions: HTTP {status} (is SCRAPER_BROWSERBASE_KEY right?)", status)
        if not 200 <= status < 300:
            raise ApiError(f"POST /v1/sessions: HTTP {status}")
        try:
            return parse_session(raw)
        except ApiError as e:
            if e.session_id is not None:    # created all the same: not left to bill until its timeout
                self.release(e.session_id)
            raise ApiError(f"POST /v1/sessions: {e}") from None

    def release(self, session_id: str) -> bool:
        """Ask the API to end `session_id` (REQUEST_RELEASE); whether it said yes. Errors are logged, not raised:
        a session not released ends at its timeout or when its connection is gone."""
        body: dict[str, Any] = {"status": "REQUEST_RELEASE"}
        if self.project:
            body["projectId"] = self.project
        try:
            status, _ = self._post(f"/v1/sessions/{session_id}", body)
        except (Busy, ApiError) as e:
            log.warning("Browserbase session %s was not released: %s", session_id, e)
            return False
        if not 200 <= status < 300:
            log.warning("Browserbase session %s was not released: HTTP %s", session_id, status)
            return False
        return True
