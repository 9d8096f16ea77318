"""Framed-snappy chunks decoded in place (`decode_chunks_into`): the same bytes as
cramjam's own framed decoder on every chunk kind the format allows, and a
`CodecError` — never wrong bytes — for a bad CRC, a reserved chunk type, a
truncated chunk or content of another size than promised."""

from __future__ import annotations

import os
import struct

import cramjam
import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herald.fragment.coder import CodecError
from herald.fragment.snappy_framed import (
    SNAPPY_IDENTIFIER,
    SnappyCompressor,
    SnappyDecompressor,
    chunk_extent,
    decode_chunks_into,
)


def _masked_crc(data: bytes) -> int:
    crc = crc32c.crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _chunk(kind: int, body: bytes) -> bytes:
    return bytes([kind]) + len(body).to_bytes(3, "little") + body


def _uncompressed(content: bytes) -> bytes:
    return _chunk(0x01, struct.pack("<I", _masked_crc(content)) + content)


def _decode(stream: bytes, size: int) -> bytes:
    out = bytearray(size)
    assert decode_chunks_into(memoryview(stream), memoryview(out)) == size
    return bytes(out)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=70_000), min_size=1, max_size=4))
def test_matches_cramjams_framed_decoder(pieces: list[bytes]) -> None:
    content = b"".join(pieces)
    stream = bytes(cramjam.snappy.compress(content))
    assert _decode(stream, len(content)) == content == bytes(cramjam.snappy.decompress(stream))


def test_uncompressed_padding_skippable_and_repeated_identifier_chunks() -> None:
    text = b'{"event":"order"}\n' * 2000
    noise = os.urandom(1000)
    stream = (SNAPPY_IDENTIFIER + bytes(cramjam.snappy.compress(text))[len(SNAPPY_IDENTIFIER):]
              + _chunk(0xFE, b"\0" * 7) + _chunk(0x80, b"skip me") + SNAPPY_IDENTIFIER
              + _uncompressed(noise))
    assert _decode(stream, len(text) + len(noise)) == text + noise
    # The streaming decoder, fed a byte at a time, gives the same bytes.
    decoder = SnappyDecompressor()
    streamed = b"".join(bytes(decoder.update(stream[i:i + 1])) for i in range(len(stream)))
    assert streamed + decoder.finish() == text + noise


def test_a_bad_crc_is_an_error_not_wrong_bytes() -> None:
    content = b"abcdefgh" * 100
    chunk = bytearray(_uncompressed(content))
    chunk[-1] ^= 0x01  # the content changes, the CRC does not
    with pytest.raises(CodecError, match="CRC mismatch"):
        _decode(SNAPPY_IDENTIFIER + bytes(chunk), len(content))


def test_a_reserved_chunk_type_is_an_error() -> None:
    with pytest.raises(CodecError, match="reserved unskippable chunk type 0x02"):
        _decode(SNAPPY_IDENTIFIER + _chunk(0x02, b"xx"), 0)


@pytest.mark.parametrize("cut", [1, 3, 6, 20])
def test_a_truncated_chunk_is_an_error(cut: int) -> None:
    stream = SNAPPY_IDENTIFIER + _uncompressed(b"z" * 50)
    with pytest.raises(CodecError, match="input ended inside|shorter than its CRC"):
        _decode(stream[:len(SNAPPY_IDENTIFIER) + cut], 50)


@pytest.mark.parametrize("size", [49, 51])
def test_content_of_another_size_than_promised_is_an_error(size: int) -> None:
    stream = SNAPPY_IDENTIFIER + _uncompressed(b"z" * 50)
    with pytest.raises(CodecError):
        _decode(stream, size)


def test_a_corrupt_raw_block_is_an_error() -> None:
    stream = bytearray(cramjam.snappy.compress(b"hello fragments " * 5000))
    stream[len(SNAPPY_IDENTIFIER) + 9:len(SNAPPY_IDENTIFIER) + 30] = b"\xff" * 21
    with pytest.raises(CodecError):
        _decode(bytes(stream), 16 * 5000)


@pytest.mark.parametrize("kind", [0x00, 0x01])
def test_a_whole_data_chunk_shorter_than_its_crc_is_an_error(kind: int) -> None:
    with pytest.raises(CodecError, match="shorter than its CRC"):
        _decode(SNAPPY_IDENTIFIER + _chunk(kind, b"abc"), 0)


def test_chunk_extents_walk_a_stream_by_its_heads() -> None:
    content = b"".join(b'{"n":%d}\n' % i for i in range(40_000))[:250_000] + os.urandom(70_000)
    stream = bytes(SnappyCompressor().update(content))
    pos, sizes = 0, []
    while pos < len(stream):
        length, size = chunk_extent(stream[pos:pos + 13])
        pos, sizes = pos + length, [*sizes, size]
    assert pos == len(stream) and sizes[0] == 0 and sum(sizes) == len(content)
    assert all(0 < size <= 1 << 16 for size in sizes[1:])
