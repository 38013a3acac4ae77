"""Webhook endpoints, declared once as `[[webhook]]` tables of the configuration file (issue 41): where the
outbox's events go (`scraper deliver`), which of them, in batches of how many, retried how.

A secret is read from the environment (`secret = "${HOOK_SECRET}"`, a Standard Webhooks `whsec_` key;
`secrets = [...]` lists two while one rotates) and kept in a `Secret`, whose repr is `***`: it reaches no
log, `config`, the database or an export.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
from urllib.parse import urlsplit

from scraper.base.errors import ConfigError

RETRY_S = (5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 36000.0)   # Svix's schedule (~27.6 h): then disabled
TIMEOUT_S = 15.0            # an answer slower than this is a failed attempt
HOLD_S = 30.0               # an attempt holds its endpoint for its timeout and this: the holder's write of the
                            # outcome may wait out SQLite's busy timeout (30 s); a deliverer killed mid-attempt
                            # lets the endpoint go when it runs out
BATCH = 100                 # events per request
MAX_BATCH = 1000
KEYS = ("url", "secret", "secrets", "events", "sources", "batch", "retry", "timeout", "hold")
_ENV = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_TYPE = re.compile(r"^([a-z]+)\.([a-z_]+|\*)$|^\*$")


class Secret:
    """A signing secret: its value for the signer only, `***` anywhere it is shown."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "Secret(***)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """One `[[webhook]]` table, checked."""

    url: str
    secrets: tuple[Secret, ...]
    events: tuple[str, ...] = ()        # types (`run.finished`) or families (`template.*`); empty: every type
    sources: tuple[str, ...] = ()       # empty: every source
    batch: int = BATCH
    retry: tuple[float, ...] = RETRY_S
    timeout_s: float = TIMEOUT_S
    hold_s: float = HOLD_S

    @property
    def shown(self) -> str:
        """The URL without user, password or query (what `deliveries`, `status` and the database show)."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"

    def wants(self, type_: str, source: str) -> bool:
        """Whether an event of `type_` from `source` goes to this endpoint."""
        if self.sources and source not in self.sources:
            return False
        return not self.events or any(t == type_ or t == "*" or (t.endswith(".*") and type_.startswith(t[:-1]))
                                      for t in self.events)


def _secret(raw: object, where: str, environ: dict[str, str]) -> Secret:
    m = _ENV.match(raw) if isinstance(raw, str) else None
    if m is None:
        raise ConfigError(f"{where}: a webhook secret is read from the environment: write it as \"${{NAME}}\" and "
                          f"set NAME=whsec_... (never the secret itself in the file).")
    value = environ.get(m.group(1), "")
    if not value:
        raise ConfigError(f"{where}: the environment variable {m.group(1)} (the webhook secret) is not set.")
    try:
        key = base64.b64decode(value.removeprefix("whsec_") + "==", validate=False)
    except (binascii.Error, ValueError):
        key = b""
    if not value.startswith("whsec_") or not 24 <= len(key) <= 64:
        raise ConfigError(f"{where}: {m.group(1)} is not a Standard Webhooks secret (whsec_ and 24 to 64 bytes in "
                          f"base64; make one with: python -c \"import base64,os; print('whsec_' + "
                          f"base64.b64encode(os.urandom(32)).decode())\").")
    return Secret(value)


def _strings(table: dict, key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where}: {key} must be a list of names (e.g. {key} = [\"...\"]).")
    return tuple(value)


def _endpoint(table: object, where: str, environ: dict[str, str]) -> Endpoint:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: a webhook is a table ([[webhook]]).")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} in [[webhook]]; its keys are {', '.join(KEYS)}.")
    url = table.get("url")
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        raise ConfigError(f"{where}: a webhook needs url = \"https://...\" (http or https).")
    if ("secret" in table) == ("secrets" in table):
        raise ConfigError(f"{where}: give a webhook one of secret = \"${{NAME}}\" or secrets = [...] (rotating).")
    raw = [table["secret"]] if "secret" in table else table["secrets"]
    if not isinstance(raw, list) or not 1 <= len(raw) <= 2:
        raise ConfigError(f"{where}: secrets lists one or two secrets (two while one rotates).")
    events = _strings(table, "events", where)
    bad = [t for t in events if not _TYPE.match(t)]
    if bad:
        raise ConfigError(f"{where}: {bad[0]!r} is not an event type (e.g. template.updated, template.*, "
                          f"run.finished).")
    batch = table.get("batch", BATCH)
    if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= MAX_BATCH:
        raise ConfigError(f"{where}: batch is the events per request, 1 to {MAX_BATCH}.")
    retry = table.get("retry", list(RETRY_S))
    if (not isinstance(retry, list) or not retry
            or not all(isinstance(s, (int, float)) and not isinstance(s, bool) and s > 0 for s in retry)):
        raise ConfigError(f"{where}: retry lists the seconds between attempts, each above 0 (e.g. [5, 300, 1800]).")
    timeout = table.get("timeout", TIMEOUT_S)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 0 < timeout <= 300:
        raise ConfigError(f"{where}: timeout is in seconds, above 0 and at most 300.")
    hold = table.get("hold", HOLD_S)
    if not isinstance(hold, (int, float)) or isinstance(hold, bool) or not 0 < hold <= 3600:
        raise ConfigError(f"{where}: hold is in seconds, above 0 and at most 3600.")
    return Endpoint(url, tuple(_secret(s, where, environ) for s in raw), events, _strings(table, "sources", where),
                    batch, tuple(float(s) for s in retry), float(timeout), float(hold))


def parse(tables: object, path: str | None, environ: dict[str, str]) -> tuple[Endpoint, ...]:
    """The endpoints of a configuration file's `[[webhook]]` tables; ConfigError (one sentence) on a mistake."""
    if not tables:
        return ()
    if not isinstance(tables, list):
        raise ConfigError(f"{path}: webhooks are [[webhook]] tables.")
    found = tuple(_endpoint(t, f"{path} [[webhook]] {i}", environ) for i, t in enumerate(tables, 1))
    shown = [e.shown for e in found]
    if len(set(shown)) != len(shown):
        twice = next(s for s in shown if shown.count(s) > 1)
        raise ConfigError(f"{path}: two [[webhook]] tables have the URL {twice}; give each endpoint once.")
    return found
