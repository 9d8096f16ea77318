"""The dedupe backlog split by side: which half of the job stands between it and Spark's ceiling.

The job is ``herald source → dedupe → herald sink``. Two hybrids with Spark's
in-memory ``rate-micro-batch`` source, whose rows carry a JSON ``value`` like
the generator's events (≈ 160 bytes, the key inside it, so the herald sink
frames them on the same fast path as the job's output), separate the two sides:

- ``rate → dedupe → noop``: the engine alone (the same query: key, value, t,
  watermark, ``dropDuplicatesWithinWatermark``, value carried to the sink);
- ``rate → dedupe → herald sink``: the exactly-once sink's cost with a free source;
- ``herald source → dedupe → noop`` (`bench.spark_dedupe.NOOP_SINK`): the
  source's cost with a free sink.

Every side is one available-now run (one micro-batch of all events, then the
closing no-data batch), timed from building the query to the run's end, as
`bench.spark_dedupe` times the job. The job's ratio to ``rate`` is the product
of the two factors (source: herald→noop ÷ rate→noop; sink: rate→herald ÷
rate→noop), so the source's factor alone is the job's ceiling against ``rate``
however fast the sink gets.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

__all__ = ["RATE_HERALD", "RATE_NOOP", "rate_json_dedupe", "run_split", "split_headlines"]

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
    query = writer.trigger(availableNow=True).start()
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

    rate_json_dedupe(spark, 2000, scratch), rate_herald(2000)
    samples = measure_interleaved(config, {
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
        report.headline(f"dedupe split, the job vs rate → noop (same value carried), {how}",
                        ("herald", "dedupe split", metric), (RATE_NOOP, "dedupe split", metric))
