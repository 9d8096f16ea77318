"""Streaming a journal's committed bytes to a reader, from spool files or stores.

A read walks the journal's fragments from an offset: local spool files are read
with ``pread`` up to their committed end; persisted fragments are fetched from
their store and decompressed chunk by chunk in an executor. At the write head a
blocking read waits for the next group commit; a non-blocking one ends. Readers
never see uncommitted bytes because the write head only moves after fsync
[I-APPEND-3].
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from typing import BinaryIO

from herald.broker.fragment_decode import DecodeBuffers, decoded_chunks
from herald.broker.journal import Journal
from herald.broker.read_holes import HOLE_RETRY_S, locate_or_list
from herald.fragment.codecs import decompressing_reader
from herald.fragment.fdpool import retry_out_of_descriptors
from herald.fragment.index import Located
from herald.fragment.segments import is_segmentable
from herald.fragment.stores import Store

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
READ_AHEAD_CHUNKS = 3
WARN_EVERY_S = 10.0
NEXT_FRAGMENT_AHEAD_BYTES = 8 << 20
"""How near a fragment's end a read starts decoding the next persisted fragment
(`_NextFragment`): about the segments still in flight at the end of one."""


class StoreTroubleLog:
    """Warn of failing fragment reads at most once per journal every ``WARN_EVERY_S``,
    with how many failed since: a reader retrying a missing fragment must not turn
    into thousands of log lines a second."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, int]] = {}

    def warn(self, journal: Journal, offset: int, err: OSError) -> None:
        now = time.monotonic()
        name = journal.spec.name
        last_s, count = self._last.get(name, (float("-inf"), 0))
        if now - last_s < WARN_EVERY_S:
            self._last[name] = (last_s, count + 1)
            return
        self._last[name] = (now, 0)
        suffix = f" ({count} more since the last warning)" if count else ""
        log.warning("read failed: fragment store error: %s%s", err, suffix, extra={"journal": name, "offset": offset})


async def stream(journal: Journal, offset: int, block: bool, end_offset: int,
                 stopping: asyncio.Event, buffers: DecodeBuffers | None = None) -> AsyncIterator[tuple[int, bytes]]:
    """Yield ``(offset, chunk)`` from ``offset`` until ``end_offset`` (0 = unbounded).
    Decoded chunks come from ``buffers`` (see `DecodeBuffers` for handing them back).

    Without ``block`` the stream ends at the write head. With it, it waits for more
    until the broker stops; in a hole below the write head (a replica that rolled
    forward) the stores are listed first. Offsets jump forward over pruned ranges — but only
    before the first chunk: a jump after bytes were sent ends the stream, so the
    reader reopens and sees the jump in the response's headers.
    """
    sent = False
    ahead: _NextFragment | None = None
    try:
        while not end_offset or offset < end_offset:
            located = await locate_or_list(journal, offset)
            if located is None:
                if not block or stopping.is_set():
                    return  # the reader reopens here: at a hole, the gateway proxies or answers 503
                # In a hole below the head, list again now and then: what fills it is a
                # peer's upload, which no commit here announces.
                await _wait_for_commit_or_stop(journal, stopping, HOLE_RETRY_S if offset < journal.write_head else None)
                continue
            if sent and located.offset != offset:
                return
            offset, sent = located.offset, True
            limit = located.fragment.end if not end_offset else min(end_offset, located.fragment.end)
            chunks = ahead.chunks() if ahead is not None and ahead.matches(located, limit) else None
            if ahead is not None and chunks is None:
                await ahead.discard()
            ahead, looked_ahead = None, False
            async for chunk in chunks or _fragment_chunks(journal, located, limit, buffers):
                yield offset, chunk
                offset += len(chunk)
                if not looked_ahead and limit - offset <= NEXT_FRAGMENT_AHEAD_BYTES:
                    looked_ahead = True  # once per fragment: a spool's tail has no next one to find
                    ahead = _NextFragment.start(journal, limit, end_offset, buffers)
    finally:
        if ahead is not None:
            await ahead.discard()


async def _wait_for_commit_or_stop(journal: Journal, stopping: asyncio.Event,
                                   timeout_s: float | None = None) -> None:
    commit = asyncio.ensure_future(journal.wait_for_commit())
    stop = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({commit, stop}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        commit.cancel()
        stop.cancel()


async def _fragment_chunks(journal: Journal, located: Located, limit: int,
                           buffers: DecodeBuffers | None) -> AsyncGenerator[bytes, None]:
    if located.local_path is not None:
        try:
            fd = retry_out_of_descriptors("reading a spool",
                                          lambda: os.open(located.local_path, os.O_RDONLY))
        except FileNotFoundError:
            pass  # persisted and deleted meanwhile: read it from its store below.
        else:
            try:
                pos = located.offset
                while pos < limit:
                    chunk = os.pread(fd, min(CHUNK_BYTES, limit - pos), pos - located.fragment.begin)
                    if not chunk:
                        return
                    pos += len(chunk)
                    yield chunk
                return
            finally:
                os.close(fd)
    relocated = journal.locate(located.offset)
    if relocated is None:
        return
    fragment = relocated.fragment
    store = _store_of(journal, fragment.store)
    if is_segmentable(fragment.codec):
        async for chunk in decoded_chunks(_opener(store, fragment), fragment, located.offset, limit, buffers):
            yield chunk
        return
    loop = asyncio.get_running_loop()
    chunks = _remote_chunks(store, fragment, located.offset, limit)
    ahead = _ReadAhead(loop, chunks, READ_AHEAD_CHUNKS)
    try:
        while (chunk := await ahead.get()) is not None:
            yield chunk
    finally:
        ahead.close()


class _ReadAhead:
    """Decodes up to ``depth`` chunks of ``chunks`` ahead of the writer, one
    ``next`` per executor hop (so no executor thread is held while a slow reader
    drains): with only one ahead, the decoder idled whenever the socket was full.
    Runs in the event loop; ``close`` closes ``chunks`` (its store file) in the
    executor once no ``next`` is running there."""

    def __init__(self, loop: asyncio.AbstractEventLoop, chunks: Iterator[bytes], depth: int) -> None:
        self._loop, self._chunks, self._depth = loop, chunks, depth
        self._ready: collections.deque[bytes] = collections.deque()
        self._pending: asyncio.Future | None = None
        self._waiter: asyncio.Future | None = None
        self._error: BaseException | None = None
        self._done = self._closed = False

    async def get(self) -> bytes | None:
        """The next chunk, None at the end; raises what decoding raised."""
        self._fill()
        while not self._ready and not self._done:
            self._waiter = self._loop.create_future()
            await self._waiter
        if self._ready:
            chunk = self._ready.popleft()
            self._fill()
            return chunk
        if self._error is not None:
            raise self._error
        return None

    def close(self) -> None:
        self._closed = True
        if self._pending is None:
            self._loop.run_in_executor(None, self._chunks.close)

    def _fill(self) -> None:
        if self._pending is None and not self._done and not self._closed and len(self._ready) < self._depth:
            self._pending = self._loop.run_in_executor(None, next, self._chunks, None)
            self._pending.add_done_callback(self._landed)

    def _landed(self, done: asyncio.Future) -> None:
        self._pending = None
        if done.cancelled() or done.exception() is not None:
            self._error = None if done.cancelled() else done.exception()
            self._done = True
        elif (chunk := done.result()) is None:
            self._done = True
        else:
            self._ready.append(chunk)
        if self._closed:
            self._loop.run_in_executor(None, self._chunks.close)
            return
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        self._fill()


class _NextFragment:
    """The next persisted SNAPPY or ZSTANDARD fragment of a read, its first chunk
    decoding while the current fragment's last ones are sent. Started afresh, a
    fragment's first chunk waits on an open, a cut and a decode in turn: the gap
    between the last chunk of one 64 MiB fragment and the first of the next was
    2.8× the gap between chunks (9.7 vs 3.5 ms median, broker under load), about
    6% of a read's time in which the socket idled. Used only if the read's next
    located fragment is this one; else discarded (its file closed)."""

    def __init__(self, located: Located, limit: int, chunks: AsyncGenerator[bytes, None]) -> None:
        self._located, self._limit, self._chunks = located, limit, chunks
        self._first = asyncio.ensure_future(_first_of(chunks))

    @classmethod
    def start(cls, journal: Journal, offset: int, end_offset: int,
              buffers: DecodeBuffers | None) -> _NextFragment | None:
        """Start on the fragment at ``offset`` if it is persisted, segmentable and
        wanted (before ``end_offset``); else None."""
        located = None if end_offset and offset >= end_offset else journal.locate(offset)
        if (located is None or located.offset != offset or located.local_path is not None
                or not located.fragment.store or not is_segmentable(located.fragment.codec)):
            return None
        limit = located.fragment.end if not end_offset else min(end_offset, located.fragment.end)
        return cls(located, limit, _fragment_chunks(journal, located, limit, buffers))

    def matches(self, located: Located, limit: int) -> bool:
        return (located.offset, located.fragment, limit) == (self._located.offset, self._located.fragment, self._limit)

    async def chunks(self) -> AsyncIterator[bytes]:
        """Every chunk, the first one included; raises what reading raised."""
        if (first := await self._first) is None:
            return
        yield first
        async for chunk in self._chunks:
            yield chunk

    async def discard(self) -> None:
        """Stop decoding (if still at the first chunk) and close the file."""
        self._first.cancel()
        await asyncio.wait([self._first])
        if not self._first.cancelled():
            self._first.exception()  # retrieved: a store error here is no one's to report
        await self._chunks.aclose()


async def _first_of(chunks: AsyncIterator[bytes]) -> bytes | None:
    return await anext(chunks, None)


def _store_of(journal: Journal, url: str) -> Store:
    for store in journal.stores:
        if store.url == url:
            return store
    raise FileNotFoundError(f"store {url} is no longer configured for {journal.spec.name}")


def _opener(store: Store, fragment) -> Callable[[], BinaryIO]:
    """Opens the stored file: unbuffered when the store is a local directory, so
    each read is one ``read(2)`` into the caller's bytes with no buffer between."""
    path = store.local_path(fragment.content_path)
    if path is None:
        return lambda: store.open(fragment.content_path)
    return lambda: open(path, "rb", buffering=0)


def _remote_chunks(store: Store, fragment, offset: int, limit: int) -> Iterator[bytes]:
    """Decompressed bytes of ``fragment`` in ``[offset, limit)`` (runs in an executor,
    one ``next`` at a time). Chunks are yielded whole, or as views when the range
    cuts them: never copied."""
    pos = fragment.begin
    with store.open(fragment.content_path) as f:
        for chunk in decompressing_reader(f, fragment.codec):
            lo, hi = max(offset - pos, 0), min(limit - pos, len(chunk))
            pos += len(chunk)
            if lo == 0 and hi == len(chunk):
                yield chunk
            elif hi > lo:
                yield memoryview(chunk)[lo:hi]  # type: ignore[misc]  # bytes-like
            if pos >= limit:
                return
