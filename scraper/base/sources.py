"""The sources file: one `[[source]]` table per site to mirror, read and validated once at start.

Without a file there is one built-in source, `n8n`, and everything behaves as it did before sources
existed. Every error is one sentence naming the file, the source, the key and what is allowed."""

import dataclasses
import math
import os
import re

from scraper.base import endpoints, proxies
from scraper.base.config import read_toml
from scraper.base.errors import ConfigError

DEFAULT_PATH = "sources.toml"       # read from the working folder when it exists and --sources is not given
ENV_SOURCES = "SCRAPER_SOURCES"
KINDS = ("n8n", "catalogue")
EVERY = "1d"
PRIORITY = 1

_UNITS_S = {"m": 60, "h": 3600, "d": 86400}
_NAME = re.compile(r"[a-z0-9-]+")
_COMMON = ("name", "kind", "enabled", "priority", "every", "rate", "burst", "proxies", "revalidate")
_STR_LISTS = ("sitemaps", "include", "exclude", "required", "volatile", "allow_domains")
_KIND_KEYS = {
    "n8n": ("api_url", "site_url"),
    "catalogue": ("site", "sitemaps", "include", "exclude", "type", "required", "fields", "volatile", "fetcher",
                  "allow_domains", "settle", "browser_endpoint", "browser_sessions", "browser_session_pages",
                  "browser_session_timeout", "browserbase_url"),
}
FETCHERS = ("http", "browser", "auto")  # scraper.policy.fetchmode.MODES (base imports nothing of ours)
_DOMAIN = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?")


@dataclasses.dataclass(frozen=True)
class Source:
    name: str                   # [a-z0-9-]+, unique
    kind: str                   # "n8n" | "catalogue"
    enabled: bool = True
    priority: int = PRIORITY    # 1 is first
    every: str = EVERY          # as written in the file
    every_s: float = 86400.0
    rate: float | None = None   # for its domain(s); None: the defaults
    burst: int | None = None
    options: tuple = ()         # the kind's own keys as sorted (key, value) pairs (frozen)
    proxies: tuple = ()         # base.proxies.ProxyUrl: this source's own, over the run's; (): the run's
    revalidate: bool = True     # validators kept and sent, sitemap dates trusted once earned (and the run's setting)

    def opt(self, key, default=None):
        """One of the kind's own keys, or `default` when the file does not give it."""
        for name, value in self.options:
            if name == key:
                return value
        return default


BUILTIN = (Source(name="n8n", kind="n8n"),)


def parse_every(text):
    """Seconds of a cadence such as 30m, 2h, 1d or 7d; None when it is not one."""
    match = re.fullmatch(r"([0-9]+)([mhd])", text) if isinstance(text, str) else None
    if not match or int(match.group(1)) == 0:
        return None
    return float(int(match.group(1)) * _UNITS_S[match.group(2)])


def default_path(given, cwd="."):
    """The sources file to read: `given` (the `sources` setting), else ./sources.toml when it exists, else None."""
    if given:
        return given
    path = os.path.join(cwd, DEFAULT_PATH)
    return path if os.path.isfile(path) else None


def of_config(given, document, config_path):
    """(sources, the file they came from): the `sources` setting's file when set, else the [[source]] tables of
    the configuration file (`document`, read from `config_path`) when it has some, else ./sources.toml when
    it exists, else the built-in n8n source."""
    if not given and document.get("source") is not None:
        return parse(document, config_path), config_path
    path = default_path(given)
    return load(path), path


def load(path):
    """The sources of the file at `path` (None: the built-in n8n source); ConfigError on the first problem."""
    if path is None:
        return BUILTIN
    return parse(read_toml(path, "sources file"), path)


def parse(data, path):
    """Sources from the parsed TOML document `data` of the file `path` (named in every error)."""
    extra = sorted(set(data) - {"source", "scraper"})     # [scraper]: the settings of a scraper.toml
    if extra:
        raise ConfigError(f"{path}: unknown top-level key {extra[0]!r}; only [[source]] tables (and a [scraper] "
                          f"table) are allowed.")
    tables = data.get("source")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"{path}: no [[source]] table; the file needs at least one.")
    sources, seen = [], set()
    for number, table in enumerate(tables, 1):
        source = _source(table, path, number)
        if source.name in seen:
            raise ConfigError(f"{path}: source {source.name!r}: key 'name' is used by another source; "
                              f"names must be unique.")
        seen.add(source.name)
        sources.append(source)
    n8n = [s.name for s in sources if s.kind == "n8n"]
    if len(n8n) > 1:
        raise ConfigError(f"{path}: source {n8n[1]!r}: key 'kind' is 'n8n' as for {n8n[0]!r}; "
                          f"at most one source may be of kind n8n.")
    return tuple(sources)


def _source(t, path, number):
    name = t.get("name")
    label = repr(name) if isinstance(name, str) and name else f"number {number}"

    def bad(key, allowed):
        value = t.get(key)
        shown = "missing" if key not in t else repr(endpoints.shown(value)) if isinstance(value, str) else f"{value!r}"
        return ConfigError(f"{path}: source {label}: key {key!r} is {shown}; {allowed}.")

    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise bad("name", "it must be lower-case letters, digits and '-'")
    kind = t.get("kind")
    if kind not in KINDS:
        raise bad("kind", f"allowed: {', '.join(KINDS)}")
    unknown = sorted(set(t) - set(_COMMON) - set(_KIND_KEYS[kind]))
    if unknown:
        raise ConfigError(f"{path}: source {label}: key {unknown[0]!r} is unknown for kind {kind}; allowed: "
                          f"{', '.join(_COMMON + _KIND_KEYS[kind])}.")
    enabled = t.get("enabled", True)
    if not isinstance(enabled, bool):
        raise bad("enabled", "it must be true or false")
    revalidate = t.get("revalidate", True)
    if not isinstance(revalidate, bool):
        raise bad("revalidate", "it must be true or false")
    priority = t.get("priority", PRIORITY)
    if isinstance(priority, bool) or not isinstance(priority, int) or priority < 1:
        raise bad("priority", "it must be a whole number, 1 or more (1 is first)")
    every = t.get("every", EVERY)
    every_s = parse_every(every)
    if every_s is None:
        raise bad("every", "it must be a number and a unit m, h or d, such as 30m, 2h, 1d or 7d")
    rate = t.get("rate")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate)
                             or rate <= 0):
        raise bad("rate", "it must be a number of requests per second above 0")
    burst = t.get("burst")
    if burst is not None and (isinstance(burst, bool) or not isinstance(burst, int) or burst < 1):
        raise bad("burst", "it must be a whole number, 1 or more")
    try:
        own_proxies = proxies.parse_list(t["proxies"], "it") if "proxies" in t else ()
    except ValueError as e:
        raise ConfigError(f"{path}: source {label}: key 'proxies': {e}.") from None
    options = {k: t[k] for k in _KIND_KEYS[kind] if k in t}
    _check_kind(kind, options, bad)
    return Source(name=name, kind=kind, enabled=enabled, priority=priority, every=every, every_s=every_s,
                  rate=None if rate is None else float(rate), burst=burst, proxies=own_proxies, revalidate=revalidate,
                  options=tuple(sorted((k, _frozen(v)) for k, v in options.items())))


def _check_kind(kind, o, bad):
    for key in ("api_url", "site_url", "site"):
        if key in o and not _is_url(o[key]):
            raise bad(key, "it must be an http(s) URL")
    if kind != "catalogue":
        return
    if "site" not in o:
        raise bad("site", "a catalogue needs the URL of its home page")
    for key in _STR_LISTS:
        if key in o and not (isinstance(o[key], list) and all(isinstance(v, str) and v for v in o[key])):
            raise bad(key, "it must be a list of strings")
    for url in o.get("sitemaps", ()):
        if not _is_url(url):
            raise bad("sitemaps", "every entry must be an http(s) URL")
    for key in ("include", "exclude"):
        for pattern in o.get(key, ()):
            try:
                re.compile(pattern)
            except re.error as e:
                raise bad(key, f"{pattern!r} is not a regular expression ({e})") from None
    if "type" in o and not (isinstance(o["type"], str) and re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", o["type"])):
        raise bad("type", "it must be a schema.org type such as Event or Product")
    fields = o.get("fields", {})
    if not isinstance(fields, dict) or not all(
            isinstance(k, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) and isinstance(v, str)
            and re.fullmatch(r"(css:.+|jsonld:[A-Za-z0-9_@]+(\.[A-Za-z0-9_@]+)*)", v) for k, v in fields.items()):
        raise bad("fields", "it must be a table of field names to 'css:SELECTOR' or 'jsonld:dotted.path'")
    if "fetcher" in o and o["fetcher"] not in FETCHERS:
        raise bad("fetcher", f"allowed: {', '.join(FETCHERS)}")
    for domain in o.get("allow_domains", ()):
        if not _DOMAIN.fullmatch(domain):
            raise bad("allow_domains", "every entry must be a lower-case host name such as cdn.example.org")
    _check_browser(o, bad)
    if "settle" in o and not (isinstance(o["settle"], str) and o["settle"].strip()):
        raise bad("settle", "it must be a CSS selector that is present once the page has rendered")


def _check_browser(o, bad):
    """A catalogue's own browser keys (base/endpoints), the endpoint parsed in place."""
    if "browser_endpoint" in o:
        try:
            o["browser_endpoint"] = endpoints.parse(o["browser_endpoint"])
        except ValueError as e:
            raise bad("browser_endpoint", str(e)) from None
    for key in ("browser_sessions", "browser_session_pages"):
        if key in o and (isinstance(o[key], bool) or not isinstance(o[key], int) or o[key] < 1):
            raise bad(key, "it must be a whole number, 1 or more")
    timeout = o.get("browser_session_timeout")
    if "browser_session_timeout" in o and (isinstance(timeout, bool) or not isinstance(timeout, int | float)
                                           or not math.isfinite(timeout) or timeout <= 0):
        raise bad("browser_session_timeout", "it must be a number of seconds above 0")
    if "browser_session_timeout" in o:
        o["browser_session_timeout"] = float(timeout)
    if "browserbase_url" in o and not _is_url(o["browserbase_url"]):
        raise bad("browserbase_url", "it must be an http(s) URL such as https://api.browserbase.com")


def _is_url(value):
    return isinstance(value, str) and re.fullmatch(r"https?://[^\s/?#]+(/\S*)?", value) is not None


def _frozen(value):
    """Lists as tuples and tables as sorted pairs, so a Source stays hashable and immutable."""
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    return value
