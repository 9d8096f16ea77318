"""SNAPPY fragments in the *framed* snappy stream format, streaming: the decoder
cuts the stream at chunk boundaries and hands complete chunks to cramjam.
"""

from __future__ import annotations

import cramjam

from herald.fragment.coder import CodecError

__all__ = ["SNAPPY_IDENTIFIER", "SnappyCompressor", "SnappyDecompressor", "complete_chunks"]

SNAPPY_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"


class SnappyCompressor:
    def __init__(self) -> None:
        self._c = cramjam.snappy.Compressor()

    def update(self, chunk: bytes) -> bytes:
        self._c.compress(chunk)
        return bytes(self._c.flush())

    def finish(self) -> bytes:
        return bytes(self._c.finish())


class SnappyDecompressor:
    """Cuts the framed stream at chunk boundaries (a 1-byte type and 3-byte length
    head every chunk; each holds at most 64 KiB uncompressed) and hands the complete
    chunks to cramjam, which checks their CRCs and decodes them straight into one
    bytearray of the exact uncompressed size (summed from each chunk's length
    varint): one copy of the output, none of the input beyond buffering it."""

    def __init__(self) -> None:
        # cramjam wants every call to start with a stream identifier, so the buffer
        # always begins with one; a repeated identifier is legal and skipped.
        self._buf = bytearray(SNAPPY_IDENTIFIER)
        self._seen_identifier = False

    def update(self, chunk: bytes) -> bytes:
        self._buf += chunk
        end, size, self._seen_identifier = complete_chunks(self._buf, len(SNAPPY_IDENTIFIER),
                                                           self._seen_identifier)
        if end == len(SNAPPY_IDENTIFIER):
            return b""
        out = bytearray(size)
        with memoryview(self._buf) as view:
            written = cramjam.snappy.decompress_into(view[:end], out)
        del self._buf[len(SNAPPY_IDENTIFIER):end]
        if written != size:
            raise CodecError(f"SNAPPY: chunks promised {size} bytes but held {written}")
        return out  # type: ignore[return-value]  # bytes-like, and the caller's to keep

    def finish(self) -> bytes:
        if len(self._buf) > len(SNAPPY_IDENTIFIER):
            left = len(self._buf) - len(SNAPPY_IDENTIFIER)
            raise CodecError(f"SNAPPY: input ended inside a chunk ({left} bytes left)")
        return b""


def complete_chunks(buf: bytearray, pos: int, seen_identifier: bool) -> tuple[int, int, bool]:
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


def _varint(buf: bytearray, pos: int) -> int:
    """The little-endian base-128 varint at ``pos`` (a raw snappy block's length)."""
    value = shift = 0
    for byte in buf[pos:pos + 5]:
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value
        shift += 7
    raise CodecError("SNAPPY: bad length varint in a compressed chunk")
