"""The pure cutting rules of read-uncommitted batch partitions (`herald.spark.cuts`):
Spark's split size, pieces cut inside a fragment, and the records each part emits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from herald.spark.cuts import OPEN_COST_BYTES, even_parts, record_chunks, split_bytes
from herald.spark.reading import Piece

MIB = 1 << 20


def test_split_bytes_follows_spark_max_split_bytes():
    # 20 MB over 2 cores: 10 MB splits (Spark's text source: 3 tasks over 16 + 4 MiB files).
    assert split_bytes(20 * MIB, 2, 64 * MIB) == 10 * MIB
    assert split_bytes(2 * MIB, 2, 64 * MIB) == OPEN_COST_BYTES  # never below openCostInBytes
    assert split_bytes(1 << 30, 2, 64 * MIB) == 64 * MIB  # never above maxPartitionBytes
    assert split_bytes(10, 4, 64 * MIB, floor=1) == 3  # minPartitions: no floor


def _shape(parts):
    return [[(c.piece.begin, c.piece.end, c.head_cut, c.read_to) for c in g] for g in parts]


def test_quick_bench_shape_is_two_equal_partitions():
    """16 + 4 MiB fragments, 2 cores, 4 MiB open cost: splits of 12 MiB, so two
    parts of 10 MiB, the first fragment cut at 10 MiB."""
    pieces = [Piece("j", 0, 16 * MIB), Piece("j", 16 * MIB, 20 * MIB)]
    size = split_bytes(20 * MIB + OPEN_COST_BYTES, 2, 64 * MIB)
    assert _shape(even_parts(pieces, size, cuttable=True)) == [
        [(0, 10 * MIB, False, 16 * MIB)], [(10 * MIB, 16 * MIB, True, 0), (16 * MIB, 20 * MIB, False, 0)]]


def test_uncuttable_framings_cut_at_the_nearest_piece_boundary():
    pieces = [Piece("j", 0, 100), Piece("j", 100, 130), Piece("j", 130, 200)]
    assert _shape(even_parts(pieces, 100, cuttable=False)) == [
        [(0, 100, False, 0)], [(100, 130, False, 0), (130, 200, False, 0)]]
    assert _shape(even_parts(pieces[:1], 10, cuttable=False)) == [[(0, 100, False, 0)]]
    assert even_parts([], 10, cuttable=True) == []


def _chunks(data: bytes, base: int, start: int, sizes: list[int]):
    pos, i = start, 0
    while pos < base + len(data):
        n = sizes[i % len(sizes)]
        i += 1
        yield pos, data[pos - base:pos - base + n]
        pos += n


def _record_starts(data: bytes, base: int) -> list[int]:
    return [base] + [base + i + 1 for i, b in enumerate(data[:-1]) if b == 0x0A]


@settings(max_examples=400, deadline=None)
@given(lengths=st.lists(st.integers(0, 40), min_size=1, max_size=30), torn_tail=st.booleans(),
       parts=st.integers(1, 12), sizes=st.lists(st.integers(1, 50), min_size=1, max_size=5),
       base=st.integers(0, 1000))
def test_parts_emit_each_record_once_in_order(lengths, torn_tail, parts, sizes, base):
    """Whatever the record lengths, chunk sizes and cut points: the parts together
    emit the content byte for byte, each part exactly the records that begin in it."""
    data = b"".join(b"x" * n + b"\n" for n in lengths) + (b"torn" if torn_tail else b"")
    piece = Piece("j", base, base + len(data))
    groups = even_parts([piece], max(1, -(-len(data) // parts)), cuttable=True)
    assert all(len(g) == 1 for g in groups) and sum(g[0].size for g in groups) == len(data)
    cuts = [g[0] for g in groups]
    starts = _record_starts(data, base)
    out = b""
    for cut in cuts:
        p = cut.piece
        begin = p.begin - 1 if cut.head_cut else p.begin
        stop = cut.read_to or p.end
        emitted = list(record_chunks(_chunks(data[:stop - base], base, begin, sizes), p.begin, p.end,
                                     cut.head_cut, cut.read_to > 0))
        got = b"".join(c for _, c in emitted)
        for (o1, c1), (o2, _) in zip(emitted, emitted[1:], strict=False):
            assert o1 + len(c1) == o2  # contiguous
        mine = [s for s in starts if p.begin <= s < p.end]
        if mine:
            first, following = mine[0], [s for s in starts if s >= p.end]
            last = following[0] if following else base + len(data)
            assert emitted[0][0] == first
            assert got == data[first - base:last - base]
        else:
            assert got == b""
        out += got
    assert out == data


def test_cut_on_a_record_boundary_skips_nothing():
    data = b"aaaa\nbbbb\ncccc\n"
    chunks = [(4, data[4:])]  # begin 5 = "bbbb"'s first byte; read from begin - 1, a newline
    assert list(record_chunks(iter(chunks), 5, 10, head_cut=True, read_on=True)) == [(5, b"bbbb\n")]
    # A cut inside "bbbb": the previous part finishes it, this part starts at "cccc".
    assert list(record_chunks(iter([(6, data[6:])]), 7, 15, head_cut=True, read_on=False)) == [(10, b"cccc\n")]
    assert list(record_chunks(iter([(0, data)]), 0, 7, head_cut=False, read_on=True)) == [(0, b"aaaa\nbbbb\n")]
