"""A streaming slice cut into parallel parts (`herald.spark.slices`) yields exactly
what one task over the slice yields [I-SEQ-1], row for row and in order, and
leaves the same snapshot. The reader's driver and task methods are called
directly against a real broker (no Spark session needed: they are plain Python)."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.streaming.datasource import ReadAllAvailable

from herald.spark.options import HeraldOptions
from herald.spark.rows import ARROW_SCHEMA
from herald.spark.slices import cut_offsets
from herald.spark.source import StreamReader
from herald.spark.state import SnapshotStore
from herald.testing import Producer, make_journals
from tests.spark.spark_helpers import reference_committed


def _reader(broker, selector: str, state, **options: str) -> StreamReader:
    opts = {"broker": broker.url, "selector": selector, "stateLocation": str(state), **options}
    return StreamReader(HeraldOptions.parse(opts, streaming=True))


def _batch(reader: StreamReader, start: dict) -> tuple[dict, int, pa.Table]:
    """One micro-batch as Spark runs it: plan, then every part's task (the last
    part, which saves the snapshot, runs first here: parts are independent)."""
    end = reader.latestOffset(start, ReadAllAvailable())
    parts = reader.partitions(start, end)
    tables = {id(p): pa.Table.from_batches(list(reader.read(p)), schema=ARROW_SCHEMA) for p in reversed(parts)}
    return end, len(parts), pa.concat_tables([tables[id(p)] for p in parts])


def test_split_parts_equal_one_task_across_transactions_and_batches(broker, client, tmp_path):
    [journal] = make_journals(broker, "split/a", labels={"app": "split"}, length=1024)
    a, b, c = Producer(client), Producer(client), Producer(client)
    for i in range(40):
        a.uncommitted(journal, {"n": i, "pad": "y" * 60})            # A txn over many fragments...
    b.committed(journal, *[{"n": 100 + i} for i in range(5)])
    client.append(journal, b.uncommitted(journal, *[{"n": 200 + i} for i in range(10)]))  # ...a duplicate...
    c.uncommitted(journal, *[{"n": 300 + i} for i in range(10)])     # ...a txn never ACKed...
    [ack_b] = b.ack()
    for i in range(30):
        b.committed(journal, {"n": 400 + i, "pad": "z" * 60})
    a.ack()                                                          # ...its ACK fragments later.

    split = _reader(broker, "app=split", tmp_path / "split", splitBytes="1", minPartitions="4")
    whole = _reader(broker, "app=split", tmp_path / "whole", minPartitions="1")
    start = split.initialOffset()
    end, n_parts, got = _batch(split, start)
    end_whole, n_whole, want = _batch(whole, start)
    assert n_parts >= 3 and n_whole == 1 and end == end_whole  # 4 cuts, some may land on one boundary
    assert got.equals(want)
    assert sorted(got.column("value").to_pylist()) == sorted(reference_committed(client, journal))

    rolled = c.uncommitted(journal, {"n": 999})                      # Second batch: a rollback,
    client.append(journal, ack_b.data)                               # (a re-appended ACK)
    client.append(journal, rolled)
    c.ack()                                                          # and a txn open across the batches.
    for i in range(30):
        a.committed(journal, {"n": 500 + i, "pad": "w" * 60})
    end2, n_parts, got = _batch(split, end)
    _, _, want = _batch(whole, end)
    assert n_parts >= 2 and got.equals(want)
    saved = [SnapshotStore(str(tmp_path / d)).load(journal, end2[journal]) for d in ("split", "whole")]
    assert saved[0] is not None and saved[0] == saved[1]


def test_small_slices_and_other_framings_stay_whole(broker, client, tmp_path):
    [journal] = make_journals(broker, "split/small", labels={"app": "small"}, length=1024)
    Producer(client).committed(journal, *[{"n": i} for i in range(50)])
    reader = _reader(broker, "app=small", tmp_path, minPartitions="4")  # Below the 8 MiB default part.
    start = reader.initialOffset()
    assert len(reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))) == 1


def test_cuts_give_earlier_parts_more_bytes_so_parts_cost_the_same():
    cuts = cut_offsets(0, 1000, 2, pass_cost=0.4)
    assert cuts == [625]  # 625 bytes alone = 0.4 * 625 state-only + 375 of its own.
    edges = [0, *cut_offsets(0, 10_000, 4, pass_cost=0.4), 10_000]
    costs = [0.4 * lo + (hi - lo) for lo, hi in zip(edges, edges[1:], strict=False)]
    assert max(costs) - min(costs) < 5
    assert cut_offsets(0, 1000, 3, pass_cost=0.0) == [333, 666]
