"""Reads answered in the fragments' own framed SNAPPY, for a client that decodes it.

Why: through the broker, a SNAPPY read cost the broker ~1.0-1.2 ms of CPU per MiB
of content and the client ~0.2-0.3, where reading and decoding the files directly
costs ~0.65. The decode is the same either way; the rest is moving the decoded
bytes over a socket: a bare loopback socket pair alone costs 0.19 ms/MiB to send
and 0.23-0.25 to receive, and the broker's event loop spent 0.4-0.5 ms/MiB on its
writes (perf: two thirds of it ``tcp_sendmsg``). A client that asks with
``Accept-Encoding: x-snappy-framed`` (`herald.client.plain_read`) gets the stored
chunks instead: a third of the bytes cross the socket, the broker decodes nothing,
and the client checks every chunk's CRC-32C as it decodes.

What is sent: a non-blocking read held whole in persisted SNAPPY fragments in local
(``file://``) stores (as `herald.broker.zerocopy` answers one held whole in local
uncompressed files): the chunks from the one holding the read's offset to the one
holding its last byte (cut without decoding: `herald.fragment.segments`, then
`chunks_covering` in the first and last segment), behind a stream identifier. The
read's headers are the usual ones (Content-Range starts at the read's offset,
jumps included), plus ``Content-Encoding``,
``X-Encoded-Begin`` (the journal offset of the body's first decoded byte, at or
before the read's offset) and ``X-Encoded-End`` (where the read's content ends:
the client drops what decodes before the offset or from the end on). A read that
runs into a spool, another codec or a remote store is answered decoded, as before;
wrapping those bytes in uncompressed chunks would extend this to them.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import BinaryIO

from herald.broker.fragment_decode import DecodeBuffers
from herald.broker.journal import Journal
from herald.fragment.index import Located
from herald.fragment.segments import Segment, segments
from herald.fragment.snappy_framed import chunks_covering
from herald.protocol.fragment import Fragment
from herald.protocol.journal import CompressionCodec

__all__ = ["ENCODED_BEGIN_HEADER", "ENCODED_END_HEADER", "SNAPPY_FRAMED", "EncodedPart", "accepts_snappy_framed",
           "encoded_segments", "plan_encoded"]

SNAPPY_FRAMED = "x-snappy-framed"
ENCODED_BEGIN_HEADER = "X-Encoded-Begin"
ENCODED_END_HEADER = "X-Encoded-End"


@dataclass(frozen=True, slots=True)
class EncodedPart:
    """``[lo, hi)`` (journal offsets) of ``fragment``, stored at ``path``."""

    path: str
    fragment: Fragment
    lo: int
    hi: int


def accepts_snappy_framed(accept_encoding: str) -> bool:
    """Whether an ``Accept-Encoding`` value names `SNAPPY_FRAMED` (without ``q=0``)."""
    for item in accept_encoding.split(","):
        name, _, params = item.strip().partition(";")
        if name.strip().lower() == SNAPPY_FRAMED:
            return params.replace(" ", "") not in ("q=0", "q=0.0")
    return False


def plan_encoded(journal: Journal, offset: int, end_offset: int) -> list[EncodedPart]:
    """The persisted SNAPPY fragments in local stores that hold a non-blocking read
    from ``offset`` (past a pruned range, as a streamed read jumps) to ``end_offset``
    (0: the write head); empty unless every byte of it is in one, as a decoded
    answer holds every byte of the read (a `Reader` does not reopen)."""
    target = journal.write_head if not end_offset else min(end_offset, journal.write_head)
    parts: list[EncodedPart] = []
    while offset < target:
        located = journal.locate(offset)
        if located is None or (parts and located.offset != offset):
            return []
        path = _local_snappy_path(journal, located)
        if path is None:
            return []
        fragment = located.fragment
        hi = min(target, fragment.end)
        parts.append(EncodedPart(path, fragment, located.offset, hi))
        offset = hi
    return parts


def _local_snappy_path(journal: Journal, located: Located) -> str | None:
    fragment = located.fragment
    if located.local_path is not None or not fragment.store or fragment.codec is not CompressionCodec.SNAPPY:
        return None
    store = next((s for s in journal.stores if s.url == fragment.store), None)
    path = store.local_path(fragment.content_path) if store is not None else None
    return path if path is not None and os.path.isfile(path) else None


async def encoded_segments(parts: list[EncodedPart],
                           buffers: DecodeBuffers) -> AsyncGenerator[tuple[int, memoryview], None]:
    """``(begin, data)`` for each segment of ``parts`` that holds content of theirs:
    ``data`` its whole chunks that do (a view of a buffer from ``buffers``: give it
    back once sent), ``begin`` the journal offset their content starts at. The files are read in the executor,
    one segment ahead of the caller. Raises OSError from the store, `CodecError` on
    a malformed file or one shorter than its fragment."""
    loop = asyncio.get_running_loop()
    for part in parts:
        file = await loop.run_in_executor(None, _opener(part.path))
        cuts = segments(file, CompressionCodec.SNAPPY, take=buffers.take)
        pos = part.fragment.begin
        ahead: asyncio.Future[Segment | None] | None = loop.run_in_executor(None, next, cuts, None)
        try:
            while ahead is not None:
                segment = await ahead
                if segment is None or segment.size is None:
                    raise OSError(f"{part.path} ends before its fragment's end {part.fragment.end}")
                ahead = loop.run_in_executor(None, next, cuts, None) if pos + segment.size < part.hi else None
                if pos + segment.size > part.lo:
                    yield _covering(segment, pos, part)
                else:
                    buffers.give_back(segment.data)
                pos += segment.size
        finally:
            await _close_after(loop, file, ahead)


def _covering(segment: Segment, pos: int, part: EncodedPart) -> tuple[int, memoryview]:
    """The chunks of ``segment`` (content from ``pos``) that hold content of ``part``,
    and where their content starts: a view, never a copy."""
    data = memoryview(segment.data)
    assert segment.size is not None
    lo, hi = max(part.lo - pos, 0), min(part.hi - pos, segment.size)
    if lo == 0 and hi == segment.size:
        return pos, data
    start, stop, begin = chunks_covering(data, lo, hi)
    return pos + begin, data[start:stop]


def _opener(path: str) -> Callable[[], BinaryIO]:
    return lambda: open(path, "rb", buffering=0)


async def _close_after(loop: asyncio.AbstractEventLoop, file: BinaryIO,
                       cutting: asyncio.Future[Segment | None] | None) -> None:
    """Close ``file`` in the executor once a cut still reading it (if any) is over."""
    if cutting is not None:
        await asyncio.wait([cutting])
        if not cutting.cancelled():
            cutting.exception()  # retrieved: the read already ended another way
    await loop.run_in_executor(None, file.close)
