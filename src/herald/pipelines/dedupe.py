"""Segment's de-duplication on Spark: publish each ``messageId`` once per window.

The query (DESIGN.md §5)::

    herald source (read-committed) → key, dedupe time t
      → withWatermark(t, d) → dropDuplicatesWithinWatermark(key)   # RocksDB state
      → herald sink (exactly once, mapped by key)

The state is Spark's RocksDB provider with changelog checkpointing (set here).
A key's state entry expires when the watermark (max t seen − d) passes t + d.

**The dedupe time t** ([I-DEDUP-1]). Spark's watermark is one value for the
whole query, and Spark *drops* rows older than it as late. Fed raw event times,
one journal (or one phone with a wrong clock) running ahead moves the watermark
for everyone: the others' keys expire early and their retries slip through,
and their late events are silently lost. So t is guarded::

    t = clamp(basis, now − band, now) + boost(now)

``basis`` is the input message's arrival time (its UUID clock, stamped by the
Publisher) or, with ``time_field``, the event's own timestamp; ``now`` is the
micro-batch's timestamp (``current_timestamp()``: fixed per batch and identical
on replay). Nothing can push the watermark past ``now − d``, and since
``band ≤ d`` every row lands above the previous batch's watermark: no row is
ever late, so nothing is lost, and a key is kept at least ``window`` of batch
time whatever the skew between journals. With ``d = (window + band) / 2`` and no
skew, a key is kept until the stream's time is ``window + band`` past it, so the
window is exact to within ``band`` (10 % of it). ``boost`` is the size bound
(`herald.pipelines.dedupe_control`).

    settings = DedupeSettings(broker=url, input="prefix=events/", output="prefix=deduped/",
                              checkpoint="/tmp/ckpt", window_s=28 * 86400)
    summary = run_dedupe(spark, settings)     # blocks; available-now returns when done
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from herald.message import MAPPINGS
from herald.pipelines.dedupe_control import FORMAT as CONTROL_FORMAT
from herald.pipelines.dedupe_control import Boost, ControlSource, read_boost, write_boost
from herald.pipelines.dedupe_metrics import DedupeMonitor, DedupeSummary
from herald.pipelines.reporting import PipelineReporter
from herald.pipelines.streaming import prepare_queries, validate_trigger, with_trigger
from herald.protocol.errors import ValidationError
from herald.protocol.journal import parse_duration

__all__ = [
    "DedupeSettings",
    "dedupe_frame",
    "parse_window",
    "run_dedupe",
    "start_dedupe",
]

log = logging.getLogger(__name__)

BAND_FRACTION = 0.1
QUERY_NAME = "herald-dedupe"
PROGRESS_POLL_S = 1.0
#: The source's columns the query reads (issue 15: the JVM's cost per row of a
#: Python source grows with the columns it is sent): the key comes built by the
#: source (option dedupeKey), so ``journal`` and ``begin`` are not sent.
USED_COLUMNS = "timestamp timestamp, value binary, dedupe_key string"
#: The micro-batch's time in milliseconds, one column computed once per row (`_batch_now_ms`).
NOW_COLUMN = "__herald_now_ms"


@dataclass(frozen=True, slots=True)
class DedupeSettings:
    """One dedupe pipeline. ``trigger`` is ``available-now`` (process what is
    there, then stop) or an interval in seconds between micro-batches."""

    broker: str
    input: str
    output: str
    checkpoint: str
    key: str = "messageId"
    time_field: str = ""
    window_s: float = 28 * 86400.0
    trigger: str = "available-now"
    max_keys: int = 0
    min_window_s: float = 86400.0
    skew_guard: bool = True
    mapping: str = "modulo"
    max_bytes_per_trigger: int = 0

    def __post_init__(self) -> None:
        if self.window_s <= 0:
            raise ValidationError("window", f"must be > 0 ({self.window_s})")
        if self.max_keys < 0:
            raise ValidationError("max_keys", f"must be >= 0 ({self.max_keys})")
        if self.mapping not in MAPPINGS:
            raise ValidationError("mapping", f"must be one of {', '.join(MAPPINGS)} ({self.mapping!r})")
        if not self.key:
            raise ValidationError("key", "must name the JSON field holding the message id")
        for name, value in (("key", self.key), ("time_field", self.time_field)):
            if "," in value or "`" in value:  # The source's jsonFields option lists them.
                raise ValidationError(name, f"a field name with a comma or backtick is not supported ({value!r})")
        validate_trigger(self.trigger)

    @property
    def window_ms(self) -> int:
        return int(self.window_s * 1000)

    @property
    def band_ms(self) -> int:
        return max(1, int(self.window_ms * BAND_FRACTION))

    @property
    def delay_ms(self) -> int:
        """The watermark delay d: (window + band) / 2, see the module docstring."""
        return (self.window_ms + self.band_ms + 1) // 2

    @property
    def control_path(self) -> Path:
        return Path(self.checkpoint) / "herald-dedupe" / "boost.json"


_DAYS = {"d": 86400.0, "w": 7 * 86400.0}


def parse_window(text: str, field: str = "window") -> float:
    """Seconds of ``28d``, ``2w``, ``24h``, ``90s``, ``1h30m`` (Go durations plus days
    and weeks, the units windows are thought of in)."""
    body = text.strip()
    if body[-1:] in _DAYS:
        try:
            return float(body[:-1]) * _DAYS[body[-1]]
        except ValueError:
            raise ValidationError(field, f"invalid duration ({text!r}; e.g. 28d, 24h, 90s)") from None
    return parse_duration(body, field)


def dedupe_frame(spark: Any, s: DedupeSettings) -> Any:
    """The streaming DataFrame of survivors: ``key``, ``value`` (the input JSON)."""
    from pyspark.sql import functions as F

    import herald.spark
    from herald.spark.fields import COLUMN_PREFIX, fields_schema
    from herald.spark.projection import DEDUPE_KEY

    herald.spark.register(spark)  # once per session (a no-op for the next queries)
    fields = [s.time_field] if s.time_field else []
    # The key and time fields come parsed by the source's Python worker (options
    # dedupeKey and jsonFields: from_json's values, without a second JSON parse in
    # the JVM), and only the columns used below are built and sent
    # (herald.spark.projection). A message without a key can't be a duplicate: the
    # source keys it by its position, <journal>:<begin> (herald.spark.fields).
    schema = ", ".join(part for part in (USED_COLUMNS, fields_schema(fields)) if part)
    src = (spark.readStream.format("herald").schema(schema).option("broker", s.broker).option("selector", s.input)
           .option("stateLocation", str(Path(s.checkpoint) / "source")).option("dedupeKey", s.key)
           .option("jsonFields", ",".join(fields)).option("maxBytesPerTrigger", str(s.max_bytes_per_trigger)).load())

    def field(name: str) -> Any:
        return F.col(f"`{COLUMN_PREFIX}{name}`")

    key = F.col(DEDUPE_KEY)
    arrival_ms = F.unix_millis(F.col("timestamp"))
    basis = arrival_ms
    if s.time_field:
        basis = F.coalesce(F.unix_millis(F.to_timestamp(field(s.time_field))), arrival_ms)
    if s.skew_guard or s.max_keys:
        src = src.select("*", _batch_now_ms().alias(NOW_COLUMN))
    now = F.col(NOW_COLUMN)
    t_ms = F.least(F.greatest(basis, now - s.band_ms + 1), now) if s.skew_guard else basis
    if s.max_keys:  # The size bound's boost, re-read by every batch (control.py).
        spark.dataSource.register(ControlSource)  # only then: each registration is a JVM round trip
        control = spark.read.format(CONTROL_FORMAT).option("path", str(s.control_path)).load()
        src = src.crossJoin(F.broadcast(control))
        elapsed = F.greatest(now - F.col("at_ms"), F.lit(0))
        t_ms = t_ms + F.col("from_ms") + (F.col("rate") * elapsed).cast("long")
    rows = src.select(key.alias("key"), F.col("value"), F.timestamp_millis(t_ms).alias("t"))
    return (rows.withWatermark("t", f"{s.delay_ms} milliseconds")
            .dropDuplicatesWithinWatermark(["key"]).select("key", "value"))


def _batch_now_ms() -> Any:
    """``unix_millis(current_timestamp())``: the micro-batch's time (fixed per batch,
    the same on replay), passed through ``reflect`` so that Spark does not compile it
    into the stage's code. Spark writes a long literal into the Java it generates,
    and in a stream ``current_timestamp()`` is such a literal with a new value each
    batch: the whole source stage (the Arrow rows in, the key, the clamp, the
    shuffle's write) was a new class to compile and warm up in every micro-batch,
    2 Janino compiles per available-now run (30-130 ms of compiling, then the
    class runs cold), none with this. ``reflect`` is evaluated, not compiled
    (CodegenFallback), and as it is nondeterministic Spark keeps it in a
    projection of its own, once per row; its string round trip is exact."""
    from pyspark.sql import functions as F

    return F.reflect(F.lit("java.lang.String"), F.lit("valueOf"), F.unix_millis(F.current_timestamp())).cast("long")


def start_dedupe(spark: Any, s: DedupeSettings) -> Any:
    """Start the query (returns the StreamingQuery; the caller awaits it)."""
    prepare_queries(spark)
    if not s.control_path.exists():
        write_boost(s.control_path, Boost())
    writer = (dedupe_frame(spark, s).writeStream.format("herald").queryName(QUERY_NAME)
              .option("broker", s.broker).option("selector", s.output).option("mapping", s.mapping)
              .option("checkpointLocation", str(Path(s.checkpoint) / "query")).outputMode("append"))
    return with_trigger(writer, s.trigger).start()


def run_dedupe(spark: Any, s: DedupeSettings, report: Callable[[str], None] | None = print,
               stop: Callable[[], bool] | None = None, reporter: PipelineReporter | None = None) -> DedupeSummary:
    """Run until an available-now run is done (or ``stop()`` says so, or Ctrl-C),
    printing a metrics line per micro-batch via ``report`` (and, with ``reporter``,
    exporting them and reporting to the broker); returns the summary.
    Raises the query's exception if it failed."""
    monitor = DedupeMonitor(s.window_s, s.min_window_s, s.max_keys, s.band_ms / 1000, read_boost(s.control_path))
    query = start_dedupe(spark, s)
    try:
        while True:
            finished = query.awaitTermination(PROGRESS_POLL_S)
            _observe(query, monitor, s, report, reporter)
            if finished or (stop is not None and stop()):
                break
    except KeyboardInterrupt:
        log.warning("interrupted: stopping the dedupe query")
    finally:
        if query.isActive:
            query.stop()
    _observe(query, monitor, s, report, reporter, final=True)
    if query.exception() is not None:
        raise query.exception()
    return monitor.summary()


def _observe(query: Any, monitor: DedupeMonitor, s: DedupeSettings, report: Callable[[str], None] | None,
             reporter: PipelineReporter | None = None, final: bool = False) -> None:
    new_batches = 0
    for progress in query.recentProgress:
        doc = _as_dict(progress)
        line = monitor.observe(doc)
        if line and report is not None:
            report(line)
        if line and reporter is not None:
            reporter.observe_batch(doc)
        new_batches += line is not None
    if reporter is not None and (new_batches or final):
        reporter.publish(monitor.summary(), force_lag=final)
    if s.max_keys and monitor.boost != read_boost(s.control_path):
        write_boost(s.control_path, monitor.boost)
    monitor.export(Path(s.checkpoint) / "herald-dedupe")


def _as_dict(progress: Any) -> dict:
    import json

    if isinstance(progress, dict):
        return progress
    return json.loads(progress.json) if hasattr(progress, "json") else dict(progress)
