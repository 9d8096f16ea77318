"""Read-uncommitted batch reads cut inside fragments (`herald.spark.cuts`): every
split of a journal emits, row for row, what the one-partition read emits."""

from __future__ import annotations

import random

import pytest

from herald.spark.cuts import part_chunks
from herald.spark.reading import Piece, piece_chunks, plan_pieces
from herald.testing import Producer, make_journals, wait_persisted
from tests.spark.spark_helpers import broker_bytes, herald_read

pytestmark = pytest.mark.spark
CODECS = ["NONE", "GZIP", "SNAPPY", "ZSTANDARD"]


def _fill(broker, client, journal: str, codec: str, seed: int) -> None:
    """Appends of random record counts and lengths (some longer than a 4 KiB
    fragment) so that cuts land anywhere: mid-record, on a boundary, in a
    fragment's first or last record."""
    make_journals(broker, journal, labels={"cuts": codec.lower()}, length=4096, compression_codec=codec)
    rng, p, n = random.Random(seed), Producer(client), 0
    for _ in range(40):
        bodies = [{"n": (n := n + 1), "pad": "y" * rng.choice([0, 1, 7, 60, 300, 5000])}
                  for _ in range(rng.randint(1, 12))]
        p.committed(journal, *bodies)
    wait_persisted(client, journal, 3)


def _rows(df) -> list[tuple[int, int, bytes]]:
    return [(r.begin, r.end, bytes(r.value)) for r in df.orderBy("begin").select("begin", "end", "value").collect()]


@pytest.mark.parametrize("codec", CODECS)
def test_every_split_equals_the_one_partition_read_row_for_row(spark, broker, client, codec):
    journal = f"cuts/{codec.lower()}"
    _fill(broker, client, journal, codec, seed=CODECS.index(codec))
    one = herald_read(spark, broker, f"cuts={codec.lower()}", minPartitions=1)
    assert one.rdd.getNumPartitions() == 1
    whole = _rows(one)
    assert b"".join(v + b"\n" for _, _, v in whole) == broker_bytes(client, journal)
    pieces = plan_pieces(client, journal)
    for n in (3, 7, 19, 64):
        df = herald_read(spark, broker, f"cuts={codec.lower()}", minPartitions=n)
        assert df.rdd.getNumPartitions() >= min(n, len(pieces))
        assert _rows(df) == whole, f"minPartitions={n}"  # same offsets, none twice, none missing


def test_default_partitions_follow_the_cores_and_cut_large_fragments(spark, broker, client):
    """No ``minPartitions``: splits of max(4 MiB, total / cores), a fragment larger
    than that cut (here: a small maxPartitionBytes stands for a large journal)."""
    _fill(broker, client, "cuts/default", "SNAPPY", seed=7)
    pieces = plan_pieces(client, "cuts/default")
    whole = _rows(herald_read(spark, broker, "cuts=snappy", minPartitions=1))
    assert herald_read(spark, broker, "cuts=snappy").rdd.getNumPartitions() == 1  # < 4 MiB: one task
    largest = max(p.end - p.begin for p in pieces)
    df = herald_read(spark, broker, "cuts=snappy", maxPartitionBytes=largest // 3)
    total = pieces[-1].end - pieces[0].begin
    assert df.rdd.getNumPartitions() == -(-total // (largest // 3)) > len(pieces)
    assert _rows(df) == whole


def _cut_points(data: bytes, begin: int) -> set[int]:
    """Offsets inside ``data`` (at journal offset ``begin``): on record boundaries,
    one byte either side, inside the first and the last record."""
    ends = [begin + i + 1 for i, b in enumerate(data) if b == 0x0A]
    points = {begin + 1, begin + len(data) - 1}
    for e in ends[:3] + ends[-3:]:
        points |= {e - 1, e, e + 1}
    return {c for c in points if begin < c < begin + len(data)}


@pytest.mark.parametrize("codec", CODECS)
def test_a_cut_anywhere_in_a_piece_splits_its_records_exactly(broker, client, codec):
    """Persisted pieces read from their store (compressed: from the fragment's
    start) and the broker-read tail, each cut at chosen points into two parts."""
    journal = f"cuts2/{codec.lower()}"
    _fill(broker, client, journal, codec, seed=11 + CODECS.index(codec))
    Producer(client).committed(journal, {"n": -1, "tail": "not persisted yet" * 9})
    pieces = plan_pieces(client, journal)
    assert pieces[-1].fragment is None or pieces[-1].fragment.fragment.end >= pieces[-1].end
    for piece in pieces[:3] + pieces[-2:]:
        data = b"".join(c for _, c in piece_chunks(client, piece))
        for cut in sorted(_cut_points(data, piece.begin)):
            left = list(part_chunks(client, Piece(journal, piece.begin, cut, piece.fragment), False, piece.end))
            right = list(part_chunks(client, Piece(journal, cut, piece.end, piece.fragment), True, 0))
            got = b"".join(c for _, c in left + right)
            assert got == data, f"{codec} piece [{piece.begin}, {piece.end}) cut at {cut}"
            assert not left or left[-1][1].endswith(b"\n")
            split = left[-1][0] + len(left[-1][1]) if left else piece.begin
            assert not right or right[0][0] == split  # right begins where left's last record ends
