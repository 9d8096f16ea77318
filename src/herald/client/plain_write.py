"""Appends over a plain socket of their own, body sent as gathered pieces: the write-side
sibling of `herald.client.plain_read`.

An `AppendService` sender thread built with ``connection_per_journal`` PUTs its
journal's batches through one `PlainAppends`. Why (issue 15, the Spark sink):

- through httpx a 1 MiB append cost the sending thread 1.3-1.6 ms of CPU, through
  ``http.client`` 0.6-0.8 ms; and a plain connection serves one call at a time,
  which a sender thread — one per journal, its batches one after another — never
  needs more than (the journals' appends still overlap, a thread each);
- ``http.client`` still copied each body twice: the batch's ``bytearray`` into a
  ``bytes``, then that onto the request head (``msg += body``, against Nagle's
  delayed ACK). Here the head and the batch's pieces (`AppendSlot.write_owned`:
  Arrow results a Spark task framed, kept as they are) go out in one
  ``sendmsg``: the kernel's copy is the only one, and it is one system call.

Behaviour kept from `herald.client.plain.PlainHTTP`: the request (path, ``Host``,
the security headers, the register headers of `herald.client._protocol`); one
keep-alive connection, reopened when the broker closed it (checked before each
request, so a request is never sent twice on a dead one); the client's timeout;
failures as httpx raised them (`herald.client.plain._as_httpx`), so retries see
what they saw. Only ``http://`` addresses without a proxy in the environment.
"""

from __future__ import annotations

import http.client
import socket
from collections.abc import Sequence

from herald.client import _protocol as ops
from herald.client._protocol import Request, Response
from herald.client.models import AppendResult
from herald.client.plain import PlainEndpoint, _as_httpx, _Headers, closed_while_idle
from herald.client.plain_read import proxied
from herald.protocol.labels import LabelSelector, LabelSet

__all__ = ["PlainAppends", "Piece", "plain_appends_possible"]

Piece = bytes | bytearray | memoryview
#: Pieces per ``sendmsg`` (Linux's IOV_MAX is 1024; one entry is the head).
_IOV_PIECES = 1000


def plain_appends_possible(address: str) -> bool:
    """Whether appends to ``address`` can go over a `PlainAppends` connection."""
    return address.lower().startswith("http://") and not proxied()


class PlainAppends(PlainEndpoint):
    """One keep-alive connection to ``address`` (``http://host[:port][/prefix]``)
    for appends whose body is a sequence of pieces. Not thread-safe: one user."""

    def __init__(self, address: str, timeout_s: float, headers: dict[str, str]) -> None:
        super().__init__(address, timeout_s, headers)
        self._sock: socket.socket | None = None

    def append(self, journal: str, pieces: Sequence[Piece], check_registers: LabelSelector | str | None = None,
               union_registers: LabelSet | str | None = None,
               subtract_registers: LabelSet | str | None = None) -> AppendResult:
        """Append the pieces, joined, as one atomic write (`BrokerClient.append`)."""
        op = ops.append(journal, b"", check_registers, union_registers, subtract_registers)
        resp = self._send(next(op), pieces)
        try:
            op.send(resp)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        raise AssertionError("an append is one round trip")

    def _send(self, req: Request, pieces: Sequence[Piece]) -> Response:
        size = sum(memoryview(p).nbytes for p in pieces)
        head = self.request_head(req, f"Content-Length: {size}")
        try:
            sock = self._connection()
            _send_all(sock, [head, *pieces])
            resp = http.client.HTTPResponse(sock, method=req.method)
            try:
                resp.begin()
                content = resp.read()
            finally:
                resp.close()  # the response's file only: the socket stays ours
        except (OSError, http.client.HTTPException, ValueError) as err:
            self.close()
            raise _as_httpx(err) from err
        if resp.will_close:
            self.close()
        return Response(resp.status, _Headers(resp.getheaders()), content)

    def _connection(self) -> socket.socket:
        """The open connection, unless the broker closed it since (readable while
        idle: EOF or an unasked answer), else a new one."""
        if self._sock is not None and closed_while_idle(self._sock):
            self.close()
        if self._sock is None:
            self._sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self._sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _send_all(sock: socket.socket, pieces: list[Piece]) -> None:
    """Send every piece, in order, in as few ``sendmsg`` calls as the kernel takes."""
    views = [memoryview(p).cast("B") for p in pieces if len(p)]
    while views:
        sent = sock.sendmsg(views[:_IOV_PIECES])
        while sent:
            if sent >= len(views[0]):
                sent -= len(views.pop(0))
            else:
                views[0], sent = views[0][sent:], 0
