"""The YouTube library's own requests are bounded as ours are: the whole answer within --timeout, its
decoded size within --max-answer-mb. The session is the one the transcript fetcher builds: the adapter
mounted on it is what every request of youtube-transcript-api goes through."""

import socket
import threading
import time

import pytest
import requests
import responses

from scraper.base.errors import FetchError
from scraper.policy import retry
from scraper.sites import youtube

BASE = "http://yt.test"


class Ctx:
    """The worker's side of one job, as the adapter sees it: a gate and what it is told."""

    def __init__(self):
        self.failures, self.log = [], []

    def gate(self, url=None):
        self.gated = url

    def failed(self, error):
        self.failures.append(error.kind)

    def logged(self, kind, status, ms):
        self.log.append((kind, status))


def session_on(base, timeout_s=5.0, max_bytes=1000):
    adapter = youtube.RedirectAdapter(base, timeout_s, max_bytes)
    adapter.ctx = Ctx()
    s = requests.Session()
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    return s, adapter.ctx


@responses.activate
def test_an_answer_within_the_cap_reads_as_usual():
    responses.get(BASE + "/watch", body=b"x" * 1000)
    s, ctx = session_on(BASE)
    resp = s.get("https://www.youtube.com/watch?v=AzOgpdn8ngY")
    assert resp.status_code == 200 and resp.content == b"x" * 1000 and ctx.failures == []
    assert ctx.log == [("ok", None)]        # the request log has it, as it has ours


@responses.activate
def test_an_answer_over_the_cap_is_too_large_and_not_the_domains_fault():
    responses.get(BASE + "/watch", body=b"x" * 1001)
    s, ctx = session_on(BASE)
    with pytest.raises(FetchError) as e:
        s.get("https://www.youtube.com/watch?v=AzOgpdn8ngY")
    assert e.value.kind == retry.TOO_LARGE and ctx.failures == [] and ctx.log == [(retry.TOO_LARGE, 200)]


@pytest.fixture
def trickle():
    """A server on 127.0.0.1 that sends its headers at once, then one byte of the body every 0.1 s."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    stop = threading.Event()

    def serve():
        conn, _ = server.accept()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nContent-Type: text/html\r\n\r\n")
        try:
            while not stop.is_set():
                conn.sendall(b"x")
                time.sleep(0.1)
        except OSError:
            pass                    # the client cut the connection: what the test wants
        finally:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    server.close()
    thread.join(5)


def test_a_trickled_answer_ends_at_the_deadline_and_counts_against_the_domain(trickle):
    s, ctx = session_on(trickle, timeout_s=0.5, max_bytes=10_000)
    with pytest.raises(FetchError) as e:
        s.get("https://www.youtube.com/watch?v=AzOgpdn8ngY")
    assert e.value.kind == retry.TIMEOUT and ctx.failures == [retry.TIMEOUT] and ctx.log == [(retry.TIMEOUT, 200)]
