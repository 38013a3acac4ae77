"""URL helpers every layer may use (the base layer imports nothing else of ours)."""

from urllib.parse import urlsplit


def domain_of(url: str) -> str:
    """The politeness domain of a URL: its host's last two labels (api.n8n.io and n8n.io are one
    domain, n8n.io); an IP address is its own domain."""
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    if not host or host.replace(".", "").isdigit() or ":" in host:
        return host
    return ".".join(host.split(".")[-2:])


DB_URL_SCHEMES = ("postgresql://", "postgres://")


def is_db_url(value: str) -> bool:
    """A PostgreSQL database URL (`postgresql://` or `postgres://`); anything else is a SQLite path."""
    return str(value).lower().startswith(DB_URL_SCHEMES)


def redact_db_url(value: str) -> str:
    """The database URL without its password (what logs, errors and the `runs` row may show)."""
    if not is_db_url(value):
        return str(value)
    parts = urlsplit(value)
    if parts.password is None:
        return value
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return parts._replace(netloc=user + "@" + netloc[-1]).geturl()
