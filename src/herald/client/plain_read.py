"""Streamed reads over a plain socket, for a `BrokerClient` of an ``http://`` broker.

At a local broker's speed httpx's receive path cost more CPU than the copy it
does: every ``recv`` is a new ``bytes``, h11 appends it to its receive buffer and
slices each HTTP chunk's data out again (two copies more than the kernel's, and
h11 events and generators per read). A 256 MiB SNAPPY read cost the client
0.49-0.65 ms of CPU per MiB that way. Here each chunk of the body is received
straight into a ``bytes`` of its exact size (`BufferedReader.read`, which
``recv_into``s it): the kernel's copy is the only one. A non-blocking read held
whole in persisted SNAPPY fragments comes as their stored chunks, decoded here
(`SNAPPY_FRAMED`, `herald.broker.encoded_read`).

Behaviour kept from httpx: the same request line, ``Host`` and token; chunks are
the caller's to keep (``bytes``; a fresh ``bytearray`` where this client decoded
them, as offloaded reads give; h11 gave ``bytearray``); the client's
timeout on connect and on each read (none on a blocking read's body); a body cut
short is `httpx.RemoteProtocolError` and every other failure the httpx error it
was (`herald.client.plain._as_httpx`), so retries see what they saw; `close`
from another thread ends a blocked read with such an error; a connection whose
body was read to its end is kept for the next read, as httpx's pool does. With
a proxy in the environment, reads stay on httpx, which honours it.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import os
import socket
import threading
from collections.abc import Iterator
from typing import cast

from herald.client._protocol import Request
from herald.client.plain import PlainEndpoint, _as_httpx, _Headers, closed_while_idle

__all__ = ["PlainReads", "StreamedResponse", "proxied"]

PIECE_BYTES = 4 << 20
"""The largest piece of body handed out at once: a broker's chunk (one decoded
segment, ~3 MiB) goes out whole. Smaller pieces were no better: measured in
fresh processes on a 256 MiB SNAPPY read (CPU ms and page faults per MiB),
whole chunks 0.26-0.31 and 29, 256 KiB pieces 0.26-0.35 and 29, but 512 KiB
0.45-0.56 and 103, and 1 MiB 0.57-0.65 and 213: glibc served those sizes with
fresh pages (an mmap each, or heap grown again after a trim) every time."""
_LINE_BYTES = 65536
_BUFFER_BYTES = 8192
"""The socket file's own buffer: the head and chunk lines pass through it, and of
each piece of body only the last partial block (the rest is received in place)."""
_PROXY_NAMES = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")
SNAPPY_FRAMED = "x-snappy-framed"
"""The stored framing a broker may answer a non-blocking read of persisted SNAPPY
fragments in (`herald.broker.encoded_read`): a third of the bytes on the socket,
decoded here, every chunk's CRC-32C checked."""


def proxied() -> bool:
    """Whether httpx would send an ``http://`` request through a proxy."""
    return any(os.environ.get(name) for name in _PROXY_NAMES)


class PlainReads(PlainEndpoint):
    """Streamed GETs to ``address`` (``http://host[:port][/prefix]``), each on a
    connection of its own: a fresh one, or one a finished read left idle."""

    def __init__(self, address: str, timeout_s: float, headers: dict[str, str]) -> None:
        super().__init__(address, timeout_s, headers)
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()

    def stream(self, req: Request, block: bool) -> StreamedResponse:
        """Send ``req`` and read its status line and headers; the body is the
        returned response's to read."""
        head = self.request_head(req, f"Accept: */*\r\nAccept-Encoding: {SNAPPY_FRAMED}")
        sock = None
        try:
            sock = self._connection()
            sock.sendall(head)
            sock.settimeout(None if block else self.timeout_s)
            return StreamedResponse(self, sock)
        except (OSError, http.client.HTTPException, ValueError) as err:
            if sock is not None:
                sock.close()
            raise _as_httpx(err) from err

    def _connection(self) -> socket.socket:
        """An idle connection the broker has not closed since (readable while idle:
        EOF or an unasked answer), else a new one."""
        while True:
            with self._lock:
                sock = self._idle.pop() if self._idle else None
            if sock is None:
                return socket.create_connection((self.host, self.port), timeout=self.timeout_s)
            if not closed_while_idle(sock):
                sock.settimeout(self.timeout_s)
                return sock
            sock.close()

    def keep(self, sock: socket.socket) -> None:
        with self._lock:
            self._idle.append(sock)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for sock in idle:
            sock.close()


class StreamedResponse:
    """One response being read: ``status_code`` and ``headers`` as httpx names
    them, the body from `iter_raw` (or whole from `read`). Close it."""

    def __init__(self, reads: PlainReads, sock: socket.socket) -> None:
        self._reads, self._sock = reads, sock
        self._fp = cast(io.BufferedReader, sock.makefile("rb", buffering=_BUFFER_BYTES))
        self._finished = self._closed = False
        status = self._fp.readline(_LINE_BYTES + 1)
        version, code, *_ = status.split(None, 2) if status else (b"", b"")
        if not version.startswith(b"HTTP/1.") or not code.isdigit():
            raise http.client.BadStatusLine(repr(status))
        self.status_code = int(code)
        message = http.client.parse_headers(self._fp)
        self.headers = _Headers(list(message.items()))
        self._keep_alive = "close" not in self.headers.get("Connection", "").lower()

    def iter_raw(self) -> Iterator[bytes]:
        """The body's bytes (decoded, if the broker sent them `SNAPPY_FRAMED`),
        piece by piece; raises httpx's errors."""
        try:
            if self.headers.get("Content-Encoding", "").lower() == SNAPPY_FRAMED:
                yield from self._decoded(self._body())
            else:
                yield from self._body()
        except (OSError, http.client.HTTPException, ValueError) as err:  # CodecError is a ValueError
            self.close()
            raise _as_httpx(err) from err
        self._finished = True
        self.close()

    def read(self) -> bytes:
        return b"".join(self.iter_raw())

    def _body(self) -> Iterator[bytes]:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            yield from self._chunked()
        elif "Content-Length" in self.headers:
            yield from self._pieces(int(self.headers["Content-Length"]))
        else:
            self._keep_alive = False
            yield from self._pieces(None)

    def _decoded(self, pieces: Iterator[bytes]) -> Iterator[bytes]:
        """The read's content from a `SNAPPY_FRAMED` body: what decodes between the
        read's offset (Content-Range) and ``X-Encoded-End``, the body's decoded bytes
        starting at ``X-Encoded-Begin`` (`herald.client.framed_read`). A body the
        broker ended short of ``X-Encoded-End`` ends the read there, as a decoded
        one would; one that ends inside a chunk, or a chunk whose CRC fails, is a
        `CodecError`. (Imported here: the decoder loads the fragment package, which a
        client that never gets such a body, as a Spark process, does without.)"""
        from herald.client.framed_read import decoded_content

        begin, hi = int(self.headers["X-Encoded-Begin"]), int(self.headers["X-Encoded-End"])
        lo = int(self.headers["Content-Range"].split()[1].split("-", 1)[0])
        yield from decoded_content(pieces, begin, lo, hi)  # type: ignore[misc]  # bytes-like

    def _chunked(self) -> Iterator[bytes]:
        fp = self._fp
        while True:
            line = fp.readline(_LINE_BYTES + 1)
            if not line.endswith(b"\n"):
                raise http.client.IncompleteRead(line)
            size = int(line.split(b";", 1)[0], 16)
            if size == 0:
                while (line := fp.readline(_LINE_BYTES + 1)) not in (b"\r\n", b"\n"):
                    if not line.endswith(b"\n"):  # trailers, ignored as h11 does
                        raise http.client.IncompleteRead(line)
                return
            yield from self._pieces(size)
            if fp.readline(3) not in (b"\r\n", b"\n"):
                raise http.client.HTTPException("a chunk did not end with CRLF")

    def _pieces(self, size: int | None) -> Iterator[bytes]:
        """``size`` bytes (None: until EOF) in pieces of at most `PIECE_BYTES`.
        `BufferedReader.read` receives all but a last partial block straight into
        the new ``bytes`` it returns, which (unlike a ``bytearray``) is not
        zero-filled first: that fill was a tenth of the client's CPU (perf)."""
        while size is None or size:
            want = PIECE_BYTES if size is None else min(size, PIECE_BYTES)
            piece = self._fp.read1(want) if size is None else self._fp.read(want)
            if size is None:
                if not piece:
                    return
            elif len(piece) != want:
                raise http.client.IncompleteRead(piece, size - len(piece))
            else:
                size -= want
            yield piece

    def close(self) -> None:
        """Keep the connection for the next read if its body was read whole; else
        shut it down (which also wakes a read blocked on it in another thread)."""
        if self._closed:
            return
        self._closed = True
        if self._finished and self._keep_alive:
            self._fp.close()  # drops the file's reference only: the socket stays open
            self._reads.keep(self._sock)
            return
        with contextlib.suppress(OSError):  # first: a read blocked in the file holds its lock
            self._sock.shutdown(socket.SHUT_RDWR)
        self._fp.close()
        self._sock.close()
