"""A read task's snapshot saves run beside its reading (`BackgroundSaves`) and its
slices share the worker's kept client (`herald.spark.kept`): the task still ends
only once every snapshot is durable, a failed save fails it, and a slice read
that way yields and saves exactly what a slice read alone, saving in line, does."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from herald.message import Checkpoint
from herald.spark.kept import drop_worker_client, worker_client
from herald.spark.options import HeraldOptions
from herald.spark.slices import StreamSlice, read_slice
from herald.spark.source import StreamReader
from herald.spark.state import BackgroundSaves, Snapshot, SnapshotStore
from herald.testing import Producer, make_journals


def _opts(broker, selector: str, state, **extra: str) -> HeraldOptions:
    return HeraldOptions.parse({"broker": broker.url, "selector": selector, "stateLocation": str(state), **extra},
                               streaming=True)


def test_background_saves_are_on_disk_once_waited_for(tmp_path):
    store = SnapshotStore(str(tmp_path))
    snapshots = {offset: Snapshot(offset + 7, Checkpoint({})) for offset in (100, 200, 300)}
    with BackgroundSaves() as saves:
        for offset, snap in snapshots.items():
            saves.save(store, "a/journal", offset, snap)
        saves.wait()
    assert {offset: store.load("a/journal", offset) for offset in snapshots} == snapshots


def test_a_failed_background_save_fails_the_wait(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_bytes(b"a file where the state directory should go")
    with BackgroundSaves() as saves:
        saves.save(SnapshotStore(str(blocker)), "j", 1, Snapshot(1, Checkpoint({})))
        with pytest.raises(OSError):
            saves.wait()


def test_leaving_the_block_on_a_failure_still_waits_for_the_saves_started(tmp_path):
    store = SnapshotStore(str(tmp_path))
    snap = Snapshot(9, Checkpoint({}))
    with pytest.raises(RuntimeError, match="a read failed"), BackgroundSaves() as saves:
        saves.save(store, "j", 1, snap)
        raise RuntimeError("a read failed")
    assert store.load("j", 1) == snap


def test_packed_slices_on_the_kept_client_with_background_saves_equal_slices_read_alone(broker, client, tmp_path):
    journals = make_journals(broker, "saves/j0", "saves/j1", "saves/j2", labels={"app": "saves"}, length=1024)
    producer = Producer(client)
    for i, journal in enumerate(journals):
        for k in range(30):  # several fragments, and several blocks' worth of appends
            producer.committed(journal, {"n": i * 1000 + k, "pad": "x" * 80})
        producer.uncommitted(journal, {"n": i * 1000 + 999})  # pending: stays out, and in the snapshot
    reader = StreamReader(_opts(broker, "app=saves", tmp_path / "task", minPartitions="1"))
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    [task] = reader.partitions(start, end)  # one task: the three slices packed
    assert len(task.value) == 3
    kept = worker_client(reader.opts, "read")
    got = pa.Table.from_batches(list(reader.read(task)))
    assert worker_client(reader.opts, "read") is kept  # the task used the worker's client and kept it

    alone = SnapshotStore(str(tmp_path / "alone"))
    for part in task.value:
        solo = StreamSlice(_opts(broker, "app=saves", tmp_path / "alone"), part.journal, part.content_type,
                           part.start, part.end)
        want = pa.Table.from_batches(list(read_slice(solo)))  # its own client, the save in line
        mine = got.filter(pc.equal(got.column("journal"), part.journal))
        assert mine.column("value").to_pylist() == want.column("value").to_pylist()
        saved = SnapshotStore(str(tmp_path / "task")).load(part.journal, part.end)
        assert saved is not None and saved == alone.load(part.journal, part.end)
    drop_worker_client(reader.opts, "read")
