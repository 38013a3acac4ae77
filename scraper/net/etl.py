"""The ETL API a run reports to (`etl_url`), as the system scraper grew from describes it: create a run for a
domain with its items, mark items done, failed or invalid in batches, finalize the run with its counts, list
runs, read the latest run of a domain.

The source document leaves the wire open; scraper settles it (scripts/standin/etl.py serves the same):
`POST {etl_url}/runs` (with an `Idempotency-Key`, so a create retried after a timeout makes one run),
`POST {etl_url}/runs/ID/items`, `POST {etl_url}/runs/ID/finalize`, `GET {etl_url}/runs?domain=&status=`,
`GET {etl_url}/runs/latest?domain=` (404: none); the key as `Authorization: Bearer KEY`; times as ISO 8601.

Every answer is hostile until parsed: a run must be a JSON object with an id (`_id` or `id`) and a status;
`createdAt` or `created_at` is read when present. Anything else, a non-2xx, a redirect or no answer in time
raises EtlError with a reason (the delivery attempt fails and is retried; the run never notices).
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import requests

from scraper.base.errors import FetchError
from scraper.net import http
from scraper.policy import retry

TIMEOUT_S = 15.0
ANSWER_MAX_BYTES = 1_000_000    # a run's answer is a few hundred bytes; a list a page of them
ID_MAX_CHARS = 200
FINISHED = "finished"


class EtlError(Exception):
    """One ETL API call that did not succeed: `status` (None: no answer), `retry_after`, the reason."""

    def __init__(self, reason: str, status: int | None = None, retry_after: str | None = None) -> None:
        super().__init__(reason)
        self.status, self.retry_after = status, retry_after


@dataclasses.dataclass(frozen=True)
class EtlRun:
    """A run as the ETL API answered it, parsed."""

    id: str
    status: str
    created_at: str | None = None

    @property
    def finished(self) -> bool:
        return self.status.lower() in (FINISHED, "finalized", "completed", "done")


def parse_run(obj: Any) -> EtlRun:
    """An EtlRun from a decoded answer, in either spelling; EtlError when it is no run."""
    if not isinstance(obj, dict):
        raise EtlError(f"the ETL API answered {type(obj).__name__}, not a run object")
    raw_id = obj.get("_id", obj.get("id"))
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or not str(raw_id).strip() \
            or len(str(raw_id)) > ID_MAX_CHARS or not str(raw_id).isprintable() or "/" in str(raw_id):
        raise EtlError("the ETL API answered a run without a usable id (_id or id)")
    status = obj.get("status")
    if not isinstance(status, str) or not status or len(status) > 40:
        raise EtlError("the ETL API answered a run without a status")
    created = obj.get("createdAt", obj.get("created_at"))
    return EtlRun(str(raw_id), status, created if isinstance(created, str) else None)


class Client:
    """Calls to one ETL API; `key` a base.webhooks.Secret (or None), never shown."""

    def __init__(self, url: str, key: Any = None, timeout_s: float = TIMEOUT_S, user_agent: str | None = None) -> None:
        self.url, self.key, self.timeout_s = url.rstrip("/"), key, timeout_s
        self.ua = user_agent

    def _call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None,
              idempotency_key: str | None = None, missing_ok: bool = False) -> Any:
        headers = {"Accept": "application/json"}
        if self.key is not None:
            headers["Authorization"] = f"Bearer {self.key.value}"
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        if self.ua:
            headers["User-Agent"] = self.ua
        started = time.monotonic()
        try:
            resp = requests.request(method, self.url + path, json=body, params=params, headers=headers,
                                    timeout=self.timeout_s, allow_redirects=False, stream=True)
        except (requests.RequestException, ValueError) as e:
            raise EtlError(f"{method} {path}: {type(e).__name__}") from None
        # the whole answer under one deadline (a timer cuts a body that trickles) and the size cap
        try:
            raw = bytes(http.read_body(resp, self.url + path, started + self.timeout_s, self.timeout_s,
                                       ANSWER_MAX_BYTES))
        except FetchError as e:
            what = (f"an answer larger than {ANSWER_MAX_BYTES} bytes" if e.kind == retry.TOO_LARGE
                    else f"no whole answer within {self.timeout_s:g} s" if e.kind == retry.TIMEOUT
                    else f"{e.kind} while reading the answer")
            raise EtlError(f"{method} {path}: {what}", resp.status_code) from None
        except OSError as e:
            raise EtlError(f"{method} {path}: {type(e).__name__} while reading the answer", resp.status_code) from None
        finally:
            resp.close()
        if missing_ok and resp.status_code == 404:
            return None
        if not 200 <= resp.status_code < 300:
            where = f" to {resp.headers.get('location')}" if 300 <= resp.status_code < 400 else ""
            text = raw[:300].decode("utf-8", "replace").strip()
            raise EtlError(f"{method} {path}: HTTP {resp.status_code}{where}" + (f": {text}" if text else ""),
                           resp.status_code, resp.headers.get("retry-after"))
        try:
            return json.loads(raw) if raw.strip() else None
        except ValueError:
            raise EtlError(f"{method} {path}: the answer is not JSON", resp.status_code) from None

    def create(self, domain: str, items: list[dict[str, Any]], started_at: str, idempotency_key: str) -> EtlRun:
        return parse_run(self._call("POST", "/runs", {"domain": domain, "started_at": started_at, "items": items},
                                    idempotency_key=idempotency_key))

    def latest(self, domain: str) -> EtlRun | None:
        """The newest run of `domain`, or None (404)."""
        found = self._call("GET", "/runs/latest", params={"domain": domain}, missing_ok=True)
        return None if found is None else parse_run(found)

    def update_items(self, run_id: str, updates: list[dict[str, Any]]) -> None:
        """One batch of item updates: {id, url, status (done/failed/invalid), failedReason}."""
        self._call("POST", f"/runs/{run_id}/items", {"items": updates})

    def finalize(self, run_id: str, counts: dict[str, Any]) -> EtlRun:
        return parse_run(self._call("POST", f"/runs/{run_id}/finalize", counts))

    def runs(self, domain: str, status: str | None = None, limit: int = 50, offset: int = 0) -> list[EtlRun]:
        """The runs of `domain` (of `status`), as the API sorts them."""
        params: dict[str, Any] = {"domain": domain, "limit": limit, "offset": offset}
        if status:
            params["status"] = status
        found = self._call("GET", "/runs", params=params)
        listed = found.get("runs", found.get("data")) if isinstance(found, dict) else found
        if not isinstance(listed, list):
            raise EtlError("GET /runs: the answer holds no list of runs")
        return [parse_run(r) for r in listed]
