"""The HTTP side: one requests Session per process, and `fetch`, which turns every failure into FetchError."""

import time
from urllib.parse import urljoin

import requests

from . import retry
from .errors import FetchError
from .settings import domain_of

MAX_REDIRECTS = 5
MAX_BODY_BYTES = 50 * 1024 * 1024   # a template answer is 5-60 KB; anything near this is not one


def make_session(user_agent):
    s = requests.Session()
    s.headers.update({"User-Agent": user_agent, "Accept": "application/json, text/html;q=0.9"})
    return s


def fetch(session, url, timeout_s, now=time.time):
    """GET `url`; the Response when its status is 2xx, else FetchError with its kind.

    Redirects are followed only within the same politeness domain."""
    domain = domain_of(url)
    for _ in range(MAX_REDIRECTS + 1):
        try:
            resp = session.get(url, timeout=timeout_s, allow_redirects=False)
            body = resp.content  # read now, so a reset mid-body is a network failure here
        except requests.RequestException as e:
            raise FetchError(retry.kind_of_exception(e), f"{type(e).__name__}: {e}", url=url) from e
        if resp.is_redirect:
            target = urljoin(url, resp.headers.get("Location", ""))
            if domain_of(target) != domain:
                raise FetchError(retry.HTTP_4XX, f"redirect to another domain refused: {target}", url, resp.status_code)
            url = target
            continue
        kind = retry.kind_of_status(resp.status_code)
        if kind is not None:
            raise FetchError(
                kind,
                f"HTTP {resp.status_code} {resp.reason or ''}".strip(),
                url=url,
                status=resp.status_code,
                retry_after=retry.parse_retry_after(resp.headers.get("Retry-After"), now()),
            )
        if len(body) > MAX_BODY_BYTES:
            raise FetchError(retry.PARSE, f"answer of {len(body)} bytes is too large", url, resp.status_code)
        return resp
    raise FetchError(retry.HTTP_4XX, f"more than {MAX_REDIRECTS} redirects", url=url)
