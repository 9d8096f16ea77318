"""Batch reads of format ``herald``: fragments straight from stores, the tail
through the broker, read-committed across fragment boundaries."""

from __future__ import annotations

import pytest

from herald.spark.reading import plan_pieces
from herald.testing import Producer, make_journals, wait_persisted
from tests.spark.spark_helpers import broker_bytes, herald_read, reference_committed, spark_values

pytestmark = pytest.mark.spark


def test_batch_read_packs_pieces_into_partitions_of_max_partition_bytes(spark, broker, client):
    [journal] = make_journals(broker, "read/parts", labels={"app": "parts"}, length=2048)
    p = Producer(client)
    for i in range(120):
        p.committed(journal, {"n": i, "pad": "x" * 40})
    wait_persisted(client, journal, 3)
    pieces = plan_pieces(client, journal)
    assert [pc.fragment is not None for pc in pieces][:3] == [True, True, True]
    assert pieces[-1].end == client.write_head(journal)
    assert herald_read(spark, broker, "app=parts").rdd.getNumPartitions() == 1  # Small: packed.
    largest = max(pc.end - pc.begin for pc in pieces)  # Parts of about a piece (test_read_cuts: cuts).
    df = herald_read(spark, broker, "app=parts", maxPartitionBytes=largest)
    assert 1 < df.rdd.getNumPartitions() <= len(pieces)
    rows = df.orderBy("begin").collect()
    assert [r.begin for r in rows[1:]] == [r.end for r in rows[:-1]]  # Contiguous messages.
    assert {r.flags for r in rows} == {0} and len({r.producer for r in rows}) == 1
    assert all(r.uuid and r.value.startswith(b'{"UUID":"' + r.uuid.encode()) for r in rows)


@pytest.mark.parametrize("codec", ["NONE", "GZIP", "SNAPPY", "ZSTANDARD"])
def test_batch_read_of_each_codec_equals_the_broker_read_byte_for_byte(spark, broker, client, codec):
    journal = f"codec/{codec.lower()}"
    make_journals(broker, journal, labels={"codec": codec.lower()}, length=4096, compression_codec=codec)
    p = Producer(client)
    for i in range(0, 300, 10):
        p.committed(journal, *[{"n": n, "s": "é" * (n % 7)} for n in range(i, i + 10)])
    wait_persisted(client, journal, 3)
    rows = herald_read(spark, broker, f"codec={codec.lower()}").orderBy("begin").collect()
    assert b"".join(bytes(r.value) + b"\n" for r in rows) == broker_bytes(client, journal)


@pytest.mark.parametrize("split_bytes", [0, 1, 3000])
def test_read_committed_batch_is_exact_across_fragment_boundaries(spark, broker, client, split_bytes):
    """One partition per journal (0), one per piece (1) or a few: each split
    partition resumes from a driver-computed checkpoint, and together they are exact."""
    [journal] = make_journals(broker, f"read/txn{split_bytes}", labels={"app": f"txn{split_bytes}"}, length=1024)
    a, b, c = Producer(client), Producer(client), Producer(client)
    for i in range(40):
        a.uncommitted(journal, {"n": i, "pad": "y" * 60})            # Spans many fragments...
    b.committed(journal, *[{"n": 100 + i} for i in range(5)])
    dup = b.uncommitted(journal, *[{"n": 200 + i} for i in range(10)])
    client.append(journal, dup)                                      # ...duplicated appends...
    c.uncommitted(journal, *[{"n": 300 + i} for i in range(10)])     # ...a txn never ACKed...
    [ack_b] = b.ack()
    a.ack()                                                          # ...ACK fragments later.
    rolled = a.uncommitted(journal, {"n": 999})
    client.append(journal, ack_b.data)                               # A re-appended ACK: no-op.
    client.append(journal, rolled)
    wait_persisted(client, journal, 3)
    expected = reference_committed(client, journal)
    df = herald_read(spark, broker, f"app=txn{split_bytes}", committed=True, splitBytes=split_bytes)
    got = spark_values(df)
    assert sorted(got) == sorted(expected) and len(got) == 40 + 5 + 10
    pieces = plan_pieces(client, journal)
    assert len(pieces) >= 3
    assert df.rdd.getNumPartitions() == {0: 1, 1: len(pieces)}.get(split_bytes, df.rdd.getNumPartitions())
    assert split_bytes != 3000 or 1 < df.rdd.getNumPartitions() < len(pieces)


def test_empty_selection_reads_no_rows(spark, broker):
    assert herald_read(spark, broker, "app=nothing").count() == 0


@pytest.mark.parametrize("committed", [False, True])
def test_undecodable_lines_fail_the_read_naming_the_offset_or_are_skipped(spark, broker, client, committed):
    journal = f"read/bad-{str(committed).lower()}"
    make_journals(broker, journal, labels={"app": f"bad-{str(committed).lower()}"})
    Producer(client).committed(journal, {"n": 1})
    bad_at = client.write_head(journal)
    client.append(journal, b"not json at all\n")
    Producer(client).committed(journal, {"n": 2})
    selector = f"app=bad-{str(committed).lower()}"
    with pytest.raises(Exception, match=f"offset {bad_at}: journal {journal}: not valid JSON"):
        herald_read(spark, broker, selector, committed=committed).collect()
    rows = herald_read(spark, broker, selector, committed=committed, onDecodeError="skip").collect()
    assert len(rows) == 2 and all(bytes(r.value).startswith(b'{"UUID":') for r in rows)
