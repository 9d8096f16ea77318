"""The summer: a Spark streaming job that publishes each file's final sum exactly once.

Gazette's summer is a consumer whose store holds each open file's running
SHA-sum; here that is a micro-batch query (DESIGN.md §4)::

    herald source (chunks, read-committed)
      → groupBy(file id).applyInPandasWithState(fold chunks in journal order)   # RocksDB state
      → herald sink (sums, exactly once, mapped by file id)

The state of a file is its `RunningDigest` (chain value as hex, chunk count);
the end chunk publishes the sum and removes the state. A micro-batch is a
consumer transaction: Spark's checkpoint (offsets, sequencer snapshots, the
RocksDB changelog) and the sink's ACK intents commit together, so a summer
killed at any instant resumes without losing or repeating a sum [I-SINK-1].

Chunk order: all chunks of a file map to one journal (by key), and a batch
reads a contiguous byte range of it, so sorting a group's rows by journal
offset is the order the chunker wrote them in.

Bad input: a line that is not a JSON object stops the query (the source's
default: `MessageDecodeError` names the journal and offset); a JSON object that
is not a valid chunk is skipped and reported once, with its journal and
offset, as a ``rejected`` message on the sums journals (`herald.examples.stream_sum.messages`).

    settings = SummerSettings(broker=url, checkpoint="/tmp/ckpt")
    run_summer(spark, settings, stop=lambda: done.is_set())
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from herald.examples.stream_sum.digest import RunningDigest
from herald.examples.stream_sum.messages import parse_chunk, reject_body, sum_body
from herald.message.decode_errors import OnDecodeError
from herald.protocol.errors import HeraldError, Status, ValidationError

__all__ = ["CHUNKS", "SUMS", "SummerSettings", "fold_group", "run_summer", "start_summer", "summer_frame"]

log = logging.getLogger(__name__)

CHUNKS = "prefix=stream-sum/chunks/"
SUMS = "prefix=stream-sum/sums/"
QUERY_NAME = "herald-stream-sum"
PROGRESS_POLL_S = 1.0
STATE_SCHEMA = "chain string, chunks long"
OUTPUT_SCHEMA = "key string, value string"


@dataclass(frozen=True, slots=True)
class SummerSettings:
    """One summer. ``trigger_s`` is the interval between micro-batches."""

    broker: str
    checkpoint: str
    chunks: str = CHUNKS
    sums: str = SUMS
    trigger_s: float = 0.5
    max_bytes_per_trigger: int = 0
    on_decode_error: str = "fail"  # or "skip": drop (and count, in the executors' log) lines that are not JSON

    def __post_init__(self) -> None:
        if self.trigger_s <= 0:
            raise ValidationError("trigger", f"must be > 0 ({self.trigger_s})")
        OnDecodeError.parse(self.on_decode_error, "on_decode_error")
        if not self.checkpoint:
            raise ValidationError("checkpoint", "required: a directory for Spark's and Herald's checkpoints")


def fold_group(key: tuple[str, ...], frames: Iterator[Any], state: Any) -> Iterator[Any]:
    """Executor, once per file id per micro-batch: fold this batch's chunks of the
    file into its running digest; yield the sum if the file ended, and a rejection
    for each chunk that is not one."""
    import pandas as pd

    rows = pd.concat(list(frames)).sort_values(["journal", "begin"], kind="stable")
    digest = RunningDigest.from_state(*state.get) if state.exists else None
    keys: list[str] = []
    values: list[str] = []
    for journal, begin, value in zip(rows["journal"], rows["begin"], rows["value"]):
        chunk = parse_chunk(bytes(value))
        if isinstance(chunk, str):
            keys.append(key[0])
            values.append(reject_body(chunk, journal, int(begin), _id_of(value)))
            log.warning("journal=%s offset=%d rejected a chunk: %s", journal, begin, chunk)
            continue
        digest = digest or RunningDigest.start(chunk.file_id)
        if chunk.seq != digest.chunks:  # the sum will be wrong (the verifier says so): say where
            log.error("journal=%s offset=%d chunk %d of %s follows %d folded chunks: one is missing or "
                      "out of order", journal, begin, chunk.seq, chunk.file_id, digest.chunks)
        if chunk.data or not chunk.end:  # every data chunk counts; an end chunk usually has none
            digest = digest.fold(chunk.data)
        if chunk.end:
            keys.append(chunk.file_id)
            values.append(sum_body(chunk.file_id, digest.hexdigest(), digest.chunks))
            digest = None
    if digest is None:
        if state.exists:
            state.remove()
    else:
        state.update(digest.state())
    yield pd.DataFrame({"key": keys, "value": values})


def _id_of(value: Any) -> str | None:
    import orjson

    try:
        doc = orjson.loads(bytes(value))
    except orjson.JSONDecodeError:
        return None
    return doc.get("id") if isinstance(doc, dict) and isinstance(doc.get("id"), str) else None


def summer_frame(spark: Any, s: SummerSettings) -> Any:
    """The streaming DataFrame of sums and rejections: ``key``, ``value`` (JSON)."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    import herald.spark

    herald.spark.register(spark)
    src = (spark.readStream.format("herald").option("broker", s.broker).option("selector", s.chunks)
           .option("stateLocation", str(Path(s.checkpoint) / "source"))
           .option("maxBytesPerTrigger", str(s.max_bytes_per_trigger))
           .option("onDecodeError", s.on_decode_error).load())
    position = F.concat(F.col("journal"), F.lit(":"), F.col("begin").cast("string"))
    file_id = F.coalesce(F.get_json_object(F.col("value").cast("string"), "$.id"), position)
    rows = src.select(file_id.alias("file_id"), "journal", "begin", "value")
    return rows.groupBy("file_id").applyInPandasWithState(
        fold_group, OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout)


def start_summer(spark: Any, s: SummerSettings) -> Any:
    """Start the query on RocksDB state (returns the StreamingQuery)."""
    from herald.pipelines.streaming import prepare_queries

    prepare_queries(spark)
    return (summer_frame(spark, s).writeStream.format("herald").queryName(QUERY_NAME)
            .option("broker", s.broker).option("selector", s.sums).option("mapping", "modulo")
            .option("checkpointLocation", str(Path(s.checkpoint) / "query")).outputMode("append")
            .trigger(processingTime=f"{s.trigger_s} seconds").start())


def run_summer(spark: Any, s: SummerSettings, report: Callable[[str], None] | None = print,
               stop: Callable[[], bool] | None = None) -> int:
    """Run until ``stop()`` says so (or Ctrl-C); reports a line per micro-batch
    with input; returns how many batches ran. A query stopped by a transient
    broker error (a 503 while a journal has no primary, a broker unreachable) is
    started again from its checkpoint, as Gazette's consumers retry; any other
    failure is raised (undecodable input as one `HeraldError`)."""
    from pyspark.errors import StreamingQueryException

    batches = restarts = 0
    while True:
        try:
            return batches + _run_query(spark, s, report, stop)
        except StreamingQueryException as exc:  # awaitTermination raises the query's failure
            if not _TRANSIENT.search(str(exc)) or restarts >= MAX_RESTARTS:
                raise _as_herald_error(exc) from None
            restarts += 1
            log.warning("summer: restarting the query (%d) after a transient broker error: %s", restarts,
                        _TRANSIENT.search(str(exc)).group(0))  # type: ignore[union-attr]
            if report is not None:
                report(f"restarting the query after a transient broker error ({restarts}/{MAX_RESTARTS})")


def _run_query(spark: Any, s: SummerSettings, report: Callable[[str], None] | None,
               stop: Callable[[], bool] | None) -> int:
    from herald.pipelines.progress import Batches

    query = start_summer(spark, s)
    batches = Batches()  # those that ran (a trigger that found no data is none: herald.pipelines.progress)
    try:
        while not query.awaitTermination(PROGRESS_POLL_S):
            for doc in batches.new(query):
                if report is not None and doc.get("numInputRows"):
                    report(_progress_line(doc))
            if stop is not None and stop():
                break
    except KeyboardInterrupt:
        log.warning("interrupted: stopping the summer")
    finally:
        if query.isActive:
            query.stop()
    return batches.count


MAX_RESTARTS = 20
_TRANSIENT = re.compile(r"HTTP 50[234] from broker|is unreachable|NO_JOURNAL_PRIMARY_BROKER|"
                        r"NOT_JOURNAL_PRIMARY_BROKER|INSUFFICIENT_JOURNAL_BROKERS")
_DECODE_ERROR = re.compile(r"MessageDecodeError: (offset \d+: journal \S+: [^\n]*)")


def _as_herald_error(exc: Exception) -> Exception:
    """A query stopped by undecodable input as one `HeraldError` naming the journal
    and offset (the CLI prints it as one line); any other failure as it is."""
    found = _DECODE_ERROR.search(str(exc))
    if found is None:
        return exc
    return HeraldError(Status.MESSAGE_DECODE_ERROR, f"the summer stopped at a message that is not a chunk: "
                                                    f"{found.group(1)}")


def _progress_line(doc: dict[str, Any]) -> str:
    out = (doc.get("sink") or {}).get("numOutputRows", 0)
    took_ms = (doc.get("durationMs") or {}).get("triggerExecution", 0)
    return f"batch {doc['batchId']}: chunks in {doc['numInputRows']}, sums out {out}, {took_ms} ms"
