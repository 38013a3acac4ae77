"""The hostile answers of the stand-in: what a broken or malicious server may send with a 200.

A mixin of the site's request handler: ``hostile(kind, tid)`` writes one answer of a kind in
``faults.HOSTILE_KINDS`` (or "stall") to the client.
"""

import threading
import time
import zlib

DEEP_LEVELS = 300_000
BOMB_MB = 256
HUGE_MB = 60
_bomb_lock = threading.Lock()
_bomb = []


def bomb_body():
    """gzip of BOMB_MB MB of blanks (about 250 KB), made once."""
    with _bomb_lock:
        if not _bomb:
            z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            blank = b" " * 2**20
            _bomb.append(b"".join([*(z.compress(blank) for _ in range(BOMB_MB)), z.flush()]))
        return _bomb[0]


class HostileAnswers:
    """Hostile answers for a ``BaseHTTPRequestHandler`` whose server carries the site (``server.site``)."""

    def hostile(self, kind, tid):
        """Answer tid's detail request with the hostile `kind`."""
        site = self.server.site
        body = site.corpus.detail(tid)
        if kind == "deep":
            self._send(200, b'{"id":%d,"workflow":' % tid + b"[" * DEEP_LEVELS + b"]" * DEEP_LEVELS + b"}")
        elif kind == "badutf8":
            self._send(200, body.replace(b'"name":"', b'"name":"\xff\xfe\xc3', 1))
        elif kind == "surrogate":
            self._send(200, body.replace(b'"name":"', b'"name":"\\ud800', 1))
        elif kind == "wrong":
            ids = site.corpus.ids
            other = ids[(site.corpus.position[tid] + 1) % len(ids)]
            self._send(200, site.corpus.detail(other) if other != tid else b'{"id":0}')
        elif kind == "bomb":
            self._send(200, bomb_body(), headers={"Content-Encoding": "gzip"})
        else:
            self._stream(kind, body)

    def _stream(self, kind, body):
        """trickle, huge, endless and stall: written piece by piece until done or the client goes away."""
        site = self.server.site
        site.count_status(200)
        self.close_connection = True
        try:
            if kind == "stall":
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Pad: ")
                while True:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(site.trickle_s)
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            if kind == "endless":
                self.send_header("Transfer-Encoding", "chunked")
            elif kind == "huge":
                self.send_header("Content-Length", str(HUGE_MB * 2**20))
            else:
                self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            if kind == "trickle":
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(site.trickle_s)
            elif kind == "huge":
                blank = b" " * 2**20
                self.wfile.write(body)
                left = HUGE_MB * 2**20 - len(body)
                while left > 0:
                    self.wfile.write(blank[:left])
                    left -= len(blank)
            else:
                chunk = b"%x\r\n%s\r\n" % (2**16, b" " * 2**16)
                while True:
                    self.wfile.write(chunk)
        except (ConnectionError, TimeoutError, OSError):
            pass
