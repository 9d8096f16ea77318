"""The word-count Spark job: documents in, exactly-once bigram count updates out.

The query (Gazette's word-count consumer, on Spark)::

    herald source (read-committed documents)
      → mapInArrow: each document's bigrams (`herald.examples.word_count.tokens`)
      → groupBy(bigram).count()          # running totals in the RocksDB state store
      → outputMode("update")             # each batch emits the new total of every bigram it touched
      → foreachBatch: `herald.spark.batch_publisher.BatchPublisher`, the herald
        sink's transaction (exactly once, mapped by bigram; Spark refuses update
        mode on a Python data-source sink, so not ``format("herald")``)

A micro-batch is the consumer transaction: the state store's version, the
source offsets and the sink's ACK intents commit together, so after a crash the
batch is replayed from the same offsets against the same state version, and the
replay's messages roll back the abandoned attempt's [I-SINK-1]. Each output
message is ``{"bigram": "the city", "count": 12}``: the bigram's total so far.
Readers keep the latest count per bigram (the query service does).

**Bad documents** (a message whose value is not a JSON object with a string
``text``, or whose bytes are not UTF-8 JSON — `publish` never writes one, but a
raw append can): by default the job *stops*, naming the journal and offset of
the message (`BadDocumentError`); nothing of that batch is published, so no
count is ever wrong. ``on_bad_document="skip"`` drops such a message instead and
logs ``skipped bad document journal=… offset=…`` from the executor, so counts
are exact over every *good* document.

    settings = WordCountSettings(broker=url, checkpoint="/tmp/wc")
    run_word_count(spark, settings)          # blocks; available-now returns when done
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from herald.examples.word_count.journals import COUNTS_SELECTOR, DOCS_SELECTOR
from herald.examples.word_count.tokens import bigrams
from herald.pipelines.progress import Batches
from herald.pipelines.streaming import validate_trigger
from herald.protocol.errors import HeraldError, Status, ValidationError

__all__ = ["BadDocumentError", "WordCountSettings", "document_bigrams", "run_word_count", "start_word_count"]

log = logging.getLogger(__name__)

QUERY_NAME = "herald-word-count"
PROGRESS_POLL_S = 1.0
POLICIES = ("fail", "skip")
BIGRAM_SCHEMA = pa.schema([("bigram", pa.string())])


class BadDocumentError(HeraldError):
    """A message of the document journals that is not a document (it is never counted)."""

    def __init__(self, journal: str, offset: int, reason: str) -> None:
        super().__init__(Status.MESSAGE_DECODE_ERROR,
                         f"offset {offset}: journal {journal}: not a document: {reason} "
                         "(run with --on-bad-document skip to drop such messages)",
                         extra={"journal": journal, "offset": offset})


@dataclass(frozen=True, slots=True)
class WordCountSettings:
    """One word-count job. ``trigger`` is ``available-now`` or seconds between batches."""

    broker: str
    checkpoint: str
    input: str = DOCS_SELECTOR
    output: str = COUNTS_SELECTOR
    trigger: str = "available-now"
    on_bad_document: str = "fail"
    max_bytes_per_trigger: int = 0

    def __post_init__(self) -> None:
        if self.on_bad_document not in POLICIES:
            raise ValidationError("on_bad_document", f"want fail or skip, got {self.on_bad_document!r}")
        if self.max_bytes_per_trigger < 0:
            raise ValidationError("max_bytes_per_trigger", f"want >= 0, got {self.max_bytes_per_trigger}")
        validate_trigger(self.trigger)


def _document_text(value: bytes | None) -> str:
    """The ``text`` of one message value; ValueError says why it is not a document."""
    try:
        doc = orjson.loads(value or b"")
    except orjson.JSONDecodeError as err:
        raise ValueError(f"not UTF-8 JSON ({err})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
        raise ValueError("want a JSON object with a string field 'text'")
    text: str = doc["text"]
    return text


def document_bigrams(batches: Iterator[pa.RecordBatch], skip_bad: bool) -> Iterator[pa.RecordBatch]:
    """Executor (``mapInArrow``): one ``bigram`` row per bigram occurrence of each document."""
    for batch in batches:
        journals, begins = batch.column("journal").to_pylist(), batch.column("begin").to_pylist()
        found: list[str] = []
        for journal, begin, value in zip(journals, begins, batch.column("value").to_pylist()):
            try:
                found.extend(bigrams(_document_text(value)))
            except ValueError as err:
                if not skip_bad:
                    raise BadDocumentError(journal, begin, str(err)) from None
                log.warning("skipped bad document journal=%s offset=%d: %s", journal, begin, err)
        if found:
            yield pa.RecordBatch.from_arrays([pa.array(found, pa.string())], schema=BIGRAM_SCHEMA)


def count_frame(spark: Any, s: WordCountSettings) -> Any:
    """The streaming DataFrame of count updates: ``key`` (the bigram), ``value`` (JSON)."""
    from pyspark.sql import functions as F

    import herald.spark

    herald.spark.register(spark)
    src = (spark.readStream.format("herald").option("broker", s.broker).option("selector", s.input)
           .option("stateLocation", str(Path(s.checkpoint) / "source"))
           .option("onDecodeError", s.on_bad_document)
           .option("maxBytesPerTrigger", str(s.max_bytes_per_trigger)).load())
    skip_bad = s.on_bad_document == "skip"
    found = src.select("journal", "begin", "value").mapInArrow(
        lambda batches: document_bigrams(batches, skip_bad), "bigram string")
    counts = found.groupBy("bigram").count()
    value = F.to_json(F.struct(F.col("bigram"), F.col("count"))).cast("binary")
    return counts.select(F.col("bigram").alias("key"), value.alias("value"))


def start_word_count(spark: Any, s: WordCountSettings) -> Any:
    """Start the query (returns the StreamingQuery; the caller awaits it)."""
    from herald.pipelines.streaming import prepare_queries, with_trigger
    from herald.spark import HeraldOptions
    from herald.spark.batch_publisher import BatchPublisher

    prepare_queries(spark)
    opts = HeraldOptions.parse({"broker": s.broker, "selector": s.output, "mapping": "modulo",
                                "stateLocation": str(Path(s.checkpoint) / "sink")}, streaming=True)
    writer = (count_frame(spark, s).writeStream.queryName(QUERY_NAME).foreachBatch(BatchPublisher(opts))
              .option("checkpointLocation", str(Path(s.checkpoint) / "query")).outputMode("update"))
    return with_trigger(writer, s.trigger).start()


def run_word_count(spark: Any, s: WordCountSettings, report: Callable[[str], None] | None = print,
                   stop: Callable[[], bool] | None = None) -> int:
    """Run until an available-now run is done (or ``stop()``, or Ctrl-C), reporting a
    line per micro-batch; returns the number of batches seen. Raises the query's error."""
    query = start_word_count(spark, s)
    batches = Batches()
    try:
        while True:
            finished = query.awaitTermination(PROGRESS_POLL_S)
            _report_batches(query, batches, report)
            if finished or (stop is not None and stop()):
                break
    except KeyboardInterrupt:
        log.warning("interrupted: stopping the word-count query")
    finally:
        if query.isActive:
            query.stop()
    _report_batches(query, batches, report)
    if query.exception() is not None:
        raise query.exception()
    return batches.count


def _report_batches(query: Any, batches: Batches, report: Callable[[str], None] | None) -> None:
    """A line for each batch that ran with input (an idle trigger's report is none:
    `herald.pipelines.progress`)."""
    for doc in batches.new(query):
        if report is not None and doc.get("numInputRows", 0):
            report(f"batch {doc['batchId']}: {doc['numInputRows']} documents, {_updates(doc)} bigram counts "
                   f"published")


def _updates(doc: dict[str, Any]) -> int:
    ops = doc.get("stateOperators") or [{}]
    return int(ops[0].get("numRowsUpdated", 0))
