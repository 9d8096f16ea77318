"""Compression codecs for fragment files (gazette-facts §4.3), whole-buffer and streaming.

Byte formats match Gazette's so either system can read the other's fragments:
GZIP is RFC 1952 and may hold several members (Gazette closes one per compression
batch), SNAPPY is the *framed* snappy stream format, ZSTANDARD is zstd frames, and
GZIP_OFFLOAD_DECOMPRESSION is one gzip stream that a cloud store may decompress in
transit. Stored bytes of an offload fragment are still gzip, so decoding them here
gunzips; a caller whose HTTP client already undid ``Content-Encoding`` uses NONE.

The streaming `Compressor`/`Decompressor` take chunks and return bytes, so a large
fragment is never held whole in memory, compressed and uncompressed at once:

    >>> d = Decompressor(CompressionCodec.GZIP)
    >>> d.decompress(compress(b"hello", CompressionCodec.GZIP)) + d.finish()
    b'hello'

Everything here blocks on CPU; broker code calls it from an executor.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import BinaryIO, Protocol

import cramjam

from herald.protocol.journal import CompressionCodec

__all__ = [
    "CodecError",
    "Compressor",
    "Decompressor",
    "compress",
    "compress_file",
    "decompress",
    "decompressing_reader",
]

CHUNK_BYTES = 1 << 20
ZSTD_FRAME_INPUT_BYTES = 4 << 20
"""We end a zstd frame every 4 MiB of input: the streaming decoder can only hand a
complete frame to cramjam, so bounded frames keep its memory bounded."""
ZSTD_LEVEL = 3

_GZIP_WBITS = 31  # zlib: 16 + 15 selects the gzip container.
_SNAPPY_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE = range(0x184D2A50, 0x184D2A60)


class CodecError(ValueError):
    """Compressed bytes are corrupt or truncated, or the codec is not usable."""


class _Coder(Protocol):
    def update(self, chunk: bytes) -> bytes: ...

    def finish(self) -> bytes: ...


class Compressor:
    """Streaming compression: ``compress(chunk)`` any number of times, then ``finish()``.

    The concatenation of every returned piece is one valid file for ``codec``.
    """

    def __init__(self, codec: CompressionCodec, zstd_frame_input_bytes: int = 0) -> None:
        self.codec = codec
        self._coder = _new_coder(codec, _COMPRESSORS)
        if zstd_frame_input_bytes and isinstance(self._coder, _ZstdCompressor):
            self._coder.frame_input_bytes = zstd_frame_input_bytes

    def compress(self, chunk: bytes) -> bytes:
        return self._coder.update(chunk)

    def finish(self) -> bytes:
        return self._coder.finish()


class Decompressor:
    """Streaming decompression: ``decompress(chunk)`` as bytes arrive, then ``finish()``.

    Chunks may split the input anywhere. ``finish`` raises `CodecError` if the input
    ended inside a gzip member, snappy chunk or zstd frame. What ``decompress``
    returns is bytes-like (SNAPPY and ZSTANDARD decode into a fresh ``bytearray``,
    sparing a copy) and the caller's to keep.
    """

    def __init__(self, codec: CompressionCodec) -> None:
        self.codec = codec
        self._coder = _new_coder(codec, _DECOMPRESSORS)

    def decompress(self, chunk: bytes) -> bytes:
        try:
            return self._coder.update(chunk)
        except (zlib.error, cramjam.DecompressionError) as err:
            raise CodecError(f"{self.codec.name}: corrupt input: {err}") from err

    def finish(self) -> bytes:
        return self._coder.finish()


def compress(data: bytes, codec: CompressionCodec) -> bytes:
    """Compress a whole buffer, producing the same format as `Compressor`."""
    c = Compressor(codec)
    return c.compress(data) + c.finish()


def decompress(data: bytes, codec: CompressionCodec) -> bytes:
    """Decompress a whole buffer (multi-member gzip, concatenated frames included)."""
    if not data:
        return b""
    try:
        if codec is CompressionCodec.SNAPPY:
            return bytes(cramjam.snappy.decompress(data))
        if codec is CompressionCodec.ZSTANDARD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as err:
        raise CodecError(f"{codec.name}: corrupt input: {err}") from err
    d = Decompressor(codec)
    return d.decompress(data) + d.finish()


def compress_file(src_path: str, dst: BinaryIO, codec: CompressionCodec,
                  chunk_bytes: int = CHUNK_BYTES) -> int:
    """Compress the file at ``src_path`` into ``dst`` chunk by chunk; returns bytes written."""
    compressor = Compressor(codec)
    written = 0
    with open(src_path, "rb") as src:
        while chunk := src.read(chunk_bytes):
            written += _write(dst, compressor.compress(chunk))
    return written + _write(dst, compressor.finish())


def decompressing_reader(src: BinaryIO, codec: CompressionCodec,
                         chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Yield the uncompressed content of ``src`` as non-empty chunks, reading lazily."""
    decompressor = Decompressor(codec)
    while chunk := src.read(chunk_bytes):
        if out := decompressor.decompress(chunk):
            yield out
    if out := decompressor.finish():
        yield out


def _write(dst: BinaryIO, data: bytes) -> int:
    if data:
        dst.write(data)
    return len(data)


# --- codec implementations --------------------------------------------------------


class _Identity:
    def update(self, chunk: bytes) -> bytes:
        return bytes(chunk)

    def finish(self) -> bytes:
        return b""


class _GzipCompressor:
    def __init__(self) -> None:
        self._z = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, _GZIP_WBITS)

    def update(self, chunk: bytes) -> bytes:
        return self._z.compress(chunk)

    def finish(self) -> bytes:
        return self._z.flush()


class _GzipDecompressor:
    """Decodes consecutive gzip members: RFC 1952 allows them and Gazette writes them."""

    def __init__(self) -> None:
        self._z = zlib.decompressobj(_GZIP_WBITS)
        self._in_member = False

    def update(self, chunk: bytes) -> bytes:
        out = []
        while chunk:
            self._in_member = True
            out.append(self._z.decompress(chunk))
            if not self._z.eof:
                break
            chunk = self._z.unused_data
            self._z = zlib.decompressobj(_GZIP_WBITS)
            self._in_member = False
        return b"".join(out)

    def finish(self) -> bytes:
        if self._in_member:
            raise CodecError("GZIP: input ended inside a gzip member")
        return b""


class _SnappyCompressor:
    def __init__(self) -> None:
        self._c = cramjam.snappy.Compressor()

    def update(self, chunk: bytes) -> bytes:
        self._c.compress(chunk)
        return bytes(self._c.flush())

    def finish(self) -> bytes:
        return bytes(self._c.finish())


class _SnappyDecompressor:
    """Cuts the framed stream at chunk boundaries (a 1-byte type and 3-byte length
    head every chunk; each holds at most 64 KiB uncompressed) and hands the complete
    chunks to cramjam, which checks their CRCs and decodes them straight into one
    bytearray of the exact uncompressed size (summed from each chunk's length
    varint): one copy of the output, none of the input beyond buffering it."""

    def __init__(self) -> None:
        # cramjam wants every call to start with a stream identifier, so the buffer
        # always begins with one; a repeated identifier is legal and skipped.
        self._buf = bytearray(_SNAPPY_IDENTIFIER)
        self._seen_identifier = False

    def update(self, chunk: bytes) -> bytes:
        self._buf += chunk
        end, size = self._complete_chunks()
        if end == len(_SNAPPY_IDENTIFIER):
            return b""
        out = bytearray(size)
        with memoryview(self._buf) as view:
            written = cramjam.snappy.decompress_into(view[:end], out)
        del self._buf[len(_SNAPPY_IDENTIFIER):end]
        if written != size:
            raise CodecError(f"SNAPPY: chunks promised {size} bytes but held {written}")
        return out  # type: ignore[return-value]  # bytes-like, and the caller's to keep

    def _complete_chunks(self) -> tuple[int, int]:
        """End of the complete chunks in the buffer, and their uncompressed size."""
        buf, pos, size = self._buf, len(_SNAPPY_IDENTIFIER), 0
        while pos + 4 <= len(buf):
            kind, length = buf[pos], int.from_bytes(buf[pos + 1:pos + 4], "little")
            if pos + 4 + length > len(buf):
                break
            if not self._seen_identifier and kind != 0xFF:
                raise CodecError("SNAPPY: stream does not start with a stream identifier")
            self._seen_identifier = True
            if kind == 0x00:  # compressed: 4-byte CRC, then the raw block's length varint
                size += _varint(buf, pos + 8)
            elif kind == 0x01:  # uncompressed: 4-byte CRC, then the bytes
                size += length - 4
            pos += 4 + length
        return pos, size

    def finish(self) -> bytes:
        if len(self._buf) > len(_SNAPPY_IDENTIFIER):
            left = len(self._buf) - len(_SNAPPY_IDENTIFIER)
            raise CodecError(f"SNAPPY: input ended inside a chunk ({left} bytes left)")
        return b""


def _varint(buf: bytearray, pos: int) -> int:
    """The little-endian base-128 varint at ``pos`` (a raw snappy block's length)."""
    value = shift = 0
    for byte in buf[pos:pos + 5]:
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value
        shift += 7
    raise CodecError("SNAPPY: bad length varint in a compressed chunk")


class _ZstdCompressor:
    """Writes independent frames of at most `ZSTD_FRAME_INPUT_BYTES` input each."""

    def __init__(self) -> None:
        self.frame_input_bytes = ZSTD_FRAME_INPUT_BYTES
        self._buf = bytearray()
        self._wrote_frame = False

    def update(self, chunk: bytes) -> bytes:
        self._buf += chunk
        out = []
        size = self.frame_input_bytes
        while len(self._buf) >= size:
            out.append(self._frame(bytes(self._buf[:size])))
            del self._buf[:size]
        return b"".join(out)

    def finish(self) -> bytes:
        if self._buf or not self._wrote_frame:  # Empty input still makes one valid frame.
            out = self._frame(bytes(self._buf))
            self._buf.clear()
            return out
        return b""

    def _frame(self, data: bytes) -> bytes:
        self._wrote_frame = True
        return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL))


class _ZstdDecompressor:
    """Finds frame boundaries from frame and block headers (RFC 8878) without
    decompressing, then decompresses each complete frame. Memory is bounded by the
    writer's frame size: ours are small, Gazette's are a whole fragment."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._scanner = _ZstdFrameScanner()

    def update(self, chunk: bytes) -> bytes:
        self._buf += chunk
        out = []
        while (end := self._scanner.frame_end(self._buf)) is not None:
            if not self._scanner.skippable:
                out.append(self._frame(end, self._scanner.content_size))
            del self._buf[:end]
            self._scanner = _ZstdFrameScanner()
        return out[0] if len(out) == 1 else b"".join(out)

    def _frame(self, end: int, content_size: int | None) -> bytes:
        """Decode the frame in ``buf[:end]``: into a bytearray of exactly its size
        when its header says the size (ours always do), else via cramjam's buffer."""
        with memoryview(self._buf) as view:
            if content_size is None:
                return bytes(cramjam.zstd.decompress(view[:end]))
            out = bytearray(content_size)
            if content_size and cramjam.zstd.decompress_into(view[:end], out) != content_size:
                raise CodecError(f"ZSTANDARD: frame holds other than the {content_size} bytes it declares")
            return out  # type: ignore[return-value]  # bytes-like, and the caller's to keep

    def finish(self) -> bytes:
        if self._buf:
            raise CodecError(f"ZSTANDARD: input ended inside a frame ({len(self._buf)} bytes left)")
        return b""


class _ZstdFrameScanner:
    """Resumable scan of the frame at the start of a buffer; `frame_end` returns its
    length once complete, else None (call again with more bytes)."""

    def __init__(self) -> None:
        self.skippable = False
        self.content_size: int | None = None  # From the frame header, when it holds one.
        self._cursor: int | None = None  # Offset of the next block header, once known.
        self._trailer = 0  # Content checksum bytes after the last block.
        self._end: int | None = None  # Known frame length (after the last block).

    def frame_end(self, buf: bytearray) -> int | None:
        if self._end is None and self._cursor is None and not self._read_header(buf):
            return None
        while self._end is None:
            if self._cursor + 3 > len(buf):
                return None
            head = int.from_bytes(buf[self._cursor:self._cursor + 3], "little")
            block_type, block_size = (head >> 1) & 3, head >> 3
            if block_type == 3:
                raise CodecError("ZSTANDARD: reserved block type")
            self._cursor += 3 + (1 if block_type == 1 else block_size)
            if head & 1:
                self._end = self._cursor + self._trailer
        return self._end if self._end <= len(buf) else None

    def _read_header(self, buf: bytearray) -> bool:
        if len(buf) < 8:
            return False
        magic = int.from_bytes(buf[0:4], "little")
        if magic in _ZSTD_SKIPPABLE:
            self.skippable = True
            self._end = 8 + int.from_bytes(buf[4:8], "little")
            return True
        if magic != _ZSTD_MAGIC:
            raise CodecError(f"ZSTANDARD: bad frame magic {magic:#x}")
        descriptor = buf[4]
        single_segment = (descriptor >> 5) & 1
        content_size_bytes = (single_segment, 2, 4, 8)[descriptor >> 6]
        dictionary_bytes = (0, 1, 2, 4)[descriptor & 3]
        self._trailer = 4 if descriptor & 4 else 0
        self._cursor = 5 + (1 - single_segment) + dictionary_bytes + content_size_bytes
        if content_size_bytes and len(buf) >= self._cursor:
            field = self._cursor - content_size_bytes
            size = int.from_bytes(buf[field:self._cursor], "little")
            self.content_size = size + 256 if content_size_bytes == 2 else size
        return True


_COMPRESSORS = {
    CompressionCodec.NONE: _Identity,
    CompressionCodec.GZIP: _GzipCompressor,
    CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION: _GzipCompressor,
    CompressionCodec.SNAPPY: _SnappyCompressor,
    CompressionCodec.ZSTANDARD: _ZstdCompressor,
}

_DECOMPRESSORS = {
    CompressionCodec.NONE: _Identity,
    CompressionCodec.GZIP: _GzipDecompressor,
    CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION: _GzipDecompressor,
    CompressionCodec.SNAPPY: _SnappyDecompressor,
    CompressionCodec.ZSTANDARD: _ZstdDecompressor,
}


def _new_coder(codec: CompressionCodec, table: dict) -> _Coder:
    try:
        return table[codec]()
    except KeyError:
        raise CodecError(f"unsupported compression codec {codec!r}") from None
