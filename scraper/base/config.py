"""One configuration model: each setting is declared once, as a field of `Settings` carrying a `Spec`
(key, kind, unit, help, environment name, constraint); its value comes from the layers
defaults < file (`[scraper]` in scraper.toml) < environment (`SCRAPER_<KEY>`) < command line, and every
value keeps where it came from (`scraper config` shows it).

The standard library is enough here (dataclasses for the declarations, tomllib for the file): pydantic-
settings would add about 60 ms to every start for the same checks, and its messages are not our sentences.
"""

import dataclasses
import math
import os
import re
import sys

from scraper.base import endpoints, proxies
from scraper.base.errors import ConfigError
from scraper.base.urls import redact_db_url
from scraper.base.webhooks import Secret

FILE_NAME = "scraper.toml"          # read from the working folder when it exists and --config is not given
ENV_CONFIG = "SCRAPER_CONFIG"
TABLE = "scraper"
MAX_FILE_BYTES = 1 * 2**20          # a configuration file is a few KB; refuse anything absurd before parsing
ORIGINS = ("default", "file", "env", "cli")
KINDS = ("int", "float", "bool", "choice", "list", "url", "str", "path", "secret")   # secret: shown as ***
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
METAVARS = {"int": "INTEGER", "float": "FLOAT", "url": "URL", "path": "FILE", "str": "TEXT", "list": "VALUE",
            "secret": "TEXT"}


@dataclasses.dataclass(frozen=True)
class Spec:
    """The declaration of one setting (its type's default lives on the `Settings` field that carries it)."""

    key: str
    kind: str
    help: str
    unit: str = ""                  # s, MB, h, requests/s ... (shown in `--help`, the guide and `config`)
    choices: tuple = ()             # kind "choice"
    at_least: float | None = None   # int and float: the smallest allowed value
    above: float | None = None      # float: values must be strictly above this
    optional: bool = False          # None ("not set") is allowed
    item: object = None             # kind "list": parses and checks one item; kind "str": parses the value
                                    # (either's ValueError says what is allowed)
    show_item: object = None        # kind "list": an item as the user writes it
    allowed: str = ""               # what is allowed, when the kind's own words are not enough
    check: object = None            # a last check of the parsed value (True: fine)
    env_aliases: tuple = ()         # older environment names that keep their meaning
    flag: str = ""                  # the long flag, by default --KEY-WITH-DASHES
    metavar: str = ""               # what --help shows for its value, by default from the kind
    field: str = ""                 # the Settings attribute (filled in from the field)
    default: object = None          # (filled in from the field)

    @property
    def env(self):
        return "SCRAPER_" + self.key.upper()

    @property
    def long_flag(self):
        return self.flag or "--" + self.key.replace("_", "-")

    def describe_allowed(self):
        """What a value of this setting may be, in words."""
        if self.allowed:
            return self.allowed
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "bool":
            return "true or false (1/0, yes/no, on/off)"
        if self.kind == "url":
            return "an http(s) URL"
        number = "a whole number" if self.kind == "int" else "a number"
        if self.above is not None:
            return f"{number} above {self.above:g}"
        if self.at_least is not None:
            return f"{number}, {self.at_least:g} or more"
        return number if self.kind in ("int", "float") else "text"

    def parse(self, raw, where):
        """The value of this setting from `raw` (text from the environment or the command line, or the file's
        TOML value); ConfigError naming the key, `where` it came from and what is allowed."""
        try:
            value = self._convert(raw)
            ok = value is None or self.check is None or self.check(value)
        except (ValueError, TypeError) as e:
            said = (self.kind == "list" or self.item) and str(e)     # the item's own words
            why = f": {e}" if said else f"; it must be {self.describe_allowed()}"
            raise ConfigError(f"the setting {self.key} is {self.shown_raw(raw)} (from {where}){why}.") from None
        if not ok:
            raise ConfigError(f"the setting {self.key} is {self.shown_raw(raw)} (from {where}); it must be "
                              f"{self.describe_allowed()}.")
        return value

    def shown_raw(self, raw):
        if self.kind == "secret":
            return "***"
        if isinstance(raw, tuple | list):
            raw = ",".join(map(str, raw))
        if isinstance(raw, float):
            return f"{raw:g}"
        if isinstance(raw, str) and self.kind == "str" and self.item:
            raw = endpoints.shown(raw)      # a token in a query (a browser endpoint's)
        return repr(proxies.shown(raw)) if isinstance(raw, str) else str(raw)   # a URL's credentials as ***

    def _convert(self, raw):
        if raw is None or (isinstance(raw, str) and not raw.strip() and self.optional):
            if self.optional:
                return None
            raise ValueError
        if self.kind == "list":
            if not isinstance(raw, str | list | tuple):
                raise ValueError("it must be a list of text values")
            out = []
            for part in raw.split(",") if isinstance(raw, str) else raw:
                if isinstance(part, str) and type(part) is not str and self.item:
                    out.append(part)        # an item already parsed into a str of its own (a ProxyUrl)
                elif isinstance(part, str):
                    out += [self.item(p.strip()) if self.item else p.strip() for p in part.split(",") if p.strip()]
                elif isinstance(part, tuple) and self.item:     # an item already parsed (a library caller's)
                    out.append(self.item(part))
                else:
                    raise ValueError("it must be a list of text values")
            return tuple(dict.fromkeys(out))
        if self.kind == "bool":
            if isinstance(raw, bool):
                return raw
            if isinstance(raw, str) and raw.strip().lower() in TRUE + FALSE:
                return raw.strip().lower() in TRUE
            raise ValueError
        if self.kind in ("int", "float"):
            if isinstance(raw, bool) or not isinstance(raw, str | int | float):
                raise ValueError
            value = int(raw) if self.kind == "int" and not isinstance(raw, float) else float(raw)
            if self.kind == "int" and value != int(value):
                raise ValueError
            value = int(value) if self.kind == "int" else value
            if not math.isfinite(value) or (self.above is not None and value <= self.above) \
                    or (self.at_least is not None and value < self.at_least):
                raise ValueError
            return value
        if self.kind == "secret" and isinstance(raw, Secret):     # already parsed (a library caller's)
            return raw
        if not isinstance(raw, str):
            raise ValueError
        if self.kind == "str" and self.item:
            return self.item(raw)
        if self.kind == "secret":
            if not raw.strip() or not raw.isprintable():
                raise ValueError
            return Secret(raw.strip())
        if self.kind == "choice":
            found = [c for c in self.choices if c.lower() == raw.strip().lower()]
            if not found:
                raise ValueError
            return found[0]
        if self.kind == "url" and not re.fullmatch(r"https?://[^\s/?#@]*@?[^\s/?#@]+(/\S*)?", raw.strip()):
            raise ValueError
        return raw

    def show(self, value):
        """The value as `scraper config` shows it: lists as lists of what the user writes, a URL's password
        as ***."""
        if value is None:
            return None
        if self.kind == "secret":
            return "***"
        if self.kind == "list":
            return [self.show_item(v) if self.show_item else v for v in value]
        if self.kind in ("url", "path", "str"):
            return redact_url(value)
        return value


def redact_url(value):
    """A URL (http(s), a proxy's or a database's) with its password shown as ***."""
    match = re.match(r"^([a-z][a-z0-9+.-]*://[^:/@\s]*):[^@/\s]*@", str(value), re.I)
    if match is None:
        return redact_db_url(value)
    return match.group(1) + ":***@" + str(value)[match.end():]


def setting(default, key, kind, help, **declared):
    """A `Settings` field that is a setting: its default, and its declaration (`Spec`) as the field's metadata."""
    return dataclasses.field(default=default, metadata={"spec": Spec(key=key, kind=kind, help=help, **declared)})


def specs_of(cls):
    """{key: Spec} of the settings declared on the dataclass `cls`, in declaration order."""
    return {f.metadata["spec"].key: dataclasses.replace(f.metadata["spec"], field=f.name, default=f.default)
            for f in dataclasses.fields(cls) if "spec" in f.metadata}


def closest(key, known):
    """`the closest is 'rate'`, or how to list them all."""
    import difflib  # here: only a mistake pays for it
    found = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
    return f"the closest is {found[0]!r}" if found else "`scraper config` lists them all"


def unknown_environment(specs, environ):
    """[(name, the closest known name or None)] of the SCRAPER_* variables that no setting reads (a typo in
    one would otherwise be ignored without a word)."""
    import difflib  # here: only a mistake pays for it
    prefix = "SCRAPER_"
    known = sorted({ENV_CONFIG, *(name for spec in specs.values() for name in (spec.env, *spec.env_aliases))})
    out = []
    for name in sorted(environ):
        if name.startswith(prefix) and name not in known:
            # compared without the prefix every name shares, which would make any two look alike
            found = difflib.get_close_matches(name[len(prefix):], [k[len(prefix):] for k in known], n=1, cutoff=0.6)
            out.append((name, prefix + found[0] if found else None))
    return out


def config_path(given, cwd="."):
    """The configuration file to read: `given` (--config or SCRAPER_CONFIG), else ./scraper.toml when it
    exists, else None."""
    if given:
        return given
    path = os.path.join(cwd, FILE_NAME)
    return path if os.path.isfile(path) else None


def read_toml(path, what):
    """The parsed TOML document at `path`; ConfigError (one sentence naming `what` and the path) when it
    cannot be read or parsed."""
    if sys.version_info >= (3, 11):     # here: a command without a file does not pay for the parser
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"the {what} {path} does not exist.") from None
    except IsADirectoryError:
        raise ConfigError(f"the {what} {path} is a folder, not a file.") from None
    except OSError as e:
        raise ConfigError(f"the {what} {path} cannot be read ({e.strerror}).") from e
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"the {what} {path} is larger than {MAX_FILE_BYTES // 2**20} MB.")
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"the {what} {path} is not UTF-8 text.") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"the {what} {path} is not valid TOML ({e}).") from None


def file_table(data, path):
    """The `[scraper]` table of a configuration file's document (empty without one)."""
    extra = sorted(set(data) - {TABLE, "source", "webhook"})
    if extra:
        raise ConfigError(f"{path}: unknown top-level key {extra[0]!r}; a configuration file holds a [scraper] "
                          f"table, [[source]] tables and [[webhook]] tables.")
    table = data.get(TABLE, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: 'scraper' must be a table ([scraper]).")
    return table


@dataclasses.dataclass(frozen=True)
class Resolved:
    """Every setting's value (by key) and where it came from: default, file, env or cli."""

    values: dict
    origins: dict
    file: str | None


def resolve(specs, table=None, path=None, environ=None, cli=()):
    """The layers, lowest first: the declared defaults, the file's `[scraper]` `table` (read from `path`),
    the environment `environ`, then `cli`: (key, raw value, where) from --set and the flags, in their order.
    ConfigError (one sentence) on an unknown key, a bad value, or one key given twice on the command line
    with different values."""
    values = {key: spec.default for key, spec in specs.items()}
    origins = dict.fromkeys(specs, "default")
    for key, raw in (table or {}).items():
        if key not in specs:
            raise ConfigError(f"{path}: unknown setting {key!r} in [scraper]; {closest(key, specs)}.")
        values[key], origins[key] = specs[key].parse(raw, path), "file"
    for key, spec in specs.items():
        for name in (spec.env, *spec.env_aliases):
            if name in (environ or {}):
                values[key], origins[key] = spec.parse(environ[name], name), "env"
                break
    given = {}
    for key, raw, where in cli:
        if key not in specs:
            raise ConfigError(f"{where}: unknown setting {key!r}; {closest(key, specs)}.")
        value = specs[key].parse(raw, where)
        if key in given and given[key][0] != value:
            raise ConfigError(f"the setting {key} is given twice on the command line ({given[key][1]} and "
                              f"{where}); give it once.")
        given[key] = (value, where)
        values[key], origins[key] = value, "cli"
    return Resolved(values, origins, path)


def parse_set(text):
    """(key, value) of one `--set KEY=VALUE`; ConfigError when it has no `=`."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {text!r} is not KEY=VALUE (for example --set workers=8).")
    return key.strip().replace("-", "_"), value.strip()


def markdown_table(specs):
    """The guide's settings table, generated from the declarations (docs/operations.md holds a copy that
    `tests/test_docs.py` compares with this)."""
    rows = ["| key | flag | environment | default | meaning |", "|---|---|---|---|---|"]
    for spec in specs.values():
        default = spec.show(spec.default)
        default = "none" if default in (None, []) else ",".join(map(str, default)) if isinstance(default, list) \
            else ("on" if default else "off") if isinstance(default, bool) else str(default)
        unit = f" {spec.unit}" if spec.unit and default != "none" else ""
        flag = spec.long_flag
        flag += f"/--no-{flag[2:]}" if spec.kind == "bool" and not flag.startswith("--no-") else ""
        envs = ", ".join(f"`{e}`" for e in (spec.env, *spec.env_aliases))
        rows.append(f"| `{spec.key}` | `{flag}` | {envs} | `{default}`{unit} | {spec.help.replace('|', '/')} |")
    return "\n".join(rows)
