"""Decoding a persisted fragment for a read, ahead of the socket and on two cores.

A read of a SNAPPY or ZSTANDARD fragment cuts the stored file into segments
(`herald.fragment.segments`) and decodes up to `DECODES_IN_FLIGHT` of them at
once in the executor, while the event loop sends the ones already decoded:
cramjam drops the GIL while it decodes, so decoding overlaps both sending and the
next segment's decode (py-spy on the broker: one decoding thread at a time was
the read's ceiling). Segments wholly before the read's offset are skipped
undecoded. Other codecs (GZIP, NONE from a remote store) cannot be cut without
decoding; `herald.broker.read` streams them one chunk at a time.

Every executor job touches its own objects only, except the file being cut,
which one job at a time reads (each cut is awaited before the next starts); it is
closed once no job uses it.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Callable
from typing import Any, BinaryIO

from herald.fragment.segments import Segment, is_segmentable, segments
from herald.protocol.fragment import Fragment

__all__ = ["DECODES_IN_FLIGHT", "DecodeBuffers", "decoded_chunks"]

DECODES_IN_FLIGHT = 3
"""Segments decoding or decoded but not yet sent, per read (about 3 MiB each): two
to keep two cores busy, one more so the socket never waits for a decode."""


class DecodeBuffers:
    """Output buffers recycled between the segments of one read. A fresh buffer per
    segment cost a quarter of the decode's CPU (zero-filling, then faulting its
    pages in: perf on the broker). The writer hands a chunk back with
    `give_back` once its bytes are in the kernel — only a writer that copies
    before returning may (`herald.broker.zerocopy.ChunkedSocketWriter`); with any
    other, chunks are never handed back and every segment gets a new buffer."""

    def __init__(self) -> None:
        self._free: list[bytearray] = []
        self._lent: dict[int, bytearray] = {}

    def take(self, size: int) -> memoryview:
        """A writable view of exactly ``size`` bytes, recycled when one is free."""
        buf = next((b for b in self._free if len(b) >= size), None)
        if buf is None:
            buf = bytearray(size)
        else:
            self._free.remove(buf)
        self._lent[id(buf)] = buf
        return memoryview(buf)[:size]

    def give_back(self, chunk: Any) -> None:
        """``chunk`` (or the buffer it views) is no longer used by anyone: reuse it.
        Chunks not from `take` are ignored."""
        buf = self._lent.pop(id(chunk.obj if isinstance(chunk, memoryview) else chunk), None)
        if buf is not None and len(self._free) <= DECODES_IN_FLIGHT:
            self._free.append(buf)


async def decoded_chunks(open_file: Callable[[], BinaryIO], fragment: Fragment,
                         offset: int, limit: int, buffers: DecodeBuffers | None = None) -> AsyncIterator[bytes]:
    """The content of a SNAPPY or ZSTANDARD ``fragment`` (`is_segmentable`) in
    ``[offset, limit)`` (journal offsets), as bytes-like chunks the caller may keep;
    ``open_file`` opens its stored bytes and runs in the executor; chunks come
    from ``buffers`` when given. Raises OSError from the store, `CodecError` on
    bad data."""
    assert is_segmentable(fragment.codec)
    buffers = buffers or DecodeBuffers()
    loop = asyncio.get_running_loop()
    file = await loop.run_in_executor(None, open_file)
    inputs = DecodeBuffers()  # the compressed input, read in place; back once decoded
    cuts = segments(file, fragment.codec, take=inputs.take)
    lo, hi = offset - fragment.begin, limit - fragment.begin
    in_flight: collections.deque[tuple[int, asyncio.Future, Segment]] = collections.deque()
    cutting: asyncio.Future | None = None
    pos, cut_all = 0, False
    try:
        while True:
            while not cut_all and len(in_flight) < DECODES_IN_FLIGHT and pos < hi:
                cutting = loop.run_in_executor(None, next, cuts, None)
                segment = await asyncio.shield(cutting)  # cancelled, it still runs: close after
                if segment is None:
                    cut_all = True
                elif segment.size is None:  # its end is known only once decoded
                    decoded = loop.run_in_executor(None, segment.decode)
                    in_flight.append((pos, decoded, segment))
                    pos += len(await decoded)
                elif pos + segment.size <= lo:
                    pos += segment.size  # wholly before the read's offset: never decoded
                    inputs.give_back(segment.data)
                else:
                    out = buffers.take(segment.size)
                    in_flight.append((pos, loop.run_in_executor(None, _decode_into, segment, out), segment))
                    pos += segment.size
            if not in_flight:
                return
            begin, decoded, segment = in_flight.popleft()
            chunk = await decoded
            inputs.give_back(segment.data)  # decoded: no thread reads it any more
            if (piece := _slice(chunk, begin, lo, hi)) is not None:
                yield piece
    finally:
        for _, decoded, _ in in_flight:
            decoded.cancel()
        _close_after(loop, file, cutting)


def _decode_into(segment: Segment, out: memoryview) -> memoryview:
    segment.decode_into(out)
    return out


def _slice(chunk: Any, begin: int, lo: int, hi: int) -> Any:
    """The part of ``chunk`` (at fragment offset ``begin``) in ``[lo, hi)``: the
    chunk itself when wholly inside, a view when cut (never a copy), else None."""
    start, stop = max(lo - begin, 0), min(hi - begin, len(chunk))
    if start >= stop:
        return None
    if start == 0 and stop == len(chunk):
        return chunk
    return memoryview(chunk)[start:stop]


def _close_after(loop: asyncio.AbstractEventLoop, file: BinaryIO, cutting: asyncio.Future | None) -> None:
    """Close ``file`` in the executor once the cut reading it (if any) is over."""
    if cutting is None or cutting.done():
        loop.run_in_executor(None, file.close)
    else:
        cutting.add_done_callback(lambda _: loop.run_in_executor(None, file.close))
