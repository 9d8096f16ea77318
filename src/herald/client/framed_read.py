"""Decoding a read answered in stored framed SNAPPY (`herald.broker.encoded_read`),
two segments at once.

Why threads: once the broker sends the stored chunks, the client's decode is the
read's critical path (0.6-0.7 ms of CPU per MiB, where receiving the compressed
bytes is ~0.1), and the broker is nearly idle. cramjam and ``crc32c`` release
the GIL while they work, so a second thread decodes the next segment while this
one decodes its own and the receiving thread reads on: the broker did the same
on two cores when it decoded. Small reads (under `THREADED_BYTES`) decode
inline, sparing a pool's start.

    >>> for chunk in decoded_content(pieces, begin=0, lo=10, hi=100):
    ...     ...

Blocks on the ``pieces`` iterator and on CPU; raises `CodecError` on a corrupt
or truncated body.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from herald.fragment.coder import CodecError
from herald.fragment.snappy_framed import complete_chunks, decode_chunks_into

__all__ = ["DECODE_THREADS", "THREADED_BYTES", "decoded_content"]

DECODE_THREADS = 2
THREADED_BYTES = 8 << 20
"""Reads of at least this much content decode on `DECODE_THREADS` threads: a
pool's start (~0.1-0.2 ms) is noise beside their decode."""


def decoded_content(pieces: Iterator[bytes], begin: int, lo: int, hi: int) -> Iterator[bytearray]:
    """The content in ``[lo, hi)`` of a framed-snappy body read as ``pieces``,
    whose decoded bytes start at offset ``begin``; each a fresh bytearray, in
    order, the caller's to keep. Decoded ahead by up to `DECODE_THREADS` segments."""
    units = _whole_chunks(pieces)
    if hi - lo < THREADED_BYTES:
        yield from _trimmed((_decode(data, size) for data, size in units), begin, lo, hi)
        return
    with ThreadPoolExecutor(DECODE_THREADS, thread_name_prefix="herald-read-decode") as pool:
        yield from _trimmed(_ahead(pool, units), begin, lo, hi)


def _ahead(pool: ThreadPoolExecutor, units: Iterator[tuple[memoryview, int]]) -> Iterator[bytearray]:
    pending: collections.deque[Future[bytearray]] = collections.deque()
    try:
        for data, size in units:
            pending.append(pool.submit(_decode, data, size))
            if len(pending) > DECODE_THREADS:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()


def _trimmed(outs: Iterator[bytearray], at: int, lo: int, hi: int) -> Iterator[bytearray]:
    for out in outs:
        start, stop = max(lo - at, 0), min(hi - at, len(out))
        at += len(out)
        if start < stop:
            yield out if (start, stop) == (0, len(out)) else out[start:stop]


def _whole_chunks(pieces: Iterator[bytes]) -> Iterator[tuple[memoryview, int]]:
    """Runs of whole chunks (views of the pieces) and their decoded size. A chunk
    split between pieces (a body with a length arrives in pieces of any size) is
    completed from the next piece's start into a small buffer of its own: the
    pieces themselves are never copied."""
    carry, seen = bytearray(), False
    for piece in pieces:
        view = memoryview(piece).cast("B")
        pos = 0
        if carry:
            pos = _complete(carry, view)
            if not _is_whole(carry):
                continue
            _, size, seen = complete_chunks(carry, 0, seen)
            yield memoryview(carry), size
            carry = bytearray()  # the one yielded may still be decoding
        end, size, seen = complete_chunks(view, pos, seen)
        if end > pos:
            yield view[pos:end], size
        carry += view[end:]
    if carry:
        raise CodecError(f"SNAPPY: input ended inside a chunk ({len(carry)} bytes left)")


def _complete(carry: bytearray, view: memoryview) -> int:
    """Append to ``carry`` (the start of one chunk) from ``view`` until it holds the
    whole chunk or ``view`` is used up; the bytes of ``view`` taken."""
    pos = 0
    while not _is_whole(carry) and pos < len(view):
        need = 4 - len(carry) if len(carry) < 4 else 4 + int.from_bytes(carry[1:4], "little") - len(carry)
        carry += view[pos:pos + need]
        pos += min(need, len(view) - pos)
    return pos


def _is_whole(carry: bytearray) -> bool:
    return len(carry) >= 4 and len(carry) == 4 + int.from_bytes(carry[1:4], "little")


def _decode(data: memoryview, size: int) -> bytearray:
    out = bytearray(size)
    decode_chunks_into(data, memoryview(out))
    return out
