"""Cutting SNAPPY and ZSTANDARD fragment files into segments that decode alone:
every byte comes back in order whatever the read size, each segment declares its
decoded size before decoding, and malformed files are a `CodecError`."""

from __future__ import annotations

import io
import os
import struct

import cramjam
import pytest

from herald.fragment.codecs import CodecError, compress
from herald.fragment.segments import is_segmentable, segments
from herald.protocol.journal import CompressionCodec

CUTTABLE = [CompressionCodec.SNAPPY, CompressionCodec.ZSTANDARD]


def _content() -> bytes:
    # Incompressible runs (snappy stores them as uncompressed chunks) between
    # compressible ones, over several 64 KiB snappy chunks and 4 MiB zstd frames.
    text = b"".join(b'{"n":%d,"event":"order"}\n' % i for i in range(60_000))
    return text + os.urandom(300_000) + text[:777] + os.urandom(5) + text * 3


def _decode_all(data: bytes, codec: CompressionCodec, input_bytes: int) -> tuple[bytes, int]:
    out, count = [], 0
    for segment in segments(io.BytesIO(data), codec, input_bytes):
        decoded = segment.decode()
        assert len(decoded) == segment.size  # declared before decoding
        out.append(bytes(decoded))
        count += 1
    return b"".join(out), count


@pytest.mark.parametrize("codec", CUTTABLE)
@pytest.mark.parametrize("input_bytes", [1, 1000, 65_536, 1 << 20, 1 << 26])
def test_segments_decode_to_the_whole_content_in_order(codec, input_bytes) -> None:
    content = _content()
    decoded, count = _decode_all(compress(content, codec), codec, input_bytes)
    assert decoded == content
    assert count >= 1


def test_small_reads_make_many_segments_and_large_ones_few() -> None:
    data = compress(_content(), CompressionCodec.SNAPPY)
    _, many = _decode_all(data, CompressionCodec.SNAPPY, 4096)
    _, few = _decode_all(data, CompressionCodec.SNAPPY, 1 << 26)
    assert many > 50 and few == 1


@pytest.mark.parametrize("codec", CUTTABLE)
def test_decode_into_a_recycled_buffer(codec) -> None:
    content = _content()
    buffer = bytearray(len(content))
    pos = 0
    for segment in segments(io.BytesIO(compress(content, codec)), codec, 100_000):
        assert segment.size is not None
        segment.decode_into(memoryview(buffer)[pos:pos + segment.size])
        pos += segment.size
    assert buffer == content


def test_zstd_skippable_frames_are_dropped_and_frames_without_a_size_still_decode() -> None:
    streamed = cramjam.zstd.Compressor()
    streamed.compress(b"no declared size " * 1000)
    unsized = bytes(streamed.finish())
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    data = skippable + bytes(cramjam.zstd.compress(b"sized")) + unsized
    cut = list(segments(io.BytesIO(data), CompressionCodec.ZSTANDARD, 7))
    assert [s.size for s in cut] == [5, None]
    assert b"".join(bytes(s.decode()) for s in cut) == b"sized" + b"no declared size " * 1000


@pytest.mark.parametrize("codec", CUTTABLE)
def test_truncated_file_is_an_error(codec) -> None:
    data = compress(_content(), codec)
    with pytest.raises(CodecError, match="input ended inside"):
        list(segments(io.BytesIO(data[:-3]), codec))


@pytest.mark.parametrize("codec", CUTTABLE)
def test_corrupt_segment_is_an_error_when_decoded(codec) -> None:
    data = bytearray(compress(b"hello fragments " * 5000, codec))
    if codec is CompressionCodec.SNAPPY:
        data[len(data) // 2] ^= 0xFF  # caught by the chunk's CRC
    else:
        data[12:40] = b"\xff" * 28  # inside the first block: our frames carry no checksum
    with pytest.raises(CodecError):
        for segment in segments(io.BytesIO(bytes(data)), codec):
            segment.decode()


def test_snappy_without_a_stream_identifier_is_an_error() -> None:
    data = compress(b"abc" * 100, CompressionCodec.SNAPPY)[10:]
    with pytest.raises(CodecError, match="stream identifier"):
        list(segments(io.BytesIO(data), CompressionCodec.SNAPPY))


def test_zstd_bad_magic_is_an_error() -> None:
    with pytest.raises(CodecError, match="magic"):
        list(segments(io.BytesIO(b"not a zstd frame at all"), CompressionCodec.ZSTANDARD))


@pytest.mark.parametrize("codec", [CompressionCodec.NONE, CompressionCodec.GZIP])
def test_codecs_without_boundaries_are_not_cut(codec) -> None:
    assert not is_segmentable(codec)
    with pytest.raises(CodecError):
        segments(io.BytesIO(b""), codec)


@pytest.mark.parametrize("input_bytes", [1000, 65_536, 1 << 20])
def test_snappy_input_buffers_can_be_recycled_once_a_segment_is_decoded(input_bytes) -> None:
    # The cutter reads into buffers it is handed; once a segment is decoded its
    # buffer may be reused (here: scribbled over, then handed out again) without
    # changing any later byte — the part chunk it ended with was copied out first.
    content = _content()
    free: list[bytearray] = []
    handed: list[int] = []

    def take(size: int) -> memoryview:
        buf = next((b for b in free if len(b) == size), None) or bytearray(size)
        if buf in free:
            free.remove(buf)
        handed.append(id(buf))
        return memoryview(buf)

    out = []
    for segment in segments(io.BytesIO(compress(content, CompressionCodec.SNAPPY)), CompressionCodec.SNAPPY,
                            input_bytes, take=take):
        out.append(bytes(segment.decode()))
        assert isinstance(segment.data, memoryview)  # a view of the buffer read into: no copy
        buf = segment.data.obj
        segment.data.release()
        buf[:] = b"\xff" * len(buf)
        free.append(buf)
    assert b"".join(out) == content
    assert len(set(handed)) < len(handed)  # buffers were in fact reused


def test_a_snappy_file_truncated_under_the_cutter_is_an_error(tmp_path) -> None:
    # A local fragment read in place (readinto) that shrinks mid-read — a store
    # cleaned up under a reader — ends in CodecError, never in wrong bytes.
    data = compress(_content(), CompressionCodec.SNAPPY)
    path = tmp_path / "fragment.sz"
    path.write_bytes(data)
    with open(path, "rb", buffering=0) as src:
        cuts = segments(src, CompressionCodec.SNAPPY, 65_536)
        first = next(cuts)
        os.truncate(path, len(data) // 2 + 3)
        with pytest.raises(CodecError, match="ended inside a chunk"):
            for segment in cuts:
                segment.decode()
    assert first.decode() == _content()[:first.size]
