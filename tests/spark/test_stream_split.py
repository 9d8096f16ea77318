"""A streaming slice cut into parallel parts (`herald.spark.slices`) yields exactly
what one task over the slice yields [I-SEQ-1], row for row and in order, and
leaves the same snapshot. The reader's driver and task methods are called
directly against a real broker (no Spark session needed: they are plain Python)."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.streaming.datasource import ReadAllAvailable

from herald.spark.options import HeraldOptions
from herald.spark.rows import ARROW_SCHEMA
from herald.spark.slices import MIN_PART_BYTES, TASK_COST_BYTES, StreamSlice, cut_offsets, pack_slices, split_slice
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
    reader = _reader(broker, "app=small", tmp_path, minPartitions="4")  # Below the 32 MiB default part.
    start = reader.initialOffset()
    assert len(reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))) == 1


def test_a_slice_is_cut_only_when_every_part_gets_min_part_bytes():
    """A part beyond the first costs a task and a state-only pass, which a small
    slice's parallel gain does not repay (the bench's 20 MiB slice ran 0.76x split):
    below 2 x 32 MiB a slice stays whole without asking the broker anything."""
    opts = HeraldOptions.parse({"broker": "http://127.0.0.1:9", "selector": "app=x", "stateLocation": "unused"},
                               streaming=True)
    below = StreamSlice(opts, "split/none", "application/x-ndjson", 0, 2 * MIN_PART_BYTES - 1)
    assert MIN_PART_BYTES == 32 << 20
    assert split_slice(None, below, 8, MIN_PART_BYTES) == [below]  # type: ignore[arg-type]  # no client used


def test_cuts_give_earlier_parts_more_bytes_so_parts_cost_the_same():
    cuts = cut_offsets(0, 1000, 2, pass_cost=0.4)
    assert cuts == [625]  # 625 bytes alone = 0.4 * 625 state-only + 375 of its own.
    edges = [0, *cut_offsets(0, 10_000, 4, pass_cost=0.4), 10_000]
    costs = [0.4 * lo + (hi - lo) for lo, hi in zip(edges, edges[1:], strict=False)]
    assert max(costs) - min(costs) < 5
    assert cut_offsets(0, 1000, 3, pass_cost=0.0) == [333, 666]


def test_many_small_slices_are_packed_into_the_tasks_and_read_exactly_as_alone(broker, client, tmp_path):
    journals = make_journals(broker, *[f"pack/j{i}" for i in range(5)], labels={"app": "pack"}, length=1024)
    producer = Producer(client)
    for i, journal in enumerate(journals):
        producer.committed(journal, *[{"n": i * 100 + k} for k in range(20)])
        producer.uncommitted(journal, {"n": i * 100 + 99})  # pending: must stay out of both
    packed = _reader(broker, "app=pack", tmp_path / "packed", minPartitions="2")
    alone = _reader(broker, "app=pack", tmp_path / "alone", minPartitions="5")
    start = packed.initialOffset()
    end, n_packed, got = _batch(packed, start)
    _, n_alone, want = _batch(alone, start)
    assert n_packed == 2 and n_alone == 5
    assert sorted(got.column("value").to_pylist()) == sorted(want.column("value").to_pylist())
    assert sorted(got.column("value").to_pylist()) == sorted(v for j in journals for v in reference_committed(client, j))
    for journal in journals:  # every packed slice saved its own snapshot, as alone
        saved = [SnapshotStore(str(tmp_path / d)).load(journal, end[journal]) for d in ("packed", "alone")]
        assert saved[0] is not None and saved[0] == saved[1]


def test_packing_balances_bytes_and_keeps_large_slices_alone():
    def sl(journal: str, size: int) -> StreamSlice:
        return StreamSlice(None, journal, "", 0, size)  # type: ignore[arg-type]

    few = [sl("a", 10), sl("b", 10)]
    assert pack_slices(few, 2, 1 << 30) == [(few[0],), (few[1],)]  # no more slices than tasks
    small = [sl(f"s{i}", 1000 * (i + 1)) for i in range(8)]
    groups = pack_slices(small, 2, 1 << 30)
    assert len(groups) == 2 and sorted(s.journal for g in groups for s in g) == sorted(s.journal for s in small)
    big = sl("big", 3 * TASK_COST_BYTES)
    groups = pack_slices([big, *small], 2, 2 * TASK_COST_BYTES)
    assert len(groups) == 7  # 12 task-costs and 36,000 bytes, in groups of at most about 2 task-costs
    assert (big,) in groups  # the largest first, alone in its group
    loads = sorted(sum(s.end - s.start for s in g) for g in groups if big not in g)
    assert loads[-1] - loads[0] <= 8000  # the rest spread evenly (within one small slice)
