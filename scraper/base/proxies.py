"""A proxy as configured: its URL parsed and checked once at start, its credentials kept apart from how it
is shown.

`ProxyUrl` is a `str` whose text is the shown form (`scheme://host:port`, any user name or password as
`***`), so whatever prints, logs, stores or serialises one (settings in the `runs` row, `scraper config`,
`status`, error sentences) shows no secret; only the code that connects reads `.secret`, the URL with its
credentials. `${NAME}` inside a URL is read from the environment when it is parsed, so a password stays
out of the files."""

import os
import re
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

DIRECT = "direct"           # in a proxy list: no proxy, used only when no proxy of the list is usable
SCHEMES = ("http", "https", "socks5")
_NAME = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/@]*@")


class ProxyUrl(str):
    """A proxy of a list (or `direct`): the text is the shown form; `.secret` the URL to connect with."""

    secret: str

    def __new__(cls, shown: str, secret: str) -> "ProxyUrl":
        out = super().__new__(cls, shown)
        out.secret = secret
        return out

    @property
    def direct(self) -> bool:
        return str(self) == DIRECT

    @property
    def username(self) -> str | None:
        parts = urlsplit(self.secret)
        return None if parts.username is None else unquote(parts.username)

    @property
    def password(self) -> str | None:
        parts = urlsplit(self.secret)
        return None if parts.password is None else unquote(parts.password)

    @property
    def server(self) -> str:
        """scheme://host:port, without credentials (the browser takes them apart)."""
        return str(self).replace("***:***@", "")

    def __reduce__(self) -> tuple[type["ProxyUrl"], tuple[str, str]]:   # a copy (asdict, pickling) keeps the secret
        return (ProxyUrl, (str(self), self.secret))


def parse(text: str, environ: Mapping[str, str] | None = None) -> ProxyUrl:
    """The ProxyUrl of `text` (`direct`, or an http://, https:// or socks5:// URL with an optional
    user:password@ and port, `${NAME}` read from `environ`); ValueError saying what is wrong, never
    quoting a password."""
    environ = os.environ if environ is None else environ
    text = text.strip()
    if text.lower() == DIRECT:
        return ProxyUrl(DIRECT, DIRECT)

    def expand(match: re.Match[str]) -> str:
        if match.group(1) not in environ:
            raise ValueError(f"{shown(text)} names ${{{match.group(1)}}}, which is not set in the environment")
        return environ[match.group(1)]

    url = _NAME.sub(expand, text)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = -1
    if scheme not in SCHEMES or not parts.hostname or port == -1 or parts.path not in ("", "/") \
            or parts.query or parts.fragment or any(c.isspace() for c in url):
        raise ValueError(f"{shown(text)} is not a proxy: {DIRECT}, or an http://, https:// or socks5:// URL such as "
                         "http://user:${PASSWORD}@proxy.example.org:3128")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    where = f"{host}:{port}" if port is not None else host
    secret = f"{scheme}://{parts.netloc.rsplit('@', 1)[0]}@{where}" if "@" in parts.netloc else f"{scheme}://{where}"
    return ProxyUrl(f"{scheme}://***:***@{where}" if "@" in parts.netloc else f"{scheme}://{where}", secret)


def shown(text: str) -> str:
    """`text` with the credentials of any URL in it as `***:***` (for sentences quoting what was given)."""
    return _CREDENTIALS.sub(lambda m: m.group(1) + "***:***@", str(text))


def parse_list(values: object, where: str, environ: Mapping[str, str] | None = None) -> tuple[ProxyUrl, ...]:
    """A list of proxies (a sources file's `proxies`), each parsed; ValueError naming `where`."""
    if not isinstance(values, list | tuple) or not values or not all(isinstance(v, str) for v in values):
        raise ValueError(f"{where} must be a list of proxy URLs (or \"{DIRECT}\")")
    return tuple(dict.fromkeys(parse(v, environ) for v in values))
