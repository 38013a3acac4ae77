"""The HTTP side: one requests Session per process, and `fetch`, which turns every failure into FetchError.

Everything from the network is hostile until parsed: an answer is bounded in total time (a deadline over
the whole answer, not only each read) and in decoded bytes (counted while it streams, after
decompression, so a compression bomb is refused before it is in memory)."""

import io
import socket
import threading
import time
from urllib.parse import urljoin, urlsplit

import requests

from scraper.base.errors import FetchError
from scraper.base.proxies import shown
from scraper.base.urls import domain_of
from scraper.policy import retry

MAX_REDIRECTS = 5
# pinned, not requests' default: urllib3 adds br or zstd when brotli or zstandard happen to be installed, and a
# server's ETag depends on the coding it chose, so validators are kept beside the Accept-Encoding they came under
ACCEPT_ENCODING = "gzip, deflate"
CHUNK_BYTES = 64 * 1024     # urllib3 decompresses at most this much per read: the cap is overshot by one chunk


class Answer(bytes):
    """The decoded body of a 2xx answer, with what the mirror keeps beside it: the URL it came from (after
    redirects), its HTTP status and Content-Type. A bytes subclass, so every reader of a body still works."""

    url: str | None = None
    status: int | None = None
    content_type: str | None = None
    headers: dict = {}          # the answer's header fields, by lower-case name (a 304's: all it carries)
    not_modified = False        # the kept answer handed back for a 304 (politeness/revalidation)


def answer(body, url, status, content_type, headers=None):
    out = Answer(body)
    out.url, out.status, out.content_type = url, status, content_type
    out.headers = {k.lower(): v for k, v in (headers or {}).items()}
    return out


def kind_of_status(status):
    """The failure kind of an HTTP status, or None when the status is a success."""
    if 200 <= status < 300:
        return None
    if status == 429:
        return retry.HTTP_429
    if status >= 500:
        return retry.HTTP_5XX
    return retry.HTTP_4XX


def kind_of_exception(exc):
    """The failure kind of an exception raised by requests."""
    if isinstance(exc, requests.Timeout):
        return retry.TIMEOUT
    if isinstance(exc, (ValueError, requests.exceptions.ContentDecodingError)):
        return retry.PARSE
    return retry.NETWORK


def is_proxy_fault(exc):
    """Whether an exception raised before any answer came, with a proxy set, is the proxy's: a connection
    to it that failed (refused, reset, closed, not HTTP, a failed CONNECT, no connection in time). A read
    timeout (the proxy is waiting on the site) and a TLS error with the site are the site's."""
    return isinstance(exc, requests.ConnectionError) and not isinstance(exc, requests.exceptions.SSLError)


class Session(requests.Session):
    """requests reads the environment's proxy settings again for every request (walking os.environ twice:
    ~0.2 ms of CPU a request, 2 % of a core at 100/s); they do not change while a process lives, so what the
    environment adds for an origin is kept (at most ENV_KEPT origins, then read afresh)."""

    ENV_KEPT = 256

    def __init__(self):
        super().__init__()
        self._env = {}

    def merge_environment_settings(self, url, proxies, stream, verify, cert):
        if not self.trust_env:
            return super().merge_environment_settings(url, proxies, stream, verify, cert)
        parts = urlsplit(url)
        key = (parts.scheme, parts.netloc, None if proxies is None else tuple(sorted(proxies.items())),
               stream, verify, cert)
        kept = self._env.get(key)
        if kept is None:
            if len(self._env) >= self.ENV_KEPT:
                self._env.clear()
            kept = self._env[key] = super().merge_environment_settings(
                url, None if proxies is None else dict(proxies), stream, verify, cert)
        return {**kept, "proxies": dict(kept["proxies"])}


def make_session(user_agent, trust_env=True):
    """The process's Session; `trust_env=False` with a proxy pool, so HTTP(S)_PROXY and NO_PROXY cannot
    take a request another way than the pool says."""
    s = Session()
    s.trust_env = trust_env
    s.headers.update({"User-Agent": user_agent, "Accept": "application/json, text/html;q=0.9",
                      "Accept-Encoding": ACCEPT_ENCODING})
    return s


def fetch(session, url, timeout_s, max_bytes, now=time.time, clock=time.monotonic, proxy=None, headers=None):
    """GET `url`; the decoded body when the status is 2xx, else FetchError with its kind. `headers`: the
    request's own (a refresh's validators): then a 304 is an answer too, an empty `Answer` of status 304.

    `timeout_s` bounds the whole answer, redirects included; `max_bytes` bounds its decoded size.
    Redirects are followed only within the same politeness domain, through the same `proxy` (a
    `base.proxies.ProxyUrl`, or None: the session's way). A failure before the proxy answered (refused,
    reset, garbage instead of HTTP, a failed CONNECT, no connection in time) or its 407 is FetchError
    `proxy`: the proxy's fault, not the site's."""
    domain = domain_of(url)
    proxies = None if proxy is None else {} if proxy.direct else {"http": proxy.secret, "https": proxy.secret}
    deadline = clock() + timeout_s
    for _ in range(MAX_REDIRECTS + 1):
        left = deadline - clock()
        if left <= 0:
            raise FetchError(retry.TIMEOUT, f"no complete answer within {timeout_s:g} s", url=url)
        try:
            resp = session.get(url, timeout=left, allow_redirects=False, stream=True, proxies=proxies,
                               headers=headers)
        except requests.RequestException as e:
            if proxies and is_proxy_fault(e):
                raise FetchError(retry.PROXY, f"proxy {proxy}: {type(e).__name__}: {shown(str(e))}", url=url) from e
            raise FetchError(kind_of_exception(e), f"{type(e).__name__}: {e}", url=url) from e
        if proxies and resp.status_code == 407:
            resp.close()
            raise FetchError(retry.PROXY, f"proxy {proxy} answered 407: it refuses its credentials", url=url)
        if resp.is_redirect:
            resp.close()
            target = urljoin(url, resp.headers.get("Location", ""))
            if domain_of(target) != domain:
                raise FetchError(retry.HTTP_4XX, f"redirect to another domain refused: {target}", url, resp.status_code)
            url = target
            continue
        if resp.status_code == 304 and headers:
            resp.close()    # not modified: no content, only the header fields to freshen the stored ones
            return answer(b"", url, 304, resp.headers.get("Content-Type"), resp.headers)
        kind = kind_of_status(resp.status_code)
        if kind is not None:
            resp.close()    # the body of an error is not needed; closing drops the connection, not the pool
            raise FetchError(
                kind,
                f"HTTP {resp.status_code} {resp.reason or ''}".strip(),
                url=url,
                status=resp.status_code,
                retry_after=retry.parse_retry_after(resp.headers.get("Retry-After"), now()),
            )
        return _read(resp, url, deadline, timeout_s, max_bytes, clock, proxy if proxies else None)
    raise FetchError(retry.HTTP_4XX, f"more than {MAX_REDIRECTS} redirects", url=url)


def read_body(resp, url, deadline, timeout_s, max_bytes, clock=time.monotonic):
    """The decoded body of an answer sent with `stream=True`, under the `deadline` (a `clock()` value)
    and the size cap; FetchError `timeout` or `too_large` otherwise. For answers `fetch` does not send
    itself (a library's own requests, e.g. YouTube's)."""
    return _read(resp, url, deadline, timeout_s, max_bytes, clock)


def _read(resp, url, deadline, timeout_s, max_bytes, clock, proxy=None):
    """The decoded body, read chunk by chunk under the deadline and the size cap."""
    declared = resp.headers.get("Content-Length", "")
    if declared.isdigit() and "Content-Encoding" not in resp.headers and int(declared) > max_bytes:
        resp.close()
        raise _too_large(f"announces {int(declared)} bytes", max_bytes, url, resp.status_code)
    # A read blocks until its chunk is full, so a server that trickles one byte at a time would
    # never let a check between chunks run: a timer cuts the socket at the deadline instead.
    cut = threading.Event()
    sock = _socket_of(resp)
    timer = threading.Timer(max(0.0, deadline - clock()), _cut, (sock, cut))
    timer.daemon = True
    timer.start()
    body = bytearray()
    try:
        for chunk in resp.iter_content(CHUNK_BYTES):
            body += chunk
            if len(body) > max_bytes:
                resp.close()
                raise _too_large("is larger once decoded", max_bytes, url, resp.status_code)
            if clock() > deadline:
                break
        else:
            # complete, even if the timer fired just after the last chunk
            return answer(body, url, resp.status_code, resp.headers.get("Content-Type"), resp.headers)
    except requests.RequestException as e:
        if not cut.is_set():
            resp.close()
            kind = kind_of_exception(e)
            if proxy is not None and kind == retry.NETWORK:
                # the connection is the proxy's: a reset or a cut mid-body rotates, as Crawlee does
                raise FetchError(retry.PROXY, f"proxy {proxy}: {type(e).__name__} mid-answer: {shown(str(e))}",
                                 url=url) from e
            raise FetchError(kind, f"{type(e).__name__}: {e}", url=url) from e
    finally:
        timer.cancel()
        timer.join()
        if sock is not None:
            sock.close()
    resp.close()
    raise FetchError(retry.TIMEOUT, f"no complete answer within {timeout_s:g} s", url=url)


def _socket_of(resp):
    """Our own handle (a dup of its descriptor) on the answer's socket, or None (e.g. a mocked answer)."""
    try:
        return socket.fromfd(resp.raw.fileno(), socket.AF_INET, socket.SOCK_STREAM)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None


def _cut(sock, cut):
    """Timer thread: the deadline passed mid-answer; shut the socket so the blocked read returns."""
    cut.set()
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _too_large(how, max_bytes, url, status):
    return FetchError(retry.TOO_LARGE, f"answer {how} than the cap of {max_bytes / 2**20:g} MB (--max-answer-mb)"
                      if how.startswith("is ") else
                      f"answer {how}, more than the cap of {max_bytes / 2**20:g} MB (--max-answer-mb)",
                      url, status)
