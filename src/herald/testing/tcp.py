"""Network faults for tests, on loopback TCP: a proxy whose connections can be cut,
silenced or held, and an endpoint that holds every request until released.

    proxy = TcpProxy(etcd.client_port)   # or an S3 server's port
    proxy.cut()        # every connection closed, new ones refused (a partition)
    proxy.silence()    # open connections go half-open: bytes dropped, no reset
    proxy.hold()       # ...and new ones accepted, never answered (a hung endpoint)
    proxy.restore()    # new connections work again

    store = HeldStore()                  # a store endpoint that never answers
    store.connected.wait(30); store.release()   # from then on: 403 to everything

Each serves on one daemon thread (`accept_each`) until closed; no sleeps.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

__all__ = ["HeldStore", "TcpProxy", "accept_each"]


def accept_each(handle: Callable[[socket.socket], None]) -> tuple[socket.socket, str]:
    """A listener on a free loopback port whose connections are handed to ``handle``,
    one at a time on a daemon thread, until the listener is closed; the listener
    and its ``http://`` URL."""
    listener = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed at the end of the test
                return
            handle(conn)

    threading.Thread(target=accept, daemon=True).start()
    return listener, f"http://127.0.0.1:{listener.getsockname()[1]}"


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class TcpProxy:
    """A TCP proxy to a loopback port whose connections the test controls (see the
    module doc): a network partition, or a hung endpoint, between one process and
    a server that keeps serving the others."""

    def __init__(self, target_port: int) -> None:
        self._target = ("127.0.0.1", target_port)
        self._open, self._lock, self._socks = threading.Event(), threading.Lock(), []
        self._open.set()
        self._holding = False
        self._silenced: set[socket.socket] = set()  # connections whose bytes vanish (half-open)
        self._held: list[socket.socket] = []
        self.accepted = 0
        self._listener, self.url = accept_each(self._connect)

    def _connect(self, client: socket.socket) -> None:
        with self._lock:
            if self._holding:
                self._held.append(client)
                return
        if not self._open.is_set():
            client.close()
            return
        upstream = socket.create_connection(self._target)
        with self._lock:
            self._socks += [client, upstream]
            self.accepted += 1
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                if src not in self._silenced:
                    dst.sendall(data)
        except OSError:
            pass
        _shut(src)
        _shut(dst)

    def cut(self) -> None:
        self._open.clear()
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            _shut(s)
            s.close()

    def silence(self) -> None:
        """Every open connection goes half-open: still open, no reset, its bytes
        dropped both ways (a partition that drops packets); new ones work."""
        with self._lock:
            self._silenced.update(self._socks)

    def hold(self) -> None:
        """Hang like a store that accepts and never answers: open connections are
        silenced and new ones accepted and never read, until `restore`."""
        with self._lock:
            self._holding = True
            self._silenced.update(self._socks)

    def restore(self) -> None:
        with self._lock:
            self._holding = False
            held, self._held = self._held, []
        for s in held:
            s.close()
        self._open.set()

    def close(self) -> None:
        self.restore()
        self.cut()
        self._listener.close()


class HeldStore:
    """A TCP endpoint that takes a store's requests and answers none until
    `release`; from then on it answers each with 403 (an error no client retries).
    A broker listing a journal's store there is held inside `Journal.open` for as
    long as the test needs. `connected` is set at the first request."""

    DENIED = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

    def __init__(self) -> None:
        self.connected, self._released = threading.Event(), threading.Event()
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener, self.url = accept_each(self._take)

    def _take(self, conn: socket.socket) -> None:
        with self._lock:
            if self._released.is_set():
                self._deny(conn)
            else:
                self._held.append(conn)
        self.connected.set()

    def _deny(self, conn: socket.socket) -> None:
        try:
            conn.sendall(self.DENIED)
        except OSError:
            pass
        conn.close()

    def release(self) -> None:
        with self._lock:
            self._released.set()
            for conn in self._held:
                self._deny(conn)
            self._held.clear()

    def close(self) -> None:
        self.release()
        self._listener.close()
