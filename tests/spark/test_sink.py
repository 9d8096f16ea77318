"""The exactly-once sink and the batch writer of format ``herald`` [I-SINK-1]."""

from __future__ import annotations

import dataclasses
import json
import pickle
import threading

import pyarrow as pa
import pytest

from herald.message import modulo_mapping
from herald.protocol.errors import HeraldError
from herald.spark import sink_tasks
from herald.spark.datasource import HeraldDataSource
from herald.spark.options import HeraldOptions
from herald.spark.sink import FencedError, SinkCommit, SinkLog, commit_batch, plan_journals
from herald.spark.sink_tasks import publish_rows
from herald.testing import Producer, make_journals
from tests.spark.spark_helpers import broker_bytes, herald_read, reference_committed

pytestmark = pytest.mark.spark


def _bodies(values) -> list[int]:
    """The ``n`` of each message, its UUID dropped (outputs carry new UUIDs)."""
    return sorted(json.loads(v)["n"] for v in values)


def _copy_stream(spark, broker, ck, src: str, dst: str, **sink_options):
    df = (spark.readStream.format("herald").option("broker", broker.url).option("selector", src)
          .option("stateLocation", str(ck)).option("maxBytesPerTrigger", "2000").load())
    writer = (df.select("value").writeStream.format("herald").option("broker", broker.url)
              .option("selector", dst).option("checkpointLocation", str(ck)))
    for k, v in sink_options.items():
        writer = writer.option(k, str(v))
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()


def _committed_outputs(client, journals) -> list[bytes]:
    return [v for j in journals for v in reference_committed(client, j)]


def test_stream_copy_is_exactly_once_and_a_rerun_batch_publishes_nothing_new(spark, broker, client, tmp_path):
    [src] = make_journals(broker, "sink1/in", labels={"app": "sink1-in"})
    outs = make_journals(broker, "sink1/out-0", "sink1/out-1", labels={"app": "sink1-out"})
    p, q = Producer(client), Producer(client)
    p.committed(src, *[{"n": i} for i in range(50)])
    q.uncommitted(src, *[{"n": 100 + i} for i in range(30)])
    q.ack()
    ck = tmp_path / "ck"
    _copy_stream(spark, broker, ck, "app=sink1-in", "app=sink1-out")
    expected = list(range(50)) + list(range(100, 130))
    assert _bodies(_committed_outputs(client, outs)) == expected

    last = max(int(f.name) for f in (ck / "commits").iterdir() if f.name.isdigit())
    for name in (str(last), f".{last}.crc"):  # The driver "died" after the sink commit.
        (ck / "commits" / name).unlink(missing_ok=True)
    before = herald_read(spark, broker, "app=sink1-out").count()
    _copy_stream(spark, broker, ck, "app=sink1-in", "app=sink1-out")
    assert herald_read(spark, broker, "app=sink1-out").count() > before  # The replay wrote again...
    assert _bodies(_committed_outputs(client, outs)) == expected  # ...but nothing new committed.


def test_task_failing_its_first_attempt_still_yields_exactly_once(spark, broker, client, tmp_path):
    from pyspark.sql.functions import col, udf

    [src] = make_journals(broker, "sink2/in", labels={"app": "sink2-in"})
    [out] = make_journals(broker, "sink2/out", labels={"app": "sink2-out"})
    Producer(client).committed(src, *[{"n": i} for i in range(400)])

    @udf("binary")
    def fail_first_attempt(value):
        from pyspark import TaskContext

        if TaskContext.get().attemptNumber() == 0 and json.loads(value)["n"] == 300:
            raise RuntimeError("injected failure on the first attempt")
        return value

    ck = tmp_path / "ck"
    df = (spark.readStream.format("herald").option("broker", broker.url).option("selector", "app=sink2-in")
          .option("stateLocation", str(ck)).load())
    query = (df.select(fail_first_attempt(col("value")).alias("value")).writeStream.format("herald")
             .option("broker", broker.url).option("selector", "app=sink2-out").option("appendBytes", "1")
             .option("checkpointLocation", str(ck)).trigger(availableNow=True).start())
    query.awaitTermination()
    assert _bodies(reference_committed(client, out)) == list(range(400))
    raw = herald_read(spark, broker, "app=sink2-out").count()
    assert raw > 400 + 1  # The failed attempt's messages are there, uncommitted.


def test_a_fenced_zombie_driver_cannot_commit(broker, client, tmp_path):
    [out] = make_journals(broker, "sink3/out", labels={"app": "sink3"})
    opts = HeraldOptions.parse({"broker": broker.url, "selector": "app=sink3",
                                "checkpointLocation": str(tmp_path)}, streaming=True)
    old, new = "0123456789abcdef", "fedcba9876543210"

    def batch(*ns):
        rows = pa.RecordBatch.from_pydict({"value": [json.dumps({"n": n}) for n in ns]})
        return publish_rows(opts, [rows], seed=1)

    commit_batch(opts, old, [batch(1, 2)], 0)
    zombie_msg = batch(3, 4)  # The old driver is mid-batch 1 when the new one takes over.
    commit_batch(opts, new, [], 0)  # Recovery: re-append batch 0's intents, fence.
    with pytest.raises(FencedError):
        commit_batch(opts, old, [zombie_msg], 1)
    with pytest.raises(HeraldError) as err:  # The broker fences it too [I-REG-1].
        client.append(out, zombie_msg.intents[0][1], check_registers=f"herald-sink={old}")
    assert err.value.status.name == "REGISTER_MISMATCH"
    commit_batch(opts, new, [batch(5)], 1)
    assert _bodies(reference_committed(client, out)) == [1, 2, 5]


def test_empty_tasks_and_batches_touch_neither_brokers_nor_records(broker, client, tmp_path):
    [out] = make_journals(broker, "sink6/out", labels={"app": "sink6"})
    opts = HeraldOptions.parse({"broker": broker.url, "selector": "app=sink6",
                                "checkpointLocation": str(tmp_path)}, streaming=True)
    nowhere = HeraldOptions.parse({"broker": broker.url, "selector": "app=nowhere"}, streaming=False)
    empty = pa.RecordBatch.from_pydict({"value": pa.array([], pa.string())})
    assert publish_rows(nowhere, [empty, empty], seed=1) == SinkCommit()  # Never asked the broker.
    with pytest.raises(HeraldError, match="matches no journals"):
        publish_rows(nowhere, [empty, pa.RecordBatch.from_pydict({"value": ['{"n":0}']})], seed=1)

    def batch(*ns):
        rows = pa.RecordBatch.from_pydict({"value": [json.dumps({"n": n}) for n in ns]})
        return publish_rows(opts, [empty, rows, empty], seed=1)

    token = "0123456789abcdef"
    commit_batch(opts, token, [batch(1, 2)], 0)
    written = broker_bytes(client, out)
    commit_batch(opts, token, [publish_rows(opts, [empty], seed=2), None], 1)  # An idle micro-batch.
    assert SinkLog(str(tmp_path)).last().batch_id == 0
    assert broker_bytes(client, out) == written  # Not one byte appended.
    abandoned = batch(3)  # Published in batch 2 by a driver that dies before committing it.
    commit_batch(opts, "fedcba9876543210", [batch(4)], 2)  # The next driver recovers batch 0, then commits.
    assert abandoned.rows == 1
    assert _bodies(reference_committed(client, out)) == [1, 2, 4]


def test_sink_maps_keys_to_journals_with_the_modulo_mapping(spark, broker, client, tmp_path):
    outs = make_journals(broker, "sink4/out-0", "sink4/out-1", "sink4/out-2", labels={"app": "sink4"})
    rows = [(json.dumps({"n": i}), f"user-{i}") for i in range(60)]
    (spark.createDataFrame(rows, "value string, key string").repartition(3).write.format("herald")
     .option("broker", broker.url).option("selector", "app=sink4").mode("append").save())
    for journal in outs:
        got = _bodies(reference_committed(client, journal))
        assert got == sorted(i for i in range(60) if modulo_mapping(f"user-{i}".encode(), outs) == journal)


def test_batch_write_is_one_transaction_all_or_nothing(spark, broker, client):
    from pyspark.sql.functions import col, udf

    [out] = make_journals(broker, "sink5/out", labels={"app": "sink5"})
    df = spark.createDataFrame([(json.dumps({"n": i}),) for i in range(100)], "value string").repartition(4)

    @udf("string")
    def explode_on_99(value):
        if json.loads(value)["n"] == 99:
            raise RuntimeError("injected failure")
        return value

    with pytest.raises(Exception):  # noqa: B017 — Spark wraps the task's error in its own type
        (df.select(explode_on_99(col("value")).alias("value")).write.format("herald")
         .option("broker", broker.url).option("selector", "app=sink5").option("appendBytes", "1")
         .mode("append").save())
    assert reference_committed(client, out) == []  # None visible...
    df.write.format("herald").option("broker", broker.url).option("selector", "app=sink5").mode("append").save()
    assert _bodies(reference_committed(client, out)) == list(range(100))  # ...then all.


def test_a_journal_joining_the_selector_is_written_from_the_next_micro_batch(spark, broker, client, tmp_path):
    """Each micro-batch's planner lists the selected journals once and ships the
    list to its tasks (`plan_journals`): a journal created while the query runs
    receives rows from the next micro-batch on, exactly once like the others."""
    [first] = make_journals(broker, "sink7/out-0", labels={"app": "sink7"})
    src = tmp_path / "in"
    src.mkdir()

    def add_file(name: str, ns: range) -> None:  # Renamed in: the file source never sees half a file.
        (tmp_path / name).write_text("\n".join(json.dumps({"n": n}) for n in ns) + "\n")
        (tmp_path / name).rename(src / name)

    add_file("a.txt", range(40))
    query = (spark.readStream.text(str(src)).writeStream.format("herald").option("broker", broker.url)
             .option("selector", "app=sink7").option("mapping", "random")
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        query.processAllAvailable()
        assert _bodies(reference_committed(client, first)) == list(range(40))
        [second] = make_journals(broker, "sink7/out-1", labels={"app": "sink7"})
        add_file("b.txt", range(40, 100))
        query.processAllAvailable()
    finally:
        query.stop()
    later = reference_committed(client, second)
    assert later  # 60 rows drawn at random over two journals: all on one has odds 2⁻⁶⁰.
    assert _bodies(_committed_outputs(client, [first, second])) == list(range(100))


def test_a_stream_writer_is_built_with_its_journals_and_pickles_without_io(broker, tmp_path):
    """The planner's StreamWriter, pickled for the tasks, carries the output
    journals listed once, when it is built: pickling it asks no broker (it used to
    list there, a broker call hidden inside ``pickle.dumps``)."""
    [out] = make_journals(broker, "sink8/out", labels={"app": "sink8"})
    options = {"broker": broker.url, "selector": "app=sink8", "checkpointLocation": str(tmp_path)}
    writer = HeraldDataSource(options).streamWriter(None, False)
    assert writer.journals is not None and [j.name for j in writer.journals] == [out]
    broker.kill()  # from here on any broker call would fail
    shipped = pickle.loads(pickle.dumps(writer))
    assert shipped.journals == writer.journals and shipped.opts == writer.opts


def test_a_worker_keeps_its_append_service_from_task_to_task(broker, client, tmp_path):
    """PySpark reuses a Python worker for the next task: the next task publishes
    through the same sender threads and plain connections, one per journal (not
    one thread and connection per journal again); other journals replace them; a
    failed task leaves none behind."""
    outs = make_journals(broker, "sink8/out-0", "sink8/out-1", labels={"app": "sink8"})
    opts = HeraldOptions.parse({"broker": broker.url, "selector": "app=sink8",
                                "checkpointLocation": str(tmp_path)}, streaming=True)
    journals = plan_journals(opts)

    def batch(ns, seed, to=journals):
        rows = pa.RecordBatch.from_pydict({"value": [json.dumps({"n": n}) for n in ns]})
        return publish_rows(opts, [rows], seed=seed, journals=to)

    def senders() -> set[int | None]:
        return {t.ident for t in threading.enumerate() if t.name.startswith("herald-append:sink8/")}

    def connections() -> dict[str, int]:  # the service's plain connection of each journal (http://)
        held = sink_tasks._held
        assert held is not None and held[2].connection_per_journal
        return {journal: id(q.conn) for journal, q in held[2]._queues.items() if q.conn is not None}

    first = batch(range(20), 1)
    kept, conns = senders(), connections()
    assert len(kept) == 2
    assert sorted(conns) == ["sink8/out-0", "sink8/out-1"]
    second = batch(range(20, 40), 2)
    assert senders() == kept
    assert connections() == conns
    commit_batch(opts, "0123456789abcdef", [first, second], 0)
    assert _bodies(_committed_outputs(client, outs)) == list(range(40))

    gone = dataclasses.replace(journals[0], spec=dataclasses.replace(journals[0].spec, name="sink8/missing"))
    with pytest.raises(HeraldError) as err:  # Its planner listed a journal deleted since.
        batch(range(40, 60), 3, (gone,))
    assert err.value.status.name == "JOURNAL_NOT_FOUND"
    for thread in [t for t in threading.enumerate() if t.ident in senders()]:
        # The kept ones, replaced by the failed task's service, and that service's own:
        # it was stopped without waiting (`_drop_service`), so its threads end soon after.
        thread.join(5)
    assert not senders()
