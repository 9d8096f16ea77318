"""Benchmark 4, the sink case: format ``herald`` as a Spark sink, batch and streaming.

- batch write (one transaction: every journal's ACKs appended once all tasks
  succeeded) vs Spark's ``text`` writer and vs format ``herald-sink-ceiling``
  (`bench.spark_sink_ceiling`: a Python sink that drops its Arrow batches — the
  Python sink API's own ceiling), all writing the same cached rows;
- streaming (exactly once: ACK intents recorded and appended by the driver), one
  availableNow query over text files, vs Spark's streaming ``text`` file sink and
  the same ceiling.

Rows/s are rows ÷ wall time, query start-up included. Run by `bench.spark`,
whose session, helpers and report it shares.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.runner import Config, Report, measure_interleaved
from bench.servers import apply, bench_spec

__all__ = ["SINK_CEILING", "run_sink_cases"]

SINK_CEILING = "python sink ceiling"


def run_sink_cases(report: Report, config: Config, spark: Any, url: str, scratch: Path) -> None:
    """The batch writer (one transaction) vs Spark's ``text`` writer, then the
    streaming sink (exactly once, one availableNow batch) vs Spark's streaming file
    sink, both reading the same text files. Quick runs write 200 k rows, not fewer:
    every write job carries ≈0.25 s of Spark's own start-up (text's as much as
    Herald's), which at 60 k rows was most of the figure."""
    from pyspark.sql import functions as F

    from bench.spark import UNITS, _runs, _wall

    rows = config.scale(300_000, 200_000)
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

    def ceiling_sink():
        return {"rows_per_s": rows / _wall(df.write.format("herald-sink-ceiling").mode("append").save)}

    from bench.spark_sink_ceiling import SinkCeiling

    spark.dataSource.register(SinkCeiling)
    samples = measure_interleaved(config, {"herald": herald_sink, "spark text": text_sink,
                                           SINK_CEILING: ceiling_sink}, _runs(config))
    for system, values in samples.items():
        report.add(system, "sink (batch write)", values, UNITS)
    source, warm = scratch / "sink-stream-source", scratch / "sink-stream-warm"
    df.write.mode("overwrite").text(str(source))
    df.limit(1000).write.mode("overwrite").text(str(warm))
    df.unpersist()
    report.inputs["sink_rows"] = rows
    _stream_sink(report, config, spark, url, scratch, warm, 1000, runs=1)  # The first streaming sink: workers start.
    _stream_sink(report, config, spark, url, scratch, source, rows)


def _stream_sink(report: Report, config: Config, spark: Any, url: str, scratch: Path, source: Path,
                 rows: int, runs: int | None = None) -> None:
    """The streaming sink: an availableNow query over ``source`` (text files of
    ``rows`` lines) into format ``herald`` (exactly once: ACK intents recorded and
    appended by the driver) vs into Spark's own streaming ``text`` file sink.
    With ``runs`` (a warm-up), nothing is reported."""
    from bench.spark import UNITS, _runs, _wall

    counter = iter(range(10**6))

    def query(fmt: str, **options: str) -> float:
        state = scratch / f"sink-stream-{source.name}-{next(counter)}"
        writer = spark.readStream.schema("value string").text(str(source)).writeStream.format(fmt) \
            .option("checkpointLocation", str(state / "query"))
        for key, value in options.items():
            writer = writer.option(key, value)

        def run() -> None:
            started = writer.trigger(availableNow=True).start()
            started.awaitTermination()
            if started.exception() is not None:
                raise started.exception()

        return rows / _wall(run)

    def herald_stream():
        return {"rows_per_s": query("herald", broker=url, selector="prefix=bench/spark-sink/", mapping="random")}

    def text_stream():
        return {"rows_per_s": query("text", path=str(scratch / f"sink-stream-text-{source.name}-{next(counter)}"))}

    def ceiling_stream():
        return {"rows_per_s": query("herald-sink-ceiling")}

    samples = measure_interleaved(config, {"herald": herald_stream, "spark text": text_stream,
                                           SINK_CEILING: ceiling_stream}, runs or _runs(config))
    for system, values in samples.items():
        if runs is None:
            report.add(system, "sink (streaming)", values, UNITS)
