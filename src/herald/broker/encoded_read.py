"""Reads answered in the fragments' own framed SNAPPY, for a client that decodes it.

Why: through the broker, a SNAPPY read cost the broker ~1.0-1.3 ms of CPU per MiB
of content and the client ~0.2-0.3, where reading and decoding the files directly
costs ~0.65. The decode is the same either way; the rest is moving the decoded
bytes over a socket: a bare loopback socket pair alone costs 0.19 ms/MiB to send
and 0.23-0.25 to receive, and the broker's event loop spent 0.4-0.5 ms/MiB on its
writes (perf: two thirds of it ``tcp_sendmsg``). A client that asks with
``Accept-Encoding: x-snappy-framed`` (`herald.client.plain_read`) gets the stored
chunks instead: under half the bytes cross the socket, by ``sendfile`` (no byte
through Python, as `herald.broker.zerocopy` sends uncompressed files), the broker
decodes nothing, and the client checks every chunk's CRC-32C as it decodes.

What is sent: a non-blocking read held whole in persisted SNAPPY fragments in local
(``file://``) stores, over plain TCP: a stream identifier, then the bytes of each
fragment file from the chunk holding the read's first byte in it to the chunk
holding its last (found by walking the chunks' heads; a whole fragment is its
whole file), with a ``Content-Length``. The read's headers are the usual ones
(Content-Range starts at the read's offset, jumps included), plus
``Content-Encoding``, ``X-Encoded-Begin`` (the journal offset of the body's first
decoded byte, at or before the read's offset) and ``X-Encoded-End`` (where the
read's content ends): the client drops what decodes outside. A read that runs
into a spool, another codec or a remote store is answered decoded, as before;
wrapping those bytes in uncompressed chunks would extend this to them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from herald.broker.journal import Journal
from herald.broker.zerocopy import FileRange, ZeroCopyRead
from herald.fragment.coder import CodecError
from herald.fragment.index import Located
from herald.fragment.snappy_framed import chunk_extent
from herald.protocol.fragment import Fragment
from herald.protocol.journal import CompressionCodec

__all__ = ["ENCODED_BEGIN_HEADER", "ENCODED_END_HEADER", "SNAPPY_FRAMED", "EncodedPart", "accepts_snappy_framed",
           "open_encoded", "plan_encoded"]

SNAPPY_FRAMED = "x-snappy-framed"
ENCODED_BEGIN_HEADER = "X-Encoded-Begin"
ENCODED_END_HEADER = "X-Encoded-End"
_HEAD_BYTES = 13  # a chunk's head, its CRC and a raw block's length varint


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


def open_encoded(parts: list[EncodedPart]) -> tuple[ZeroCopyRead, int]:
    """Open ``parts``' files and find the byte ranges of the chunks holding their
    content: a `ZeroCopyRead` of them (close it) and the journal offset where their
    content starts. Blocks on the files (run it in the executor); raises OSError
    or `CodecError` (a file shorter than its fragment, or not framed snappy)."""
    read = ZeroCopyRead(parts[0].lo)
    begin = parts[0].lo
    try:
        for i, part in enumerate(parts):
            fd = os.open(part.path, os.O_RDONLY)
            read.ranges.append(FileRange(fd, 0, 0))
            start, stop, at = _chunk_range(fd, part.fragment, part.lo, part.hi)
            read.ranges[-1] = FileRange(fd, start, stop - start)
            if i == 0:
                begin = part.fragment.begin + at
    except BaseException:
        read.close()
        raise
    return read, begin


def _chunk_range(fd: int, fragment: Fragment, lo: int, hi: int) -> tuple[int, int, int]:
    """The bytes ``[start, stop)`` of the file's chunks whose content overlaps the
    journal range ``[lo, hi)``, and where the first one's content starts in the
    fragment. A whole fragment is its whole file; otherwise the chunks are walked
    by their heads (``pread`` of a few bytes each, ~1,000 for 64 MiB of NDJSON)."""
    lo, hi, content = lo - fragment.begin, hi - fragment.begin, fragment.end - fragment.begin
    file_bytes = os.fstat(fd).st_size
    start: int | None = 0 if lo == 0 else None
    stop: int | None = file_bytes if hi >= content else None
    pos = at = begin = 0
    while start is None or stop is None:
        head = os.pread(fd, _HEAD_BYTES, pos)
        if len(head) < 4:
            raise CodecError(f"SNAPPY: {len(head)} bytes at {pos} of a fragment file, not a chunk head")
        length, size = chunk_extent(head)
        if start is None and size and at + size > lo:
            start, begin = pos, at
        at, pos = at + size, pos + length
        if stop is None and at >= hi:
            stop = pos
    return start, stop, begin
