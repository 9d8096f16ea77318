"""A stdlib ``http.client`` runner for whole (non-streamed) calls to a plain ``http://`` broker.

Each streaming query's Spark source runner is a fresh process whose broker calls
are a few small ones per trigger (list journals, write heads, fragments).
Through httpx they first import httpx, httpcore and h11 (≈ 40-60 ms of CPU per
query here, `python -X importtime`); ``http.client`` costs ≈ 10 ms.
`BrokerClient` uses this runner only when asked (``plain=True``) and only for
``http://`` addresses: TLS, streamed reads and async clients stay on httpx.

Behaviour kept from httpx: one keep-alive connection, reopened when the broker
has closed it (checked before each request, as httpcore does, so a request is
never sent twice); the client's timeout on connect and on each read; and the
same errors, `httpx.TransportError` subclasses (httpx is imported only then),
so `herald.client.transient.is_transient` and every caller's retries see what
they saw before.
"""

from __future__ import annotations

import http.client
import select
import socket
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import orjson

from herald.client._protocol import Request, Response

__all__ = ["PlainEndpoint", "PlainHTTP", "closed_while_idle"]

#: Characters a request path keeps as they are (RFC 3986 pchar and ``/``).
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"


class _Headers(dict[str, str]):
    """Response headers looked up case-insensitively (``[]`` raising KeyError,
    ``get``, ``in``), repeated ones joined with ``, ``: as httpx's ``Headers``."""

    def __init__(self, items: list[tuple[str, str]]) -> None:
        super().__init__()
        for name, value in items:
            key = name.lower()
            super().__setitem__(key, f"{super().__getitem__(key)}, {value}" if key in self else value)

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and super().__contains__(name.lower())

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(name.lower(), default)


class PlainEndpoint:
    """A broker as plain calls reach it: ``address`` (``http://host[:port][/prefix]``)
    split, the client's timeout and its security headers; and the request head that
    plain reads and appends write themselves (`herald.client.plain_read`,
    `herald.client.plain_write`)."""

    def __init__(self, address: str, timeout_s: float, headers: dict[str, str]) -> None:
        parts = urlsplit(address)
        self.host, self.port = parts.hostname or "localhost", parts.port or 80
        self.host_header = parts.netloc
        self.prefix = parts.path.rstrip("/")
        self.timeout_s = timeout_s
        self.headers = headers

    def request_head(self, req: Request, header: str) -> bytes:
        """``req``'s request line and headers, ``header`` (``Name: value``) among them."""
        target = quote(self.prefix + req.path, safe=_PATH_SAFE)
        if req.params:
            target += "?" + urlencode(req.params)
        lines = [f"{req.method} {target} HTTP/1.1", f"Host: {self.host_header}", header,
                 *(f"{k}: {v}" for k, v in {**self.headers, **req.headers}.items())]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class PlainHTTP(PlainEndpoint):
    """One keep-alive connection to ``address`` (``http://host[:port][/prefix]``)."""

    def __init__(self, address: str, timeout_s: float, headers: dict[str, str]) -> None:
        super().__init__(address, timeout_s, headers)
        self._conn: http.client.HTTPConnection | None = None

    def send(self, req: Request) -> Response:
        """``req``, answered whole; a failure is raised as httpx raises it."""
        body, headers = self._body(req)
        target = quote(self.prefix + req.path, safe=_PATH_SAFE)
        if req.params:
            target += "?" + urlencode(req.params)
        try:
            conn = self._connection()
            conn.request(req.method, target, body=body, headers=headers)
            resp = conn.getresponse()
            content = resp.read()
        except (OSError, http.client.HTTPException) as err:
            self.close()
            raise _as_httpx(err) from err
        if resp.will_close:
            self.close()
        return Response(resp.status, _Headers(resp.getheaders()), content)

    def _body(self, req: Request) -> tuple[bytes | None, dict[str, str]]:
        headers = {**self.headers, **req.headers}
        if req.json is not None:
            headers["Content-Type"] = "application/json"
            return orjson.dumps(req.json), headers
        return req.content, headers

    def _connection(self) -> http.client.HTTPConnection:
        """The open connection, unless the broker closed it since (readable while
        idle: EOF or an unasked answer), as httpcore checks before reusing one."""
        if self._conn is not None and self._conn.sock is not None and closed_while_idle(self._conn.sock):
            self.close()
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _as_httpx(err: Exception) -> Exception:
    """The httpx error a request through httpx would have raised for ``err``."""
    import httpx

    if isinstance(err, socket.timeout | TimeoutError):
        return httpx.ReadTimeout(str(err) or "timed out")
    if isinstance(err, ConnectionRefusedError | socket.gaierror):
        return httpx.ConnectError(str(err))
    if isinstance(err, http.client.HTTPException | ConnectionResetError | BrokenPipeError):
        return httpx.RemoteProtocolError(str(err) or type(err).__name__)
    return httpx.NetworkError(str(err)) if isinstance(err, OSError) else httpx.TransportError(str(err))


def closed_while_idle(sock: socket.socket) -> bool:
    """Whether an idle keep-alive connection is readable: EOF (the broker closed it)
    or an answer nobody asked for; either way it must not carry a request (as
    httpcore checks before reusing one). ``poll``, not ``select``: a process with
    over 1,024 descriptors open (a Spark worker with many journals) is fine."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))
