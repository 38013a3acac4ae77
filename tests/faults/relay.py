"""A loopback TCP relay that can go silent (issue 44): the network to PostgreSQL as a dropped route or a NAT
that forgets sees it, for the fault tests and `scripts/acceptance_faults_pg.py`.

`silence()` stops forwarding on every connection, old and new, and closes none: what a client sends is read
and dropped (the kernel acks it, so TCP keepalives and tcp_user_timeout see nothing wrong; only the client's
own bound on a round trip can tell). `resume()` forwards on new connections again; those made before stay
silent (the NAT forgot them): their client side is closed only when the client closes it, their server side
at once (the server then ends their sessions, as it would after a reset)."""

import selectors
import socket
import threading


class _Pair:
    def __init__(self, client, server):
        self.client, self.server = client, server
        self.forgotten = server is None     # made while silent: never forwarded


class SilentRelay:
    """`SilentRelay(port).start()` listens on 127.0.0.1:`relay.port` and forwards to 127.0.0.1:`port`."""

    def __init__(self, target_port, target_host="127.0.0.1"):
        self.target = (target_host, target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.silent = False
        self.pairs = {}                 # socket -> its _Pair
        self.sel = selectors.DefaultSelector()
        self.lock = threading.Lock()
        self.stopped = False
        self.thread = threading.Thread(target=self._loop, name="silent-relay", daemon=True)

    def start(self):
        self.listener.setblocking(False)
        self.sel.register(self.listener, selectors.EVENT_READ)
        self.thread.start()
        return self

    def silence(self):
        with self.lock:
            self.silent = True
            for pair in set(self.pairs.values()):
                pair.forgotten = True

    def resume(self):
        with self.lock:
            self.silent = False
            for pair in set(self.pairs.values()):
                if pair.forgotten and pair.server is not None:
                    self._drop(pair.server)
                    pair.server = None

    def stop(self):
        self.stopped = True
        self.thread.join(5)
        for sock in list(self.pairs):
            sock.close()
        self.listener.close()
        self.sel.close()

    def connections(self):
        return len({id(p) for p in self.pairs.values()})

    # --- the loop ----------------------------------------------------------------------------------

    def _loop(self):
        while not self.stopped:
            for key, _ in self.sel.select(0.1):
                with self.lock:
                    if key.fileobj is self.listener:
                        self._accept()
                    else:
                        self._forward(key.fileobj)

    def _accept(self):
        try:
            client, _ = self.listener.accept()
        except BlockingIOError:
            return
        server = None
        if not self.silent:
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                return
        pair = _Pair(client, server)
        for sock in (client, server):
            if sock is not None:
                sock.setblocking(False)
                self.pairs[sock] = pair
                self.sel.register(sock, selectors.EVENT_READ)

    def _forward(self, sock):
        pair = self.pairs.get(sock)
        if pair is None:
            return
        try:
            data = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if pair.forgotten:              # a black hole: read, dropped; a close is not passed on
            if not data:
                self._drop(sock)
                if sock is pair.server:
                    pair.server = None
            return
        other = pair.server if sock is pair.client else pair.client
        if not data:
            self._drop(sock)
            self._drop(other)
            return
        try:
            other.setblocking(True)
            other.sendall(data)
            other.setblocking(False)
        except OSError:
            self._drop(sock)
            self._drop(other)

    def _drop(self, sock):
        if sock is None or sock not in self.pairs:
            return
        self.pairs.pop(sock, None)
        try:
            self.sel.unregister(sock)
        except (KeyError, ValueError):
            pass
        sock.close()
