"""Benchmark 4 — Spark (format ``herald``, local[2]) and dedupe scaling.

- batch read rows/s (raw, per-fragment partitions) vs Spark's ``text`` source
  over the same bytes (the journal's content written as plain files), and vs
  format ``herald-ceiling`` (`bench.spark_ceiling`: pre-built Arrow batches of
  the same schema, no Herald work — the Python data source API's own ceiling);
- streaming read-committed rows/s (availableNow, one query) vs Spark's streaming
  ``text`` source over the same files, also with one task for the journal
  (``minPartitions=1``: its slice not split), each two ways: end to end (wall time
  from ``start()`` to termination: the query's start-up included, which for a Python
  source is a fresh source-runner process per query) and in micro-batches (rows ÷
  the batches' ``triggerExecution`` from Spark's progress events: the start-up
  excluded), with the time outside batches beside them;
- batch and streaming reads under ``local[1]`` and ``local[2]`` in fresh
  processes, over data of their own in several journals, the two processes
  taking turns read by read (`bench.spark_parallel`): the parallel efficiency;
- sink rows/s, batch and streaming, vs Spark's ``text`` sinks and a Python sink
  that drops its batches (`bench.spark_sink`);
- dedupe: backlog, live at 10 k events/s, 1 vs 16 journals (`bench.spark_dedupe`).

``HERALD_BENCH_SPARK_CASES`` (comma-separated subset of reads, parallel, sink,
dedupe; default all) runs only some cases, e.g. the connector's without dedupe.

Every Spark figure but the ``batch_rows_per_s`` ones includes query start-up;
rows/s are rows ÷ wall time. With
--quick each figure is one run (Spark's start-up alone would eat the budget)
with less data, and dedupe scaling skips 4 journals.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.runner import Config, Report, measure_interleaved, remove_tree
from bench.servers import apply, bench_spec, herald_broker
from bench.spark_dedupe import dedupe_headlines, run_dedupe_cases
from bench.spark_sink import SINK_CEILING, run_sink_cases

__all__ = ["fill_journal", "run", "spark_session", "stream_figures"]

CEILING = "python source ceiling"
STREAM_WHOLE = "herald, one task per journal"
UNITS = {"rows_per_s": "rows/s", "batch_rows_per_s": "rows/s", "outside_batches_s": "s", "events_per_s": "events/s",
         "p50_ms": "ms", "p99_ms": "ms", "cores": "cores"}
READ_FRAGMENT_BYTES = 16 << 20
CASES = ("reads", "parallel", "sink", "dedupe")
#: Rows of the reads case (full, --quick): ~200 bytes each. Enough that a read's
#: fixed costs — a batch job's ~0.12 s, a stream query's fresh source-runner
#: process (0.4-0.6 s, PySpark's own start-up) — do not decide its rows/s: at
#: 100 k rows (20 MB) they were most of a read, and a read-committed stream could
#: not pass ~220 k rows/s end to end however fast its micro-batch (100 k ÷ 0.45 s).
READ_ROWS = (2_000_000, 1_000_000)


def spark_session(master: str = "local[2]") -> Any:
    """``master`` (local[2]), no UI, RocksDB state with changelog checkpointing (as the dedupe
    pipeline runs), workers on this interpreter, format ``herald`` registered."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    root = str(Path(__file__).resolve().parents[1])  # Workers import bench.spark_ceiling.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    import herald.spark
    from herald.pipelines.streaming import ROCKSDB_PROVIDER

    spark = (SparkSession.builder.master(master).appName("herald-bench")
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
            rows = config.scale(*READ_ROWS)
            report.inputs.update(spark="local[2]", read_rows=rows, read_fragment_bytes=READ_FRAGMENT_BYTES)
            text_dir = _phase("fill", lambda: fill_journal(broker.url, "bench/spark-read", rows, scratch))
            _phase("warm-up herald read", lambda: _warm_up(spark, broker.url, scratch))
            cases = _selected_cases()
            if "reads" in cases:
                _case(report, "reads", lambda: _reads(report, config, spark, broker.url, text_dir, rows, scratch))
            if "parallel" in cases:
                _case(report, "local[1] vs local[2]", lambda: _parallel(report, config, broker.url, scratch))
            if "sink" in cases:
                _case(report, "sink", lambda: run_sink_cases(report, config, spark, broker.url, scratch))
            if "dedupe" in cases:
                _case(report, "dedupe", lambda: run_dedupe_cases(report, config, spark, broker.url, scratch, _phase))
    finally:
        if spark is not None:
            spark.stop()
        remove_tree(scratch)
    _headlines(report)
    return report


def _selected_cases() -> set[str]:
    """The cases ``HERALD_BENCH_SPARK_CASES`` names (all by default)."""
    named = {c.strip() for c in os.environ.get("HERALD_BENCH_SPARK_CASES", "").split(",") if c.strip()}
    unknown = named - set(CASES)
    if unknown:
        raise ValueError(f"HERALD_BENCH_SPARK_CASES: unknown case(s) {sorted(unknown)}, known: {list(CASES)}")
    return named or set(CASES)


# -- data -------------------------------------------------------------------------------------


def fill_journal(url: str, journal: str, rows: int, scratch: Path, text: bool = True) -> Path:
    """``rows`` committed ~200-byte messages (stamped by PublisherCore, appended in
    4 MiB blocks); with ``text``, the same content written as plain NDJSON files,
    one per fragment, under the returned directory."""
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
        for n, info in enumerate(client.fragments(journal) if text else ()):
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


def _case(report: Report, name: str, fn) -> None:
    """A measuring phase whose failure (e.g. a Spark query failing on a machine too
    loaded for a fresh Python worker to connect back within Spark's fixed 10 s)
    is a note in the report, not the loss of the other cases' figures."""
    try:
        _phase(name, fn)
    except Exception as err:  # noqa: BLE001 — any failure of one case; the others stand
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        report.note(f"{name} FAILED, its figures are missing: {type(err).__name__}: {first[:300]}")
        print(f"bench: spark {name} failed: {first[:300]}", file=sys.stderr, flush=True)


def _runs(config: Config) -> int:
    return 1 if config.quick else config.runs


#: Samples of each batch read even in --quick mode (each is a short job).
BATCH_READ_RUNS = 3


def _warm_up(spark: Any, url: str, scratch: Path) -> None:
    """Start Spark's Python workers (and their imports) outside the timed runs:
    a small read in two partitions (a worker per core: the timed read splits
    over both) and write of format ``herald``, and a small availableNow stream
    (the session's first streaming query loads the JVM's micro-batch path and is
    ~0.5 s slower outside its batches than later ones: without it, whichever
    system's stream the reads case times first would pay that)."""
    fill_journal(url, "bench/spark-warm", 1000, scratch / "warm")
    df = spark.read.format("herald").option("broker", url).option("selector", "name=bench/spark-warm") \
        .option("minPartitions", "2").load()  # Two tasks: both cores' Python workers start here.
    df.write.format("noop").mode("overwrite").save()
    df.select("value").write.format("herald").option("broker", url).option("selector", "name=bench/spark-warm") \
        .option("mapping", "random").mode("append").save()
    state = scratch / "warm" / "stream"
    stream_figures(1000, spark.readStream.format("herald").option("broker", url)
                   .option("selector", "name=bench/spark-warm").option("stateLocation", str(state)).load(), state)


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
    text_parts = spark.read.text(str(text_dir)).rdd.getNumPartitions()
    report.note(f"batch read partitions: herald {parts}, spark text {text_parts}")

    def ceiling_batch():
        df = spark.read.format("herald-ceiling").option("rows", rows).option("partitions", parts).load()
        return {"rows_per_s": rows / _wall(lambda: df.write.format("noop").mode("overwrite").save())}

    # A quick batch read takes well under a second, most of it the job's fixed cost
    # (~0.12 s): one sample per system swung 0.44-0.71x `text` between runs minutes
    # apart, so even --quick takes the median of a few, for every system alike.
    samples = measure_interleaved(config, {"herald": herald_batch, "spark text": text_batch,
                                           CEILING: ceiling_batch}, max(BATCH_READ_RUNS, _runs(config)))
    for system, values in samples.items():
        report.add(system, "batch read", values, UNITS)

    counter = iter(range(10**6))

    def herald_stream(**options: str):
        state = scratch / f"stream-{next(counter)}"
        reader = (spark.readStream.format("herald").option("broker", url).option("selector", "name=bench/spark-read")
                  .option("stateLocation", str(state)))
        for key, value in options.items():
            reader = reader.option(key, value)
        return stream_figures(rows, reader.load(), state)

    def text_stream():
        state = scratch / f"stream-{next(counter)}"
        return stream_figures(rows, spark.readStream.schema("value string").text(str(text_dir)), state)

    def herald_stream_whole():  # One task per journal, as before slices were split.
        return herald_stream(minPartitions="1")

    samples = measure_interleaved(config, {"herald": herald_stream, STREAM_WHOLE: herald_stream_whole,
                                           "spark text": text_stream}, _runs(config))
    for system, values in samples.items():
        report.add(system, "streaming read-committed", values, UNITS)


def _parallel(report: Report, config: Config, url: str, scratch: Path) -> None:
    """The same reads under local[1] and local[2] (`bench.spark_parallel`: data of
    its own over several journals, the two masters' processes taking turns read by read)."""
    from bench.spark_parallel import JOURNALS, fill, measure_masters, pair_ratios

    rows, runs = config.scale(800_000, 300_000), config.scale(5, 3)
    report.inputs.update(parallel_rows=rows, parallel_journals=JOURNALS, parallel_runs=runs)
    selector, text_glob = fill(url, rows, scratch)
    try:
        measured = measure_masters(url, selector, rows, runs, text_glob)
    except RuntimeError as err:  # e.g. a fresh source runner not connecting back within Spark's 10 s
        report.note(f"local[1] vs local[2] not measured: {str(err).splitlines()[-1][:300]}")
        return
    for metric in ("batch_rows_per_s", "stream_rows_per_s", "stream_batch_rows_per_s", "text_batch_rows_per_s",
                   "text_stream_rows_per_s", "text_stream_batch_rows_per_s"):
        ratios = sorted(pair_ratios(measured, metric))
        report.note(f"local[2] / local[1], {metric}, pairs of reads seconds apart: median "
                    f"{ratios[len(ratios) // 2]:.2f}, range {ratios[0]:.2f}-{ratios[-1]:.2f} ({len(ratios)} pairs)")
    for master, samples in measured.items():
        for kind in ("batch", "stream"):
            report.add(master, f"{kind} read, parallel efficiency", {"rows_per_s": samples[f"{kind}_rows_per_s"]},
                       UNITS)
        report.add(master, "stream read, parallel efficiency", {"batch_rows_per_s": samples["stream_batch_rows_per_s"]},
                   UNITS)
        for kind in ("batch", "stream"):  # the CPU the read got: was a second core there to use?
            report.add(master, f"{kind} read, parallel efficiency", {"cores": samples[f"{kind}_cores"]}, UNITS)
        # Spark's own text source over the same bytes, same processes and turns: the machine's reference.
        text = f"spark text {master}"
        report.add(text, "batch read, parallel efficiency", {"rows_per_s": samples["text_batch_rows_per_s"]}, UNITS)
        report.add(text, "stream read, parallel efficiency", {
            "rows_per_s": samples["text_stream_rows_per_s"], "cores": samples["text_stream_cores"],
            "batch_rows_per_s": samples["text_stream_batch_rows_per_s"]}, UNITS)


def _available_now(df: Any, checkpoint: Path) -> Any:
    query = (df.writeStream.format("noop").option("checkpointLocation", str(checkpoint / "query"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    if query.exception() is not None:
        raise query.exception()
    return query


def stream_figures(rows: int, df: Any, checkpoint: Path) -> dict[str, float]:
    """One availableNow query of ``df`` into ``noop``, measured two ways: end to end
    (``rows_per_s``: rows ÷ wall time from ``start()`` to termination) and in
    micro-batches (``batch_rows_per_s``: rows ÷ the sum of the batches'
    ``triggerExecution``, from Spark's progress events, i.e. what the engine reports
    as processedRowsPerSecond), and the time outside batches: the query's start-up
    (for a Python source a fresh source-runner process, its imports and its first
    listing of the journals) and its end."""
    start = time.perf_counter()
    query = _available_now(df, checkpoint)
    wall = time.perf_counter() - start
    in_batches = sum(p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress) / 1000
    return {"rows_per_s": rows / wall, "batch_rows_per_s": rows / max(in_batches, 1e-3),
            "outside_batches_s": wall - in_batches}


def _headlines(report: Report) -> None:
    stream, batch_par, stream_par = "streaming read-committed", "batch read, parallel efficiency", \
        "stream read, parallel efficiency"
    pairs = [(f"spark {case}: rows/s vs Spark text", ("herald", case, "rows_per_s"), ("spark text", case, "rows_per_s"))
             for case in ("batch read", stream, "sink (batch write)", "sink (streaming)")]
    pairs += [
        ("spark streaming read-committed in micro-batches (query start-up excluded): rows/s vs Spark text",
         ("herald", stream, "batch_rows_per_s"), ("spark text", stream, "batch_rows_per_s")),
        ("spark streaming read-committed: seconds outside micro-batches (start-up, end) vs Spark text",
         ("herald", stream, "outside_batches_s"), ("spark text", stream, "outside_batches_s")),
    ]
    pairs += [(f"spark {case}: rows/s vs a Python sink that drops its Arrow batches (the API's ceiling)",
               ("herald", case, "rows_per_s"), (SINK_CEILING, case, "rows_per_s"))
              for case in ("sink (batch write)", "sink (streaming)")]
    pairs += [
        ("spark batch read: rows/s vs a Python source yielding pre-built Arrow (the API's ceiling)",
         ("herald", "batch read", "rows_per_s"), (CEILING, "batch read", "rows_per_s")),
        ("spark streaming read-committed: rows/s, slices split across tasks vs one task per journal",
         ("herald", stream, "rows_per_s"), (STREAM_WHOLE, stream, "rows_per_s")),
        ("spark batch read: local[2] vs local[1] rows/s (parallel efficiency, 2.0 is perfect)",
         ("local[2]", batch_par, "rows_per_s"), ("local[1]", batch_par, "rows_per_s")),
        ("spark stream read: local[2] vs local[1] rows/s (parallel efficiency, 2.0 is perfect)",
         ("local[2]", stream_par, "rows_per_s"), ("local[1]", stream_par, "rows_per_s")),
        ("spark stream read in micro-batches (start-up excluded): local[2] vs local[1] rows/s",
         ("local[2]", stream_par, "batch_rows_per_s"), ("local[1]", stream_par, "batch_rows_per_s")),
        ("spark batch read: CPU cores the local[2] vs the local[1] read got (driver, JVM, workers)",
         ("local[2]", batch_par, "cores"), ("local[1]", batch_par, "cores")),
        ("Spark text batch read, same bytes and turns: local[2] vs local[1] rows/s (the machine's reference)",
         ("spark text local[2]", batch_par, "rows_per_s"), ("spark text local[1]", batch_par, "rows_per_s")),
        ("Spark text stream read, same bytes and turns: local[2] vs local[1] rows/s (the machine's reference)",
         ("spark text local[2]", stream_par, "rows_per_s"), ("spark text local[1]", stream_par, "rows_per_s")),
        ("Spark text stream read in micro-batches: local[2] vs local[1] rows/s (the machine's reference)",
         ("spark text local[2]", stream_par, "batch_rows_per_s"),
         ("spark text local[1]", stream_par, "batch_rows_per_s")),
    ]
    for label, herald, reference in pairs:
        report.headline(label, herald, reference)
    dedupe_headlines(report)
