"""Codecs: Gazette-compatible byte formats, whole-buffer and streaming (gazette-facts §4.3)."""

from __future__ import annotations

import gzip
import io
import os
import random
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herald.fragment.codecs import (
    CodecError,
    Compressor,
    Decompressor,
    compress,
    compress_file,
    decompress,
    decompressing_reader,
)
from herald.protocol.journal import CompressionCodec

CODECS = [c for c in CompressionCodec if c is not CompressionCodec.INVALID]
COMPRESSED = [c for c in CODECS if c is not CompressionCodec.NONE]


def _chunked(data: bytes, sizes: list[int]) -> list[bytes]:
    out, pos = [], 0
    for size in sizes:
        out.append(data[pos:pos + size])
        pos += size
    out.append(data[pos:])
    return out


def _stream_decompress(data: bytes, codec: CompressionCodec, sizes: list[int]) -> bytes:
    d = Decompressor(codec)
    return b"".join(d.decompress(chunk) for chunk in _chunked(data, sizes)) + d.finish()


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("data", [b"", b"x", b"hello journal\n" * 10_000, os.urandom(200_000)],
                         ids=["empty", "one-byte", "text", "random"])  # ids the same in every pytest-xdist worker
def test_whole_buffer_round_trip(codec: CompressionCodec, data: bytes) -> None:
    assert decompress(compress(data, codec), codec) == data


@settings(max_examples=40, deadline=None)
@given(
    codec=st.sampled_from(CODECS),
    pieces=st.lists(st.binary(max_size=3000), max_size=8),
    sizes=st.lists(st.integers(0, 700), max_size=30),
)
def test_streaming_round_trip_with_any_chunking(codec: CompressionCodec, pieces: list[bytes],
                                                sizes: list[int]) -> None:
    c = Compressor(codec)
    compressed = b"".join(c.compress(p) for p in pieces) + c.finish()
    assert _stream_decompress(compressed, codec, sizes) == b"".join(pieces)


def test_multi_member_gzip_decodes_every_member() -> None:
    # Gazette closes one gzip member per compression batch.
    members = gzip.compress(b"first ") + gzip.compress(b"") + gzip.compress(b"second")
    assert decompress(members, CompressionCodec.GZIP) == b"first second"
    assert _stream_decompress(members, CompressionCodec.GZIP, [5, 17, 3]) == b"first second"


def test_snappy_is_the_framed_format_and_reads_cramjam_frames() -> None:
    data = b"snappy framed " * 20_000
    ours = compress(data, CompressionCodec.SNAPPY)
    assert ours.startswith(b"\xff\x06\x00\x00sNaPpY")
    assert bytes(cramjam.snappy.decompress(ours)) == data
    theirs = bytes(cramjam.snappy.compress(data))
    assert _stream_decompress(theirs, CompressionCodec.SNAPPY, [1, 9, 1000, 4096]) == data


def test_zstd_reads_one_big_frame_and_skippable_frames() -> None:
    data = os.urandom(1000) * 3000
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    theirs = skippable + bytes(cramjam.zstd.compress(data)) + bytes(cramjam.zstd.compress(b"tail"))
    assert _stream_decompress(theirs, CompressionCodec.ZSTANDARD, [2, 7, 100, 65536]) == data + b"tail"
    assert decompress(theirs, CompressionCodec.ZSTANDARD) == data + b"tail"


def test_zstd_writes_bounded_frames() -> None:
    c = Compressor(CompressionCodec.ZSTANDARD, zstd_frame_input_bytes=1000)
    d = Decompressor(CompressionCodec.ZSTANDARD)
    data = os.urandom(500) * 9
    # Each complete frame decodes as soon as it is fed: memory stays bounded.
    first = d.decompress(c.compress(data))
    assert first == data[:4000]
    assert first + d.decompress(c.finish()) + d.finish() == data


@pytest.mark.parametrize("codec", COMPRESSED)
def test_truncated_input_is_an_error(codec: CompressionCodec) -> None:
    compressed = compress(os.urandom(5000), codec)
    d = Decompressor(codec)
    with pytest.raises(CodecError):
        d.decompress(compressed[:-3])
        d.finish()


@pytest.mark.parametrize("codec", [c for c in COMPRESSED if c is not CompressionCodec.ZSTANDARD])
def test_corrupt_input_of_checksummed_formats_is_an_error(codec: CompressionCodec) -> None:
    compressed = bytearray(compress(random.Random(20261122).randbytes(20) * 1000, codec))  # fixed: no flakes
    compressed[len(compressed) // 2] ^= 0xFF
    with pytest.raises(CodecError):
        decompress(bytes(compressed), codec)
    with pytest.raises(CodecError):
        Decompressor(codec).decompress(bytes(compressed))


def test_corrupt_zstd_frame_header_is_an_error() -> None:
    # Our zstd frames carry no content checksum (cramjam cannot write one), so only
    # structural damage is detectable.
    compressed = bytearray(compress(b"journal bytes " * 1000, CompressionCodec.ZSTANDARD))
    compressed[1] ^= 0xFF
    for decode in (lambda b: decompress(b, CompressionCodec.ZSTANDARD),
                   lambda b: Decompressor(CompressionCodec.ZSTANDARD).decompress(b)):
        with pytest.raises(CodecError):
            decode(bytes(compressed))


def test_invalid_codec_is_rejected() -> None:
    with pytest.raises(CodecError):
        Compressor(CompressionCodec.INVALID)


@pytest.mark.parametrize("codec", CODECS)
def test_compress_file_and_decompressing_reader_round_trip(tmp_path, codec: CompressionCodec) -> None:
    data = os.urandom(100) * 30_000 + os.urandom(10_000)
    src = tmp_path / "spool"
    src.write_bytes(data)
    out = io.BytesIO()
    written = compress_file(str(src), out, codec, chunk_bytes=65536)
    assert written == len(out.getvalue())
    chunks = list(decompressing_reader(io.BytesIO(out.getvalue()), codec, chunk_bytes=10_000))
    assert all(chunks) and b"".join(chunks) == data


def test_snappy_chunks_hold_at_most_64_kib_and_stored_ones_stay_raw() -> None:
    # Framed snappy caps a chunk's input at 64 KiB; a chunk that would not shrink is
    # stored uncompressed (type 0x01), as Go's writer does; cramjam reads either.
    text, noise = b"snappy framed " * 10_000, random.Random(20261127).randbytes(70_000)
    c = Compressor(CompressionCodec.SNAPPY)
    stream = bytes(c.compress(text) + c.compress(noise) + c.finish())
    kinds, pos = [], 10  # past the stream identifier
    while pos < len(stream):
        kind, size = stream[pos], int.from_bytes(stream[pos + 1:pos + 4], "little")
        kinds.append(kind)
        pos += 4 + size
    assert kinds == [0x00, 0x00, 0x00, 0x01, 0x01]  # 140,000 text bytes in 3 chunks; noise in 2
    assert bytes(cramjam.snappy.decompress(stream)) == text + noise
