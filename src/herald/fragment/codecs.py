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

Each format's streaming coders live in their own module (`herald.fragment.coder`
says what a coder is). Everything here blocks on CPU; broker code calls it from an
executor.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import BinaryIO

import cramjam

from herald.fragment.coder import CodecError, Coder, Identity
from herald.fragment.gzip_members import GzipCompressor, GzipDecompressor
from herald.fragment.snappy_framed import SnappyCompressor, SnappyDecompressor
from herald.fragment.zstd_frames import ZstdCompressor, ZstdDecompressor
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


class Compressor:
    """Streaming compression: ``compress(chunk)`` any number of times, then ``finish()``.

    The concatenation of every returned piece is one valid file for ``codec``.
    """

    def __init__(self, codec: CompressionCodec, zstd_frame_input_bytes: int = 0) -> None:
        self.codec = codec
        self._coder = _new_coder(codec, _COMPRESSORS)
        if zstd_frame_input_bytes and isinstance(self._coder, ZstdCompressor):
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
    # One input buffer, refilled: a fresh chunk per read is a fresh MiB to fault in.
    buffer = bytearray(chunk_bytes)
    with open(src_path, "rb", buffering=0) as src, memoryview(buffer) as view:
        while size := src.readinto(buffer):
            written += _write(dst, compressor.compress(view[:size]))
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


_COMPRESSORS = {
    CompressionCodec.NONE: Identity,
    CompressionCodec.GZIP: GzipCompressor,
    CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION: GzipCompressor,
    CompressionCodec.SNAPPY: SnappyCompressor,
    CompressionCodec.ZSTANDARD: ZstdCompressor,
}

_DECOMPRESSORS = {
    CompressionCodec.NONE: Identity,
    CompressionCodec.GZIP: GzipDecompressor,
    CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION: GzipDecompressor,
    CompressionCodec.SNAPPY: SnappyDecompressor,
    CompressionCodec.ZSTANDARD: ZstdDecompressor,
}


def _new_coder(codec: CompressionCodec, table: dict) -> Coder:
    try:
        return table[codec]()
    except KeyError:
        raise CodecError(f"unsupported compression codec {codec!r}") from None
