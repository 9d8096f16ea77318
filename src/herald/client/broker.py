"""`BrokerClient` (sync) and `AsyncBrokerClient`: one method table, two runners.

Each method is a sans-I/O operation from `herald.client._protocol` bound to the
client with `_operation`; the client's ``_run`` drives it over `httpx.Client` or
`httpx.AsyncClient`. So the sync and async APIs cannot drift apart: they are the
same code. Reads stream, so they get small `Reader` / `AsyncReader` classes that
share `_ReadState` for everything but the I/O.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

from herald.client import _protocol as ops
from herald.client._protocol import Request, Response
from herald.client.models import ReadHead
from herald.client.plain import PlainHTTP
from herald.client.plain_read import PlainReads, StreamedResponse, proxied
from herald.client.security import ClientSecurity

if TYPE_CHECKING:  # imported where a client is built: a `plain` one never loads it
    import httpx

__all__ = ["AsyncBrokerClient", "AsyncReader", "BrokerClient", "Reader"]

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_ADDRESS = "http://localhost:8080"


READ_RECV_BYTES = 1 << 20
"""How much a streamed read asks of the socket per ``recv``: httpcore asks 64 KiB,
and at a GB/s its per-read Python cost (h11 events, generators) is most of the
client's CPU; 1 MiB reads take a 256 MiB read from ~1.0 to ~1.5 GB/s here."""


def _widen_reads(response: httpx.Response) -> None:
    """Have the HTTP/1.1 connection under a streamed ``response`` read
    `READ_RECV_BYTES` at a time. httpcore has no option for it, so this sets its
    connection's ``READ_NUM_BYTES`` through httpx's and httpcore's stream wrappers
    (httpx's bound and transport streams, httpcore's pool and HTTP/1.1 streams);
    if their layout changes this does nothing (a test notices), never fails."""
    stream: Any = response.stream
    for attribute in ("_stream", "_httpcore_stream", "_stream", "_connection"):
        stream = getattr(stream, attribute, None)  # Bound…Stream, …ResponseStream, PoolByteStream, …
    connection = stream
    if isinstance(getattr(connection, "READ_NUM_BYTES", None), int):
        connection.READ_NUM_BYTES = READ_RECV_BYTES


def _build(http: httpx.Client | httpx.AsyncClient, req: Request, timeout: Any = None) -> httpx.Request:
    kw: dict[str, Any] = {"params": req.params or None, "headers": req.headers or None}
    if req.json is not None:
        kw["json"] = req.json
    if req.content is not None:
        kw["content"] = req.content
    if timeout is not None:
        kw["timeout"] = timeout
    return http.build_request(req.method, req.path, **kw)


class _operation(Generic[P, T]):  # lower case: it is used as a decorator
    """A client method running ``fn``'s operation: typed ``(*args) -> T`` on a
    `BrokerClient` and ``(*args) -> Awaitable[T]`` on an `AsyncBrokerClient`, so
    both clients' methods carry the operation's own signature and result type."""

    def __init__(self, fn: Callable[P, ops.Operation[T]]) -> None:
        self.fn = fn
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    @overload
    def __get__(self, client: BrokerClient, owner: type | None = None) -> Callable[P, T]: ...

    @overload
    def __get__(self, client: AsyncBrokerClient, owner: type | None = None) -> Callable[P, Awaitable[T]]: ...

    @overload
    def __get__(self, client: None, owner: type | None = None) -> _operation[P, T]: ...

    def __get__(self, client: Any, owner: type | None = None) -> Any:
        if client is None:
            return self
        fn = self.fn

        @functools.wraps(fn)
        def method(*args: P.args, **kwargs: P.kwargs) -> Any:
            return client._run(fn(*args, **kwargs))

        return method


class _Methods:
    """The broker API, shared by both clients (see the module docstring)."""

    _run: Callable[[ops.Operation[Any]], Any]

    list = _operation(ops.list_journals)
    apply = _operation(ops.apply_changes)
    fragments = _operation(ops.journal_fragments)
    append = _operation(ops.append)
    write_head = _operation(ops.write_head)
    head = _operation(ops.head)
    prune = _operation(ops.prune)
    members = _operation(ops.list_members)

    def __init__(self, address: str = DEFAULT_ADDRESS, timeout_s: float = 30.0,
                 security: ClientSecurity | None = None) -> None:
        self.address = address.rstrip("/")
        self.timeout_s = timeout_s
        self.security = security if security is not None else ClientSecurity.from_env()

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickles as its settings (Spark ships clients' settings to executors).
        return (type(self), (self.address, self.timeout_s, self.security))

    def _stream_timeout(self, block: bool) -> httpx.Timeout:
        """A blocking read or watch may be idle for as long as nothing is written."""
        import httpx

        return httpx.Timeout(self.timeout_s, read=None if block else self.timeout_s)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.address!r})"


class BrokerClient(_Methods):
    """Blocking client of one broker. Thread-safe (httpx.Client is); picklable
    settings only (``address``, ``timeout_s``), so build it where it is used.

        with BrokerClient("http://localhost:8080") as client:
            client.append("example/journal", b'{"Msg": "hi"}\\n')
            for offset, chunk in client.read("example/journal"):
                ...

    Methods raise the typed `HeraldError` the broker sent, or `httpx.TransportError`
    when the broker cannot be reached.
    """

    def __init__(self, address: str = DEFAULT_ADDRESS, timeout_s: float = 30.0,
                 security: ClientSecurity | None = None, plain: bool = False) -> None:
        super().__init__(address, timeout_s, security)
        self.plain = plain
        self._http: httpx.Client | None = None
        self._plain: PlainHTTP | None = None
        http_address = self.address.lower().startswith("http://")
        # Streamed reads of an http:// broker skip httpx's copies (herald.client.plain_read).
        self._reads = PlainReads(self.address, timeout_s, self.security.headers()) \
            if http_address and not proxied() else None
        if plain and http_address:
            self._plain = PlainHTTP(self.address, timeout_s, self.security.headers())
        else:
            self.http  # noqa: B018 - built now, as always: a bad CA or key file fails here

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.address, self.timeout_s, self.security, self.plain))

    @property
    def http(self) -> httpx.Client:
        """The httpx client: for every call, or (``plain``, an ``http://`` address)
        only for streamed reads through a proxy, built at the first. Other streamed
        reads of an ``http://`` broker use `PlainReads`."""
        if self._http is None:
            import httpx

            self._http = httpx.Client(base_url=self.address, timeout=self.timeout_s,
                                      **self.security.httpx_options(self.address))
        return self._http

    def _run(self, op: ops.Operation[Any]) -> Any:
        try:
            req = next(op)
            while True:
                if self._plain is not None:
                    req = op.send(self._plain.send(req))
                    continue
                r = self.http.send(_build(self.http, req))
                req = op.send(Response(r.status_code, r.headers, r.content))
        except StopIteration as done:
            return done.value

    def read(self, journal: str, offset: int = 0, end_offset: int = 0, block: bool = False) -> Reader:
        """An iterator of ``(offset, chunk)`` from ``offset`` (−1 = write head). Without
        ``block`` it ends at the write head; a read with nothing to return raises
        `OffsetNotYetAvailableError`."""
        return Reader(self, journal, offset, end_offset, block)

    def close(self) -> None:
        if self._reads is not None:
            self._reads.close()
        if self._plain is not None:
            self._plain.close()
        if self._http is not None:
            self._http.close()

    def __enter__(self) -> BrokerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncBrokerClient(_Methods):
    """The asyncio twin of `BrokerClient`: the same methods, awaited."""

    def __init__(self, address: str = DEFAULT_ADDRESS, timeout_s: float = 30.0,
                 security: ClientSecurity | None = None) -> None:
        super().__init__(address, timeout_s, security)
        import httpx

        self.http = httpx.AsyncClient(base_url=self.address, timeout=timeout_s,
                                      **self.security.httpx_options(self.address))

    async def _run(self, op: ops.Operation[Any]) -> Any:
        try:
            req = next(op)
            while True:
                r = await self.http.send(_build(self.http, req))
                req = op.send(Response(r.status_code, r.headers, r.content))
        except StopIteration as done:
            return done.value

    def read(self, journal: str, offset: int = 0, end_offset: int = 0, block: bool = False) -> AsyncReader:
        return AsyncReader(self, journal, offset, end_offset, block)

    async def close(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncBrokerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# -- reads ----------------------------------------------------------------------------------


class _ReadState:
    """What a read knows, whatever drives its I/O: the next offset, the last head
    seen, and any offset jump (Content-Range start beyond the asked offset)."""

    def __init__(self, journal: str, offset: int, end_offset: int, block: bool) -> None:
        self.journal, self.offset, self.end_offset, self.block = journal, offset, end_offset, block
        self.head: ReadHead | None = None
        self.jumped: list[tuple[int, int]] = []

    def request(self) -> Request:
        return ops.read_request(self.journal, self.offset, self.block, self.end_offset)

    def on_response(self, status: int, headers: Any, error_body: Callable[[], bytes]) -> None:
        if status != 206:
            ops.raise_for_error(Response(status, headers, error_body()), ok=(206,))
        head = ReadHead.from_headers(headers, self.offset)
        if self.offset >= 0 and head.offset > self.offset:
            log.warning("journal=%s offset jump from %d to %d (pruned or missing content)",
                        self.journal, self.offset, head.offset)
            self.jumped.append((self.offset, head.offset))
        log.debug("read is ready journal=%s offset=%d write_head=%d fragment=%s location=%s",
                  self.journal, head.offset, head.write_head, head.fragment_name, head.fragment_location)
        self.head, self.offset = head, head.offset

    def on_chunk(self, chunk: bytes) -> tuple[int, bytes]:
        at = self.offset
        self.offset += len(chunk)
        return at, chunk

    @property
    def write_head(self) -> int | None:
        return self.head.write_head if self.head else None


class Reader:
    """A streaming read: iterate ``(offset, chunk)``; ``.offset`` is the next offset,
    ``.head`` the read's metadata, ``.jumped`` any offset jumps. Close it (or
    exhaust it) to release the connection. Not restartable: see `RetryReader`."""

    def __init__(self, client: BrokerClient, journal: str, offset: int = 0, end_offset: int = 0,
                 block: bool = False) -> None:
        self._client = client
        self._state = _ReadState(journal, offset, end_offset, block)
        self._response: httpx.Response | StreamedResponse | None = None
        self._chunks: Iterator[tuple[int, bytes]] | None = None

    def __getattr__(self, name: str) -> Any:
        if name in ("journal", "offset", "end_offset", "block", "head", "jumped", "write_head"):
            return getattr(self._state, name)
        raise AttributeError(name)

    def __iter__(self) -> Reader:
        return self

    def __next__(self) -> tuple[int, bytes]:
        if self._chunks is None:
            self._chunks = self._stream()
        return next(self._chunks)

    def open(self) -> ReadHead:
        """Send the read and parse its head (blocks until the broker positions the
        read). Iterating opens implicitly; raises the broker's typed error."""
        if self._response is None:
            resp: httpx.Response | StreamedResponse
            if self._client._reads is not None:
                self._response = resp = self._client._reads.stream(self._state.request(), self._state.block)
            else:
                http = self._client.http
                req = _build(http, self._state.request(), self._client._stream_timeout(self._state.block))
                self._response = resp = http.send(req, stream=True)
                _widen_reads(resp)
            try:
                self._state.on_response(resp.status_code, resp.headers, resp.read)
            except BaseException:
                resp.close()
                raise
        assert self._state.head is not None
        return self._state.head

    def _stream(self) -> Iterator[tuple[int, bytes]]:
        self.open()
        assert self._response is not None
        try:
            for chunk in self._response.iter_raw():
                if chunk:
                    yield self._state.on_chunk(chunk)
        finally:
            self._response.close()

    def close(self) -> None:
        """Release the connection. Safe from another thread: an iteration blocked
        there ends with a transport error."""
        if self._response is not None:
            self._response.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncReader:
    """`Reader` for `AsyncBrokerClient`: ``async for offset, chunk in reader``."""

    def __init__(self, client: AsyncBrokerClient, journal: str, offset: int = 0, end_offset: int = 0,
                 block: bool = False) -> None:
        self._client = client
        self._state = _ReadState(journal, offset, end_offset, block)
        self._response: httpx.Response | None = None

    def __getattr__(self, name: str) -> Any:
        if name in ("journal", "offset", "end_offset", "block", "head", "jumped", "write_head"):
            return getattr(self._state, name)
        raise AttributeError(name)

    async def __aiter__(self) -> AsyncIterator[tuple[int, bytes]]:
        http = self._client.http
        req = _build(http, self._state.request(), self._client._stream_timeout(self._state.block))
        self._response = resp = await http.send(req, stream=True)
        _widen_reads(resp)
        try:
            body = await resp.aread() if resp.status_code != 206 else b""
            self._state.on_response(resp.status_code, resp.headers, lambda: body)
            async for chunk in resp.aiter_raw():
                if chunk:
                    yield self._state.on_chunk(chunk)
        finally:
            await resp.aclose()

    async def aclose(self) -> None:
        if self._response is not None:
            await self._response.aclose()
