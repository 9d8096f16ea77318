"""Cutting a SNAPPY or ZSTANDARD fragment file into segments that decode on their
own, so a reader can decode several at once and skip those before its offset.

A framed-snappy stream is a run of independent chunks (each ≤ 64 KiB of content,
its size in a length varint), and our zstd fragments are independent frames (each
declaring its content size): both can be cut between units without decoding, and
each cut piece decoded by another thread — cramjam releases the GIL while it
decodes, so a broker streaming one fragment uses two cores instead of one. Knowing
each segment's decoded size up front also lets a read that starts mid-fragment
skip the segments before its offset undecoded, and lets the decode write straight
into a buffer of the exact size (no zero-filled scratch, no second copy).

    >>> for segment in segments(open(path, "rb"), CompressionCodec.SNAPPY):
    ...     content = segment.decode()

Cutting blocks on the file's reads (run it in an executor); `Segment.decode`
blocks on CPU without the GIL. GZIP has no such boundaries without decoding:
callers keep using `herald.fragment.codecs.decompressing_reader` for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import cramjam

from herald.fragment.coder import CodecError
from herald.fragment.snappy_framed import complete_chunks, decode_chunks_into
from herald.fragment.zstd_frames import ZstdFrameScanner
from herald.protocol.journal import CompressionCodec

__all__ = ["SEGMENT_INPUT_BYTES", "Segment", "is_segmentable", "segments"]

SEGMENT_INPUT_BYTES = 1 << 20
"""Compressed bytes read per segment (about 3 MiB of NDJSON content): large enough
that per-segment Python and thread hand-off cost is noise, small enough that a few
in flight stay a few MiB."""
_CARRY_ROOM = 1 << 17  # a whole snappy chunk (64 KiB of content) and then some


@dataclass(frozen=True, slots=True)
class Segment:
    """Whole compressed units of one fragment, decodable alone. ``size`` is the
    decoded length, or None when a zstd frame does not declare it."""

    codec: CompressionCodec
    data: bytes | memoryview
    size: int | None

    def decode(self) -> bytearray | bytes:
        """The decoded content (checked against ``size``) in a new buffer."""
        if self.size is None:
            try:
                return bytes(cramjam.zstd.decompress(self.data))
            except cramjam.DecompressionError as err:
                raise CodecError(f"{self.codec.name}: corrupt input: {err}") from err
        out = bytearray(self.size)
        self.decode_into(out)
        return out

    def decode_into(self, out: bytearray | memoryview) -> None:
        """Decode into ``out``, exactly ``size`` bytes long (a recycled buffer spares
        zero-filling and faulting in fresh pages: a quarter of the decode's CPU).
        Raises `CodecError` if the data is corrupt or holds another size."""
        assert self.size is not None and len(out) == self.size
        if self.codec is CompressionCodec.SNAPPY:
            with memoryview(self.data) as data, memoryview(out) as into:
                decode_chunks_into(data, into)
            return
        try:
            written = cramjam.zstd.decompress_into(self.data, out) if self.size else 0
        except cramjam.DecompressionError as err:
            raise CodecError(f"{self.codec.name}: corrupt input: {err}") from err
        if written != self.size:
            raise CodecError(f"{self.codec.name}: a segment held {written} bytes, not the {self.size} it declared")


def is_segmentable(codec: CompressionCodec) -> bool:
    return codec in (CompressionCodec.SNAPPY, CompressionCodec.ZSTANDARD)


def segments(src: BinaryIO, codec: CompressionCodec, input_bytes: int = SEGMENT_INPUT_BYTES,
             take: Callable[[int], memoryview] | None = None) -> Iterator[Segment]:
    """The segments of the compressed file ``src``, in order, each holding at
    least one whole unit. Raises `CodecError` on a malformed or truncated file.

    SNAPPY files are read straight into buffers from ``take`` (a writable view of
    exactly the size asked; fresh ones by default) and each segment's ``data`` is a
    view of one: no copy of the compressed input. The caller may recycle a
    segment's buffer once it is done with ``data`` (and never before)."""
    if codec is CompressionCodec.SNAPPY:
        return _snappy_segments(src, input_bytes, take or _fresh)
    if codec is CompressionCodec.ZSTANDARD:
        return _zstd_segments(src, input_bytes)
    raise CodecError(f"{codec.name} fragments cannot be cut into segments")


def _snappy_segments(src: BinaryIO, input_bytes: int, take: Callable[[int], memoryview]) -> Iterator[Segment]:
    # Every buffer has room for a read of ``input_bytes`` after the part chunk the
    # last one ended with, so all are one size (recyclable); a chunk larger than
    # that (at most 16 MiB by the format) grows a buffer of its own.
    carry: bytes = b""
    seen_identifier = eof = False
    while not eof:
        buf = take(input_bytes + _CARRY_ROOM if len(carry) <= _CARRY_ROOM else 2 * len(carry) + input_bytes)
        buf[:len(carry)] = carry
        total, end, size = len(carry), 0, 0
        while not eof and not end:
            if total == len(buf):  # full, and no whole chunk yet
                bigger = memoryview(bytearray(2 * len(buf)))
                bigger[:total] = buf[:total]
                buf = bigger
            got = _read_into(src, buf[total:total + input_bytes])
            eof, total = not got, total + got
            end, size, seen_identifier = complete_chunks(buf[:total], 0, seen_identifier)
        carry = bytes(buf[end:total])  # before the caller may recycle buf
        if end:
            yield Segment(CompressionCodec.SNAPPY, buf[:end], size)
    if carry:
        raise CodecError(f"SNAPPY: input ended inside a chunk ({len(carry)} bytes left)")


def _read_into(src: BinaryIO, into: memoryview) -> int:
    """One read into ``into`` (bytes read, 0 at the end): ``readinto`` where the file
    has it (a local fragment's unbuffered file: one ``read(2)``, no copy)."""
    readinto = getattr(src, "readinto", None)
    if readinto is not None:
        return readinto(into) or 0
    data = src.read(len(into))
    into[:len(data)] = data
    return len(data)


def _fresh(size: int) -> memoryview:
    return memoryview(bytearray(size))


def _zstd_segments(src: BinaryIO, input_bytes: int) -> Iterator[Segment]:
    buf = bytearray()
    scanner = ZstdFrameScanner()
    while chunk := src.read(input_bytes):
        buf += chunk
        while (end := scanner.frame_end(buf)) is not None:
            if not scanner.skippable:
                yield Segment(CompressionCodec.ZSTANDARD, _copy(buf, end), scanner.content_size)
            del buf[:end]
            scanner = ZstdFrameScanner()
    if buf:
        raise CodecError(f"ZSTANDARD: input ended inside a frame ({len(buf)} bytes left)")


def _copy(buf: bytearray, end: int) -> bytes:
    """``buf[:end]`` as bytes in one copy (slicing the bytearray first makes two)."""
    with memoryview(buf) as view:
        return bytes(view[:end])
