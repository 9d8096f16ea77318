"""Benchmark 4 — Spark (format ``herald``, local[2]) and dedupe scaling.

- batch read rows/s (raw, per-fragment partitions) vs Spark's ``text`` source
  over the same bytes (the journal's content written as plain files), and vs
  format ``herald-ceiling`` (`bench.spark_ceiling`: pre-built Arrow batches of
  the same schema, no Herald work — the Python data source API's own ceiling);
- streaming read-committed rows/s (availableNow, one query, wall time from start
  to finish) vs Spark's streaming ``text`` source over the same files;
- sink rows/s (the batch writer: one transaction) vs Spark's ``text`` sink;
- dedupe end to end: events/s over a backlog (available-now), and p50/p99 latency
  from append to deduplicated output with events arriving at a steady rate and
  the query triggered every second (measured by the audit from UUID clocks);
  reference: ``dropDuplicatesWithinWatermark`` over the in-memory
  ``rate-micro-batch`` source into ``noop`` (the engine's own ceiling), and the
  same dedupe query into ``noop`` instead of the exactly-once sink (its cost);
  both sides warmed up first (the first stateful query loads RocksDB);
- dedupe events/s as input journals go 1 → 4 → 16 (full mode only).

Every Spark figure includes query start-up; rows/s are rows ÷ wall time. With
--quick each figure is one run (Spark's start-up alone would eat the budget),
and the steady-state latency and journal scaling runs are skipped.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.runner import Config, Report, measure_interleaved, remove_tree
from bench.servers import apply, bench_spec, herald_broker, wait_until

__all__ = ["run", "spark_session"]

CEILING = "python source ceiling"
NOOP_SINK = "herald dedupe query into noop"
UNITS = {"rows_per_s": "rows/s", "events_per_s": "events/s", "p50_ms": "ms", "p99_ms": "ms"}
READ_FRAGMENT_BYTES = 16 << 20
DEDUPE_WINDOW = "1h"


def spark_session() -> Any:
    """local[2], no UI, RocksDB state with changelog checkpointing (as the dedupe
    pipeline runs), workers on this interpreter, format ``herald`` registered."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    root = str(Path(__file__).resolve().parents[1])  # Workers import bench.spark_ceiling.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    import herald.spark
    from herald.pipelines.streaming import ROCKSDB_PROVIDER

    spark = (SparkSession.builder.master("local[2]").appName("herald-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.memory", "3g")
             .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
             .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    herald.spark.register(spark)
    from bench.spark_ceiling import CeilingSource

    spark.dataSource.register(CeilingSource)
    return spark


def run(config: Config) -> Report:
    report = Report("spark", config)
    scratch = config.scratch("spark")
    spark = None
    try:
        with herald_broker(scratch) as broker:
            spark = _phase("spark session", spark_session)
            _phase("warm-up job", lambda: spark.range(1000).selectExpr("sum(id)").collect())
            rows = config.scale(600_000, 100_000)
            report.inputs.update(spark="local[2]", read_rows=rows, read_fragment_bytes=READ_FRAGMENT_BYTES)
            text_dir = _phase("fill", lambda: _fill_read_journal(broker.url, "bench/spark-read", rows, scratch))
            _phase("warm-up herald read", lambda: _warm_up(spark, broker.url, scratch))
            _phase("reads", lambda: _reads(report, config, spark, broker.url, text_dir, rows, scratch))
            _phase("sink", lambda: _sink(report, config, spark, broker.url, scratch))
            _phase("dedupe", lambda: _dedupe(report, config, spark, broker.url, scratch))
    finally:
        if spark is not None:
            spark.stop()
        remove_tree(scratch)
    _headlines(report)
    return report


# -- data -------------------------------------------------------------------------------------


def _fill_read_journal(url: str, journal: str, rows: int, scratch: Path) -> Path:
    """``rows`` committed ~200-byte messages (stamped by PublisherCore, appended in
    4 MiB blocks); the same content written as plain NDJSON files, one per fragment."""
    from bench.publish import framed_messages
    from herald.client import BrokerClient, RetryReader
    from herald.message import Clock, NDJSONFraming, ProducerID, PublisherCore

    apply(url, bench_spec(journal, length=READ_FRAGMENT_BYTES))
    core = PublisherCore(ProducerID.new(os.urandom(6)), Clock.from_unix_ns(time.time_ns()))
    framing, bodies = NDJSONFraming(), framed_messages()
    text_dir = scratch / "text"
    text_dir.mkdir(parents=True)
    with BrokerClient(url, timeout_s=120) as client:
        block = bytearray()
        for i in range(rows):
            block += core.stamp_committed(journal, framing, bodies[i % len(bodies)])
            if len(block) >= 4 << 20 or i == rows - 1:
                client.append(journal, bytes(block))
                block.clear()
        for n, info in enumerate(client.fragments(journal)):
            frag = info.fragment
            with open(text_dir / f"part-{n:04d}.json", "wb") as out:
                reader = RetryReader(client, journal, frag.begin, block=False, end_offset=frag.end)
                out.writelines(chunk for _, chunk in reader)
    return text_dir


def _phase(name: str, fn):
    """Run ``fn``, telling stderr how long it took (Spark phases are long)."""
    start = time.perf_counter()
    value = fn()
    print(f"bench: spark {name}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return value


def _runs(config: Config) -> int:
    return 1 if config.quick else config.runs


def _warm_up(spark: Any, url: str, scratch: Path) -> None:
    """Start Spark's Python workers (and their imports) outside the timed runs:
    a small read and write of format ``herald``."""
    _fill_read_journal(url, "bench/spark-warm", 1000, scratch / "warm")
    df = spark.read.format("herald").option("broker", url).option("selector", "name=bench/spark-warm").load()
    df.write.format("noop").mode("overwrite").save()
    df.select("value").write.format("herald").option("broker", url).option("selector", "name=bench/spark-warm") \
        .option("mapping", "random").mode("append").save()


def _wall(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# -- reads and sink ---------------------------------------------------------------------------


def _reads(report: Report, config: Config, spark: Any, url: str, text_dir: Path, rows: int,
           scratch: Path) -> None:
    def herald_batch():
        df = spark.read.format("herald").option("broker", url).option("selector", "name=bench/spark-read").load()
        return {"rows_per_s": rows / _wall(lambda: df.write.format("noop").mode("overwrite").save())}

    def text_batch():
        df = spark.read.text(str(text_dir))
        return {"rows_per_s": rows / _wall(lambda: df.write.format("noop").mode("overwrite").save())}

    parts = spark.read.format("herald").option("broker", url).option("selector", "name=bench/spark-read") \
        .load().rdd.getNumPartitions()

    def ceiling_batch():
        df = spark.read.format("herald-ceiling").option("rows", rows).option("partitions", parts).load()
        return {"rows_per_s": rows / _wall(lambda: df.write.format("noop").mode("overwrite").save())}

    samples = measure_interleaved(config, {"herald": herald_batch, "spark text": text_batch,
                                           CEILING: ceiling_batch}, _runs(config))
    for system, values in samples.items():
        report.add(system, "batch read", values, UNITS)

    counter = iter(range(10**6))

    def herald_stream():
        state = scratch / f"stream-{next(counter)}"
        df = (spark.readStream.format("herald").option("broker", url).option("selector", "name=bench/spark-read")
              .option("stateLocation", str(state)).load())
        return {"rows_per_s": rows / _wall(lambda: _available_now(df, state))}

    def text_stream():
        state = scratch / f"stream-{next(counter)}"
        df = spark.readStream.schema("value string").text(str(text_dir))
        return {"rows_per_s": rows / _wall(lambda: _available_now(df, state))}

    samples = measure_interleaved(config, {"herald": herald_stream, "spark text": text_stream}, _runs(config))
    for system, values in samples.items():
        report.add(system, "streaming read-committed", values, UNITS)


def _available_now(df: Any, checkpoint: Path) -> None:
    query = (df.writeStream.format("noop").option("checkpointLocation", str(checkpoint / "query"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    if query.exception() is not None:
        raise query.exception()


def _sink(report: Report, config: Config, spark: Any, url: str, scratch: Path) -> None:
    from pyspark.sql import functions as F

    rows = config.scale(300_000, 60_000)
    apply(url, *(bench_spec(f"bench/spark-sink/{i}") for i in range(2)))
    df = spark.range(rows, numPartitions=2).select(F.format_string(
        '{"messageId":"m-%d","type":"track","event":"Order Completed","properties":{"sku":"SKU-%d",'
        '"revenue":%d.5,"currency":"EUR"}}', "id", "id", "id").alias("value")).cache()
    df.count()
    counter = iter(range(10**6))

    def herald_sink():
        writer = (df.write.format("herald").option("broker", url).option("selector", "prefix=bench/spark-sink/")
                  .option("mapping", "random").mode("append"))
        return {"rows_per_s": rows / _wall(writer.save)}

    def text_sink():
        path = scratch / f"sink-text-{next(counter)}"
        return {"rows_per_s": rows / _wall(lambda: df.write.mode("overwrite").text(str(path)))}

    samples = measure_interleaved(config, {"herald": herald_sink, "spark text": text_sink}, _runs(config))
    for system, values in samples.items():
        report.add(system, "sink (batch write)", values, UNITS)
    df.unpersist()
    report.inputs["sink_rows"] = rows


# -- dedupe -----------------------------------------------------------------------------------


class _Journals:
    """Fresh input/output journal sets per dedupe run."""

    def __init__(self, url: str) -> None:
        self.url, self.n = url, 0

    def make(self, count: int) -> tuple[str, str]:
        self.n += 1
        names = [f"bench/dd{self.n}-{side}/{i:02d}" for side in ("in", "out") for i in range(count)]
        apply(self.url, *(bench_spec(name) for name in names))
        return f"prefix=bench/dd{self.n}-in/", f"prefix=bench/dd{self.n}-out/"


def _dedupe(report: Report, config: Config, spark: Any, url: str, scratch: Path) -> None:
    journals = _Journals(url)
    events = config.scale(150_000, 30_000)
    report.inputs.update(dedupe_events=events, dedupe_window=DEDUPE_WINDOW, dup_rate=0.006)
    # The session's first stateful query loads RocksDB and starts the sink's and
    # the state's workers (tens of seconds here): warm both sides first, so the
    # figures compare steady throughput, not whichever query happened to run first.
    _phase("warm-up dedupe", lambda: (_dedupe_backlog(spark, url, journals, 2000, 4, scratch),
                                      _dedupe_backlog(spark, url, journals, 2000, 4, scratch, sink="noop"),
                                      _rate_dedupe(spark, 2000, scratch)))
    samples = measure_interleaved(config, {
        "herald": lambda: _dedupe_backlog(spark, url, journals, events, 4, scratch),
        NOOP_SINK: lambda: _dedupe_backlog(spark, url, journals, events, 4, scratch, sink="noop"),
        "spark rate + dropDuplicatesWithinWatermark": lambda: _rate_dedupe(spark, events, scratch),
    }, _runs(config))
    for system, values in samples.items():
        report.add(system, "dedupe backlog", values, UNITS)
    if config.quick:
        report.note("quick: steady-state dedupe latency and dedupe journal scaling skipped")
        return
    report.add("herald", "dedupe steady", _dedupe_latency(config, spark, url, journals, scratch), UNITS)
    report.add("trigger interval", "dedupe steady", {"p99_ms": [1000.0]}, UNITS)
    for count in (1, 4, 16):  # one run each: these are the slowest figures of all
        samples = {"events_per_s": [_dedupe_backlog(spark, url, journals, events, count, scratch)["events_per_s"]]}
        report.add("herald", f"dedupe {count} journal{'s' * (count > 1)}", samples, UNITS)


def _settings(url: str, inp: str, out: str, checkpoint: Path, trigger: str):
    from herald.pipelines.dedupe import DedupeSettings, parse_window

    return DedupeSettings(broker=url, input=inp, output=out, checkpoint=str(checkpoint),
                          window_s=parse_window(DEDUPE_WINDOW), min_window_s=60.0, trigger=trigger)


def _dedupe_backlog(spark: Any, url: str, journals: _Journals, events: int, count: int,
                    scratch: Path, sink: str = "herald") -> dict[str, float]:
    """Generate ``events`` (+0.6 % retries) first, then one available-now run over
    them: the dedupe job (``sink="herald"``, exactly once) or the same query into
    Spark's ``noop`` sink (what exactly-once costs is the difference)."""
    from herald.client import BrokerClient
    from herald.pipelines.dedupe import run_dedupe
    from herald.pipelines.generate import GeneratorSettings, generate

    inp, out = journals.make(count)
    with BrokerClient(url, timeout_s=120) as client:
        stats = generate(client, inp, GeneratorSettings(count=events, dup_rate=0.006, retry_delay_s=0.5, seed=7))
    total = stats.events + stats.retries
    settings = _settings(url, inp, out, scratch / f"dd-{journals.n}", "available-now")
    if sink == "noop":
        return {"events_per_s": total / _wall(lambda: _dedupe_to_noop(spark, settings))}
    elapsed = _wall(lambda: run_dedupe(spark, settings, report=None))
    return {"events_per_s": total / elapsed}


def _dedupe_to_noop(spark: Any, settings: Any) -> None:
    """The dedupe query (`herald.pipelines.dedupe.dedupe_frame`, same state store)
    written to ``noop`` instead of the exactly-once sink."""
    from herald.pipelines.dedupe import dedupe_frame
    from herald.pipelines.streaming import configure_state_store

    configure_state_store(spark)
    query = (dedupe_frame(spark, settings).writeStream.format("noop")
             .option("checkpointLocation", str(Path(settings.checkpoint) / "query"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    if query.exception() is not None:
        raise query.exception()


def _rate_dedupe(spark: Any, events: int, scratch: Path) -> dict[str, float]:
    """The engine's ceiling: rows from memory, 0.6 % of keys repeated, same state
    store, watermark and operator; sink ``noop``. Batches of ``events / 4`` rows."""
    from pyspark.sql import functions as F

    batch_rows = max(1, events // 4)
    df = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", batch_rows)
          .option("numPartitions", 2).load())
    key = F.when(F.col("value") % 167 == 0, F.col("value") - 1).otherwise(F.col("value")).cast("string")
    deduped = (df.select(key.alias("key"), F.col("timestamp").alias("t")).withWatermark("t", "30 minutes")
               .dropDuplicatesWithinWatermark(["key"]))
    checkpoint = scratch / f"rate-{time.monotonic_ns()}"
    query = deduped.writeStream.format("noop").option("checkpointLocation", str(checkpoint)).start()
    try:
        start = time.perf_counter()
        wait_until(lambda: query.lastProgress and query.lastProgress["batchId"] >= 3 or query.exception(),
                   600, "four rate batches", interval_s=0.1)
        elapsed = time.perf_counter() - start
        if query.exception() is not None:
            raise query.exception()
        done = sum(p["numInputRows"] for p in query.recentProgress)
    finally:
        query.stop()
    return {"events_per_s": done / elapsed}


def _dedupe_latency(config: Config, spark: Any, url: str, journals: _Journals,
                    scratch: Path) -> dict[str, list[float]]:
    """Events at a steady rate into a running query (1 s trigger); the audit's
    append→output latency, and that the output holds each key exactly once."""
    from herald.client import BrokerClient
    from herald.pipelines.audit import audit
    from herald.pipelines.dedupe import start_dedupe
    from herald.pipelines.generate import GeneratorSettings, generate

    rate, secs = 2000.0, config.scale(20, 8)
    out: dict[str, list[float]] = {}
    for _ in range(1 if config.quick else 2):
        inp, outp = journals.make(4)
        query = start_dedupe(spark, _settings(url, inp, outp, scratch / f"dd-{journals.n}", "1"))
        try:
            with BrokerClient(url, timeout_s=120) as client:
                wait_until(lambda q=query: q.lastProgress is not None, 120, "the first dedupe batch", 0.1)
                stats = generate(client, inp, GeneratorSettings(count=int(rate * secs), rate=rate,
                                                                dup_rate=0.006, retry_delay_s=0.5, seed=3))
                _await_caught_up(query)
        finally:
            query.stop()
        with BrokerClient(url, timeout_s=120) as client:
            result = audit(client, inp, outp)
        if not result.ok:
            raise RuntimeError(f"dedupe output is not exactly once: {result}")
        out.setdefault("p50_ms", []).append(result.latency_p50_ms or float("nan"))
        out.setdefault("p99_ms", []).append(result.latency_p99_ms or float("nan"))
        out.setdefault("events_per_s", []).append(stats.events_per_s)
    return out


def _await_caught_up(query: Any) -> None:
    """Two batches in a row with no input once the generator is done (bounded)."""
    seen = threading.Event()

    def idle() -> bool:
        recent = query.recentProgress[-2:]
        if query.exception() is not None:
            raise query.exception()
        if len(recent) == 2 and all(p["numInputRows"] == 0 for p in recent):
            seen.set()
        return seen.is_set()

    wait_until(idle, 120, "the dedupe query to catch up", interval_s=0.2)


def _headlines(report: Report) -> None:
    for case in ("batch read", "streaming read-committed", "sink (batch write)"):
        report.headline(f"spark {case}: rows/s vs Spark text", ("herald", case, "rows_per_s"),
                        ("spark text", case, "rows_per_s"))
    report.headline("spark batch read: rows/s vs a Python source yielding pre-built Arrow (the API's ceiling)",
                    ("herald", "batch read", "rows_per_s"), (CEILING, "batch read", "rows_per_s"))
    report.headline("dedupe end to end (backlog): events/s vs rate + dropDuplicatesWithinWatermark",
                    ("herald", "dedupe backlog", "events_per_s"),
                    ("spark rate + dropDuplicatesWithinWatermark", "dedupe backlog", "events_per_s"))
    report.headline("dedupe exactly once vs the same query into Spark's noop sink: events/s",
                    ("herald", "dedupe backlog", "events_per_s"), (NOOP_SINK, "dedupe backlog", "events_per_s"))
    report.headline("dedupe steady 2k events/s: p99 latency append→output vs the 1 s trigger",
                    ("herald", "dedupe steady", "p99_ms"), ("trigger interval", "dedupe steady", "p99_ms"))
    for count in (4, 16):
        report.headline(f"dedupe over {count} journals vs 1: events/s",
                        ("herald", f"dedupe {count} journals", "events_per_s"),
                        ("herald", "dedupe 1 journal", "events_per_s"))
