"""Decoding a read answered in stored framed SNAPPY on the client
(`herald.client.framed_read`): the content of exactly the asked range, in order,
inline for small reads and two segments at once for large ones, whatever the
pieces the body arrives in (a proxy may cut chunks); a truncated or corrupt body
is a `CodecError`, never wrong bytes."""

from __future__ import annotations

import os

import pytest

from herald.client.framed_read import THREADED_BYTES, decoded_content
from herald.fragment.coder import CodecError
from herald.fragment.snappy_framed import SnappyCompressor

CONTENT = (b"".join(b'{"n":%d,"pad":"%s"}\n' % (i, b"x" * (i % 50)) for i in range(180_000))
           + os.urandom(1 << 20))[:THREADED_BYTES + (1 << 20)]


def _stream() -> bytes:
    compressor = SnappyCompressor()
    return b"".join(bytes(compressor.update(CONTENT[i:i + (1 << 20)])) for i in range(0, len(CONTENT), 1 << 20))


STREAM = _stream()


def _pieces(size: int) -> list[bytes]:
    return [STREAM[i:i + size] for i in range(0, len(STREAM), size)]


@pytest.mark.parametrize("piece_bytes", [1 << 20, 100_003, 7])
@pytest.mark.parametrize(("lo", "hi"), [(0, len(CONTENT)), (5, len(CONTENT) - 9), (70_000, 70_010)])
def test_decoded_content_is_exactly_the_range(piece_bytes: int, lo: int, hi: int) -> None:
    if piece_bytes == 7 and hi - lo >= THREADED_BYTES:
        piece_bytes = 4099  # the same joins, in a tenth of the time
    out = list(decoded_content(iter(_pieces(piece_bytes)), 0, lo, hi))
    assert all(type(chunk) is bytearray for chunk in out) and len({id(c) for c in out}) == len(out)
    assert b"".join(out) == CONTENT[lo:hi]


def test_a_body_ending_inside_a_chunk_is_a_codec_error() -> None:
    with pytest.raises(CodecError):
        list(decoded_content(iter([STREAM[:len(STREAM) - 3]]), 0, 0, len(CONTENT)))


def test_a_corrupt_chunk_is_a_codec_error_in_either_way() -> None:
    corrupt = bytearray(STREAM)
    corrupt[len(corrupt) // 2] ^= 0xFF
    for hi in (len(CONTENT), 1000):
        with pytest.raises(CodecError):
            list(decoded_content(iter([bytes(corrupt)]), 0, 0, hi))
