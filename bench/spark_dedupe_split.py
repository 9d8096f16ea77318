"""The dedupe backlog split by side: which half of the job stands between it and Spark's ceiling.

The job is ``herald source → dedupe → herald sink``. Two hybrids with Spark's
in-memory ``rate-micro-batch`` source, whose rows carry a JSON ``value`` like
the generator's events (≈ 160 bytes, the key inside it, so the herald sink
frames them on the same fast path as the job's output), separate the two sides:

- ``rate → dedupe → noop``: the engine alone (the same query: key, value, t,
  watermark, ``dropDuplicatesWithinWatermark``, value carried to the sink);
- ``rate → dedupe → herald sink``: the exactly-once sink's cost with a free source;
- ``herald source → dedupe → noop`` (`bench.spark_dedupe.NOOP_SINK`): the
  source's cost with a free sink;
- `FloorSource` → dedupe → ``noop``: a Python stream source whose reads cost
  almost nothing, i.e. what PySpark's Python data source machinery alone costs
  (its fresh source runner per query, read tasks, Arrow into the JVM): the
  floor under any Python source, Herald's included.

Every side is one available-now run (one micro-batch of all events, then the
closing no-data batch), timed from building the query to the run's end, as
`bench.spark_dedupe` times the job. The job's ratio to ``rate`` is the product
of the two factors (source: herald→noop ÷ rate→noop; sink: rate→herald ÷
rate→noop), so the source's factor alone is the job's ceiling against ``rate``
however fast the sink gets.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

__all__ = ["PY_FLOOR_NOOP", "RATE_HERALD", "RATE_NOOP", "FloorSource", "python_floor_dedupe", "rate_json_dedupe",
           "run_split", "split_headlines"]

RATE_NOOP = "spark rate (JSON value) + dedupe into noop"
RATE_HERALD = "spark rate (JSON value) + dedupe into herald sink"
#: The generator's event shape (`herald.pipelines.generate`), ≈ 160 bytes.
_TAIL = '","anonymousId":"6f1c2a3b-0d4e-4f5a-a6b7-8c9d0e1f2a3b","timestamp":"2026-01-01T00:00:00.000Z","type":"track"}'


def rate_json_dedupe(spark: Any, events: int, scratch: Path, sink: str = "noop", url: str = "",
                     output: str = "") -> dict[str, float]:
    """``events`` rows of ``rate-micro-batch`` (0.6 % of keys repeated) with a JSON
    ``value``, through the job's dedupe shape into ``noop`` or the herald sink
    (``url``, selector ``output``); events/s end to end and in micro-batches."""
    from pyspark.sql import functions as F

    from herald.pipelines.streaming import prepare_queries

    prepare_queries(spark)
    checkpoint = scratch / f"rate-json-{time.monotonic_ns()}"
    start = time.perf_counter()
    df = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", max(1, events))
          .option("numPartitions", 2).option("startTimestamp", int(time.time() * 1000)).load())
    number = F.when(F.col("value") % 167 == 0, F.col("value") - 1).otherwise(F.col("value"))
    key = F.concat(F.lit("ajs-"), F.lpad(F.hex(number), 32, "0"))
    value = F.concat(F.lit('{"messageId":"'), key, F.lit(_TAIL)).cast("binary")
    deduped = (df.select(key.alias("key"), value.alias("value"), F.col("timestamp").alias("t"))
               .withWatermark("t", "30 minutes").dropDuplicatesWithinWatermark(["key"]).select("key", "value"))
    writer = deduped.writeStream.option("checkpointLocation", str(checkpoint / "query"))
    if sink == "noop":
        writer = writer.format("noop")
    else:
        writer = writer.format("herald").option("broker", url).option("selector", output)
    return _finished(writer.trigger(availableNow=True).start(), start)


def _finished(query: Any, start: float) -> dict[str, float]:
    """Await an available-now ``query`` built from ``start``: events/s end to end
    and in micro-batches, and the seconds outside them."""
    query.awaitTermination()
    elapsed = time.perf_counter() - start
    if query.exception() is not None:
        raise query.exception()
    done = sum(p["numInputRows"] for p in query.recentProgress)
    in_batches = sum(p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress) / 1000
    return {"events_per_s": done / elapsed, "batch_events_per_s": done / in_batches,
            "outside_batches_s": elapsed - in_batches}


def run_split(report: Any, config: Any, spark: Any, url: str, journals: Any, events: int, scratch: Path) -> None:
    """The job, its ``noop`` twin and the two ``rate`` hybrids over ``events``,
    taking turns run by run (after a small warm-up of the hybrids), into ``report``."""
    from bench.runner import measure_interleaved
    from bench.spark_dedupe import JOURNAL_PAIRS, NOOP_SINK, UNITS, _dedupe_backlog

    def rate_herald(count: int) -> dict[str, float]:
        return rate_json_dedupe(spark, count, scratch, "herald", url, journals.make(4)[1])

    rate_json_dedupe(spark, 2000, scratch), rate_herald(2000), python_floor_dedupe(spark, 2000, scratch)
    samples = measure_interleaved(config, {
        PY_FLOOR_NOOP: lambda: python_floor_dedupe(spark, events, scratch),
        "herald": lambda: _dedupe_backlog(spark, url, journals, events, 4, scratch),
        NOOP_SINK: lambda: _dedupe_backlog(spark, url, journals, events, 4, scratch, sink="noop"),
        RATE_NOOP: lambda: rate_json_dedupe(spark, events, scratch),
        RATE_HERALD: lambda: rate_herald(events),
    }, max(JOURNAL_PAIRS, config.runs))
    for system, values in samples.items():
        report.add(system, "dedupe split", {k: v for k, v in values.items() if k != "state_bytes_per_key"}, UNITS)


def split_headlines(report: Any) -> None:
    """The two factors of the job's ratio to ``rate``, end to end and in micro-batches."""
    from bench.spark_dedupe import NOOP_SINK as noop_sink

    for metric, how in (("events_per_s", "end to end"), ("batch_events_per_s", "in micro-batches")):
        report.headline(f"dedupe split, source's factor (the job's ceiling vs rate): herald source → noop vs "
                        f"rate → noop, {how}", (noop_sink, "dedupe split", metric),
                        (RATE_NOOP, "dedupe split", metric))
        report.headline(f"dedupe split, sink's factor: rate → herald sink vs rate → noop, {how}",
                        (RATE_HERALD, "dedupe split", metric), (RATE_NOOP, "dedupe split", metric))
        report.headline(f"dedupe split, any Python stream source's floor: a source making its rows in numpy → noop "
                        f"vs rate → noop, {how}", (PY_FLOOR_NOOP, "dedupe split", metric),
                        (RATE_NOOP, "dedupe split", metric))
        report.headline(f"dedupe split, the job vs rate → noop (same value carried), {how}",
                        ("herald", "dedupe split", metric), (RATE_NOOP, "dedupe split", metric))


# -- the floor of any Python stream source --------------------------------------------------

PY_FLOOR_NOOP = "python source (rows made in numpy) + dedupe into noop"
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)
_HEAD = np.frombuffer(b'{"messageId":"ajs-', np.uint8)
_BODY = np.frombuffer(_TAIL.encode(), np.uint8)


def _rows(first: int, count: int) -> tuple[pa.Array, pa.Array]:
    """Keys ``ajs-<32 hex>`` and JSON values like `rate_json_dedupe`'s, for rows
    ``first .. first + count`` (every 167th repeats the one before), built in numpy
    as fixed-width buffers: no Python object per row."""
    number = np.arange(first, first + count, dtype=np.uint64)
    number[number % 167 == 0] -= 1
    shifts = np.arange(28, -4, -4, dtype=np.uint64)  # 8 hex digits of the low 32 bits, the rest zeros
    digits = np.full((count, 32), ord("0"), np.uint8)
    digits[:, 24:] = _HEX[((number[:, None] >> shifts) & np.uint64(0xF)).astype(np.intp)]
    key = np.concatenate([np.broadcast_to(_HEAD[-4:], (count, 4)), digits], axis=1)
    value = np.concatenate([np.broadcast_to(_HEAD, (count, len(_HEAD))), digits,
                            np.broadcast_to(_BODY, (count, len(_BODY)))], axis=1)

    def fixed(kind: pa.DataType, matrix: np.ndarray) -> pa.Array:
        offsets = np.arange(count + 1, dtype=np.int32) * np.int32(matrix.shape[1])
        return pa.Array.from_buffers(kind, count, [None, pa.py_buffer(offsets), pa.py_buffer(matrix.tobytes())])

    return fixed(pa.string(), key), fixed(pa.binary(), value)


class _FloorReader(DataSourceStreamReader):
    """All ``rows`` in the first micro-batch, in ``partitions`` parts; nothing after."""

    def __init__(self, rows: int, partitions: int, t_ms: int) -> None:
        self.rows, self.parts, self.t_ms = rows, partitions, t_ms

    def initialOffset(self) -> dict:
        return {"n": 0}

    def latestOffset(self, start: dict, limit: Any) -> dict:
        return {"n": self.rows}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        lo, hi = start["n"], end["n"]
        step = -(-(hi - lo) // self.parts) if hi > lo else 0
        return [InputPartition((a, min(hi, a + step), self.t_ms)) for a in range(lo, hi, step)] if step else []

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        first, end, t_ms = partition.value
        key, value = _rows(first, end - first)
        t = pa.Array.from_buffers(pa.int64(), end - first, [None, pa.py_buffer(np.full(end - first, t_ms, np.int64))])
        yield pa.RecordBatch.from_arrays([key, value, t], names=["key", "value", "t_ms"])


class FloorSource(DataSource):
    """``format("herald-bench-floor")``: a Python stream source whose reader does
    almost nothing, so a query over it costs what PySpark's Python data source
    machinery costs (the source runner, the read tasks, Arrow into the JVM)."""

    @classmethod
    def name(cls) -> str:
        return "herald-bench-floor"

    def schema(self) -> str:
        return "key string, value binary, t_ms long"

    def streamReader(self, schema: object) -> DataSourceStreamReader:
        return _FloorReader(int(self.options["rows"]), int(self.options.get("partitions", "4")),
                            int(self.options["t_ms"]))


def python_floor_dedupe(spark: Any, events: int, scratch: Path) -> dict[str, float]:
    """``events`` rows of `FloorSource` (4 partitions, as the job reads 4 journals)
    through the job's dedupe shape into ``noop``; events/s as `rate_json_dedupe`."""
    from pyspark.sql import functions as F

    from herald.pipelines.streaming import prepare_queries

    prepare_queries(spark)
    spark.dataSource.register(FloorSource)
    checkpoint = scratch / f"py-floor-{time.monotonic_ns()}"
    start = time.perf_counter()
    df = (spark.readStream.format(FloorSource.name()).option("rows", str(max(1, events)))
          .option("t_ms", str(int(time.time() * 1000))).load())
    deduped = (df.select("key", "value", F.timestamp_millis("t_ms").alias("t")).withWatermark("t", "30 minutes")
               .dropDuplicatesWithinWatermark(["key"]).select("key", "value"))
    query = (deduped.writeStream.format("noop").option("checkpointLocation", str(checkpoint / "query"))
             .trigger(availableNow=True).start())
    return _finished(query, start)
