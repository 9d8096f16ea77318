"""SNAPPY fragments in the *framed* snappy stream format, streaming: the decoder
cuts the stream at chunk boundaries and decodes complete chunks straight into
the caller's buffer (`decode_chunks_into`).

Why not cramjam's framed decoder: it decodes each chunk into a buffer of its own
and copies it out, and checks CRCs in software — 0.66–0.72 ms of CPU per MiB of
NDJSON here, against 0.52 for decoding each chunk's raw block in place with
cramjam and checking its CRC with the ``crc32c`` package (SSE4.2, GIL released);
`perf` on a broker serving SNAPPY reads put a fifth of its CPU in that copy.
"""

from __future__ import annotations

import struct

import cramjam
import crc32c

from herald.fragment.coder import CodecError

__all__ = ["SNAPPY_IDENTIFIER", "SnappyCompressor", "SnappyDecompressor", "chunk_extent", "complete_chunks",
           "decode_chunks_into"]

SNAPPY_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"
_COMPRESSED, _UNCOMPRESSED, _IDENTIFIER = 0x00, 0x01, 0xFF
#: Chunk types 0x02-0x7f are reserved and must not be skipped; 0x80-0xfe may be.
_FIRST_SKIPPABLE = 0x80
_MAX_CHUNK_CONTENT = 1 << 16
_U32 = struct.Struct("<I")
#: A chunk's type, 24-bit length (of its CRC and body) and masked CRC-32C of its input.
_CHUNK_HEAD = struct.Struct("<BHBI")
_MAX_COMPRESSED = cramjam.snappy.compress_raw_max_len(bytes(_MAX_CHUNK_CONTENT))


class SnappyCompressor:
    """Writes the framed format itself, from raw snappy blocks: each piece given to
    `update` becomes chunks of at most 64 KiB input, each compressed by cramjam
    straight into one output buffer, behind its head and a CRC-32C of its input from
    the ``crc32c`` package (SSE4.2; the GIL kept for its few microseconds, where a
    release and re-take would cost a hand-off to the event loop per chunk). A chunk
    that would not shrink by an eighth is stored uncompressed, as Go's snappy writer
    does.

    Why not cramjam's framed ``Compressor``: its ``flush`` holds the GIL while it
    works (a thread spinning beside it stopped dead), so the persister's compression
    — a third of a 1 MiB writer's broker CPU (`perf`), run at a lower priority —
    held the event loop off the GIL for a millisecond per MiB: a loop of 100 us
    sleeps beside a persisting thread ran 4.2-4.8k times in 6 s with it, 17.7k this
    way, 28.4k with no persister (p99 lateness 12-15 ms, 3.2-3.6, 0.8; load 10-12).
    It also checksums in software and its output is copied twice (``flush``, then
    ``bytes``): 1.26-1.29 ms of CPU per MiB of NDJSON, against 1.13-1.17 this way."""

    def __init__(self) -> None:
        self._started = False

    def update(self, chunk: bytes) -> bytes:
        if not chunk:
            return b""
        with memoryview(chunk) as view, view.cast("B") as data:
            return self._frame(data)

    def finish(self) -> bytes:
        return b""

    def _frame(self, data: memoryview) -> bytes:
        size = len(data)
        chunks = (size + _MAX_CHUNK_CONTENT - 1) // _MAX_CHUNK_CONTENT
        head = 0 if self._started else len(SNAPPY_IDENTIFIER)
        out = bytearray(head + chunks * (_CHUNK_HEAD.size + _MAX_COMPRESSED))
        out[:head] = SNAPPY_IDENTIFIER[:head]
        self._started = True
        pos = head
        with memoryview(out) as into:
            for start in range(0, size, _MAX_CHUNK_CONTENT):
                pos = _put_chunk(data[start:start + _MAX_CHUNK_CONTENT], out, into, pos)
        del out[pos:]
        return out  # type: ignore[return-value]  # bytes-like, and the caller's to keep


def _put_chunk(piece: memoryview, out: bytearray, into: memoryview, pos: int) -> int:
    """Write one chunk of ``piece`` (at most 64 KiB) at ``pos``; the position after it."""
    body = pos + _CHUNK_HEAD.size
    size = cramjam.snappy.compress_raw_into(piece, into[body:body + _MAX_COMPRESSED])
    kind = _COMPRESSED
    if size >= len(piece) - len(piece) // 8:
        kind, size = _UNCOMPRESSED, len(piece)
        into[body:body + size] = piece
    length = size + 4  # the CRC counts
    _CHUNK_HEAD.pack_into(out, pos, kind, length & 0xFFFF, length >> 16, _masked(crc32c.crc32c(piece, 0, 0)))
    return body + size


class SnappyDecompressor:
    """Cuts the framed stream at chunk boundaries (a 1-byte type and 3-byte length
    head every chunk; each holds at most 64 KiB uncompressed) and decodes the
    complete chunks of each piece straight from it into one bytearray of the exact
    uncompressed size (summed from each chunk's length varint). Only a chunk split
    between two pieces is copied, into a small carry: the output is the one copy.
    Buffering every piece whole (``+=``, then ``del`` of the decoded part) cost two
    copies of the input per piece."""

    def __init__(self) -> None:
        self._carry = bytearray()  # the start of a chunk the last piece cut
        self._seen_identifier = False

    def update(self, chunk: bytes) -> bytes:
        with memoryview(chunk) as whole, whole.cast("B") as view:
            pos = self._fill_carry(view)
            carried = self._carry if self._carry_is_whole() else None
            carry_size = 0
            if carried is not None:
                _, carry_size, self._seen_identifier = complete_chunks(carried, 0, self._seen_identifier)
            end, size, self._seen_identifier = complete_chunks(view, pos, self._seen_identifier)
            out = bytearray(carry_size + size)
            with memoryview(out) as into:
                if carried is not None:
                    with memoryview(carried) as data:
                        decode_chunks_into(data, into[:carry_size])
                    self._carry = bytearray()
                decode_chunks_into(view[pos:end], into[carry_size:])
            if end < len(view):
                self._carry += view[end:]
        return out  # type: ignore[return-value]  # bytes-like, and the caller's to keep

    def _fill_carry(self, view: memoryview) -> int:
        """Complete the carried chunk from the start of ``view`` (its head first, then
        its body); how many bytes of ``view`` that took."""
        pos = 0
        while self._carry and not self._carry_is_whole() and pos < len(view):
            carry = self._carry
            need = 4 - len(carry) if len(carry) < 4 else 4 + int.from_bytes(carry[1:4], "little") - len(carry)
            take = min(need, len(view) - pos)
            carry += view[pos:pos + take]
            pos += take
        return pos

    def _carry_is_whole(self) -> bool:
        carry = self._carry
        return len(carry) >= 4 and len(carry) == 4 + int.from_bytes(carry[1:4], "little")

    def finish(self) -> bytes:
        if self._carry:
            raise CodecError(f"SNAPPY: input ended inside a chunk ({len(self._carry)} bytes left)")
        return b""


def decode_chunks_into(chunks: memoryview, out: memoryview) -> int:
    """Decode whole framed-snappy chunks (identifier and padding chunks allowed
    anywhere) into ``out``, checking each chunk's CRC; the bytes written. Raises
    `CodecError` on a corrupt, truncated or reserved chunk, a CRC mismatch, or
    content that does not fill ``out`` exactly. Heads and CRCs are read in place
    (``unpack_from``): this loop holds the GIL, which the loop thread sending the
    decoded bytes waits for, so every slice it does not make counts."""
    pos = written = 0
    total = len(chunks)
    while pos < total:
        if pos + 4 > total:
            raise CodecError("SNAPPY: input ended inside a chunk head")
        (head,) = _U32.unpack_from(chunks, pos)
        kind, start = head & 0xFF, pos + 4
        pos = start + (head >> 8)
        if pos > total:
            raise CodecError("SNAPPY: input ended inside a chunk")
        if kind <= _UNCOMPRESSED:
            written += _decode_chunk(kind, chunks, start, pos, out, written)
        elif kind != _IDENTIFIER and kind < _FIRST_SKIPPABLE:
            raise CodecError(f"SNAPPY: reserved unskippable chunk type {kind:#04x}")
    if written != len(out):
        raise CodecError(f"SNAPPY: chunks promised {len(out)} bytes but held {written}")
    return written


def _decode_chunk(kind: int, chunks: memoryview, start: int, stop: int, out: memoryview, at: int) -> int:
    """One data chunk, ``chunks[start:stop]`` (4-byte masked CRC, then a raw block
    or the bytes), into ``out`` from ``at``; the bytes written."""
    if stop - start < 4:
        raise CodecError("SNAPPY: a data chunk shorter than its CRC")
    (crc,) = _U32.unpack_from(chunks, start)
    body, into = chunks[start + 4:stop], out[at:]
    try:
        if kind == _COMPRESSED:
            n = cramjam.snappy.decompress_raw_into(body, into)
        else:
            n = len(body)
            into[:n] = body
    except (cramjam.DecompressionError, ValueError) as err:
        raise CodecError(f"SNAPPY: corrupt chunk: {err}") from err
    if n > _MAX_CHUNK_CONTENT:
        raise CodecError(f"SNAPPY: a chunk held {n} bytes, more than 64 KiB")
    if _masked(crc32c.crc32c(into[:n])) != crc:
        raise CodecError("SNAPPY: chunk CRC mismatch (corrupt data)")
    return n


def _masked(crc: int) -> int:
    """The framing format's masked CRC-32C: rotated right 15 bits, plus a constant."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def complete_chunks(buf: bytearray | memoryview, pos: int, seen_identifier: bool) -> tuple[int, int, bool]:
    """Scan ``buf`` from ``pos`` over whole chunks: where the complete chunks end,
    their uncompressed size, and whether the stream identifier has been seen
    (the first chunk of a stream must be one). Raises `CodecError` otherwise."""
    size = 0
    while pos + 4 <= len(buf):
        kind, length = buf[pos], int.from_bytes(buf[pos + 1:pos + 4], "little")
        if pos + 4 + length > len(buf):
            break
        if not seen_identifier and kind != 0xFF:
            raise CodecError("SNAPPY: stream does not start with a stream identifier")
        seen_identifier = True
        if kind == 0x00:  # compressed: 4-byte CRC, then the raw block's length varint
            size += _varint(buf, pos + 8)
        elif kind == 0x01:  # uncompressed: 4-byte CRC, then the bytes
            size += length - 4
        pos += 4 + length
    return pos, size, seen_identifier


def chunk_extent(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Of the chunk whose head is at ``pos`` in ``buf`` (which holds at least its
    4-byte head and, for a compressed chunk, the 9 bytes after it): its length with
    the head, and its content's size (0 for identifier and skippable chunks). Lets
    a reader walk a stored file's chunks by their heads alone."""
    kind, length = buf[pos], int.from_bytes(buf[pos + 1:pos + 4], "little")
    if kind == _COMPRESSED:
        return 4 + length, _varint(buf, pos + 8)
    return 4 + length, length - 4 if kind == _UNCOMPRESSED else 0


def _varint(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """The little-endian base-128 varint at ``pos`` (a raw snappy block's length)."""
    value = shift = 0
    for byte in buf[pos:pos + 5]:
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value
        shift += 7
    raise CodecError("SNAPPY: bad length varint in a compressed chunk")
