"""Zero-copy reads: journal bytes sent from local files with ``sendfile(2)``.

A non-blocking read knows its length before the status line goes out when every
byte of it sits in a local uncompressed file — a spool, or a NONE-codec fragment
persisted to a ``file://`` store. Such a read is answered with a ``Content-Length``
and the kernel copies the files' page cache straight into the socket: no byte
passes through Python. Every other read (blocking, compressed, remote stores, TLS)
streams chunks as before. The headers are the same either way; only the framing
differs (a length instead of chunked transfer-encoding).

The files are opened before the response starts, so a spool persisted and deleted
meanwhile is still read whole through its open descriptor.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from herald.broker.journal import Journal
from herald.fragment.index import Located
from herald.protocol.journal import CompressionCodec

__all__ = ["ChunkedSocketWriter", "ZeroCopyRead", "plan_zero_copy", "send_zero_copy", "supports_zero_copy"]


@dataclass(frozen=True, slots=True)
class FileRange:
    fd: int
    file_offset: int
    count: int


@dataclass(slots=True)
class ZeroCopyRead:
    """The files of one read, opened: ``offset`` is its first byte (past a pruned
    range, as a streamed read would jump), ``size_bytes`` its length. Close it."""

    offset: int
    ranges: list[FileRange] = field(default_factory=list)

    @property
    def size_bytes(self) -> int:
        return sum(r.count for r in self.ranges)

    def close(self) -> None:
        for r in self.ranges:
            os.close(r.fd)
        self.ranges.clear()

    def __enter__(self) -> ZeroCopyRead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def supports_zero_copy(transport: asyncio.BaseTransport | None) -> bool:
    """A plain TCP transport: ``sendfile`` cannot encrypt, so never over TLS."""
    return (transport is not None and not transport.is_closing()
            and transport.get_extra_info("sslcontext") is None
            and transport.get_extra_info("ssl_object") is None
            and transport.get_extra_info("socket") is not None)


def plan_zero_copy(journal: Journal, offset: int, end_offset: int) -> ZeroCopyRead | None:
    """Open the files of a non-blocking read from ``offset`` to ``end_offset`` (0 =
    the write head), or None when any of its bytes is not in a local uncompressed
    file (or a file cannot be opened): the caller streams it instead. Stops where a
    streamed read would — at the write head, or at a jump after the first byte."""
    read: ZeroCopyRead | None = None
    try:
        while not end_offset or offset < end_offset:
            located = journal.locate(offset)
            if located is None or (read is not None and located.offset != offset):
                break
            fd = _open_uncompressed(journal, located)
            if fd is None:
                raise _NotLocal
            if read is None:
                read = ZeroCopyRead(located.offset)
            fragment = located.fragment
            limit = fragment.end if not end_offset else min(end_offset, fragment.end)
            read.ranges.append(FileRange(fd, located.offset - fragment.begin, limit - located.offset))
            if os.fstat(fd).st_size < limit - fragment.begin:
                raise _NotLocal  # shorter than the index says: let the streamed read report it
            offset = limit
    except (_NotLocal, OSError):
        if read is not None:
            read.close()
        return None
    return read


class _NotLocal(Exception):
    pass


def _open_uncompressed(journal: Journal, located: Located) -> int | None:
    fragment = located.fragment
    path = located.local_path
    if path is None and fragment.store and fragment.codec is CompressionCodec.NONE:
        store = next((s for s in journal.stores if s.url == fragment.store), None)
        path = store.local_path(fragment.content_path) if store is not None else None
    if path is None:
        return None
    return os.open(path, os.O_RDONLY)


async def send_zero_copy(transport: asyncio.BaseTransport, read: ZeroCopyRead) -> None:
    """Send ``read``'s ranges on ``transport``'s socket once the transport's own
    buffer (the status line and headers) has gone out. Raises OSError if the peer
    goes away; the caller then closes the connection, since its promised length
    was not met."""
    loop = asyncio.get_running_loop()
    with _socket_of(transport) as out:
        while transport.get_write_buffer_size():  # type: ignore[attr-defined]
            await _writable(loop, out)
        for r in read.ranges:
            await _send_range(loop, out, r)


class ChunkedSocketWriter:
    """Writes a chunked body's chunks straight to the socket with ``os.writev``,
    which drops the GIL while the kernel copies: uvloop's transport holds it for
    the whole copy, and a decoding executor thread then waits on it instead of
    decoding the next chunk (py-spy ``--gil``: 60% of GIL-held samples were
    aiohttp's ``_writelines``). Same bytes on the wire as aiohttp's chunked writer;
    the caller ends the body with its ``write_eof``. Each write first lets the
    transport's own buffer (the headers) go out, and uses a descriptor of its own
    only while it writes: a blocking read idling at the write head holds none."""

    def __init__(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._loop = asyncio.get_running_loop()

    async def write(self, chunk: bytes) -> None:
        if not chunk:
            return
        with _socket_of(self._transport) as out:
            while self._transport.get_write_buffer_size():  # type: ignore[attr-defined]
                await _writable(self._loop, out)
            parts: list = [b"%x\r\n" % len(chunk), memoryview(chunk), b"\r\n"]
            while parts:
                try:
                    sent = os.writev(out, parts)
                except BlockingIOError:
                    await _writable(self._loop, out)
                    continue
                while parts and sent >= len(parts[0]):
                    sent -= len(parts.pop(0))
                if parts and sent:
                    parts[0] = memoryview(parts[0])[sent:]


@contextlib.contextmanager
def _socket_of(transport: asyncio.BaseTransport) -> Iterator[int]:
    """A dup of the transport's socket descriptor, closed on exit: should the
    transport close its own meanwhile, the number cannot be reused under us for
    another connection."""
    sock = None if transport.is_closing() else transport.get_extra_info("socket")
    if sock is None:
        raise ConnectionResetError("the connection is closed")
    out = os.dup(sock.fileno())
    try:
        yield out
    finally:
        os.close(out)


async def _send_range(loop: asyncio.AbstractEventLoop, out: int, r: FileRange) -> None:
    offset, count = r.file_offset, r.count
    while count:
        try:
            sent = os.sendfile(out, r.fd, offset, count)
        except BlockingIOError:
            await _writable(loop, out)
            continue
        if not sent:
            raise OSError(f"file ended {count} bytes early")
        offset += sent
        count -= sent


async def _writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_writer(fd, wake)
    try:
        await ready
    finally:
        with contextlib.suppress(OSError, ValueError):
            loop.remove_writer(fd)
