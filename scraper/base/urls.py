"""URL helpers every layer may use (the base layer imports nothing else of ours)."""

from urllib.parse import urlsplit


def domain_of(url: str) -> str:
    """The politeness domain of a URL: its host's last two labels (api.n8n.io and n8n.io are one
    domain, n8n.io); an IP address is its own domain."""
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    if not host or host.replace(".", "").isdigit() or ":" in host:
        return host
    return ".".join(host.split(".")[-2:])
