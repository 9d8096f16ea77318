"""Exactly-once publishing from ``foreachBatch``: the herald sink's transaction for
queries Spark will not hand to a Python data-source sink.

Spark lets a Python data-source sink take only *append* output; a query in
*update* mode (a running count, a latest value per key) must write through
``foreachBatch``. `BatchPublisher` is that writer: called with each micro-batch
DataFrame (``key``, ``value``) and its batch id, it drives the sink's own
protocol (`herald.spark.sink`), so the output is exactly once [I-SINK-1]:

1. executors publish the batch's rows as CONTINUE_TXN messages
   (`herald.spark.sink_tasks.publish_rows`, a fresh producer per task attempt) and
   return their ACK intents, which the driver collects;
2. the driver runs `herald.spark.sink.commit_batch`: recover and fence if this
   is a new driver incarnation, record the intents at the batch id
   (create-if-absent), then append them under the fence register.

Records are kept per *(query id, batch id)*: the query id is Spark's (it lives in
the checkpoint, so a restarted driver has the same one, while a query started
on a fresh checkpoint counts batches from 0 again and must not meet the old
query's records). When Spark replays a batch after a crash, the recorded
intents win: the replay's own messages are never acknowledged, and nothing new
is published.

The fencing token is drawn once per driver process (`DRIVER_TOKEN`): the data
source sink derives it from its Python worker's parent, but here the commit
runs in the driver process itself. A driver that was fenced by a newer one gets
`herald.spark.sink.FencedError` and writes nothing.

    publisher = BatchPublisher(HeraldOptions.parse({"broker": url, "selector": "app=counts",
                                                    "stateLocation": "/ckpt/sink"}, streaming=True))
    counts.writeStream.outputMode("update").foreachBatch(publisher).start()
"""

from __future__ import annotations

import base64
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from herald.message import AckIntent
from herald.protocol.errors import ValidationError
from herald.spark.options import HeraldOptions
from herald.spark.sink import SinkCommit, commit_batch
from herald.spark.sink_tasks import publish_rows

__all__ = ["DRIVER_TOKEN", "BatchPublisher"]

DRIVER_TOKEN = os.urandom(8).hex()
QUERY_ID_PROPERTY = "sql.streaming.queryId"  # set by Spark on the thread running a micro-batch
COMMIT_SCHEMA = pa.schema([("commit", pa.binary())])


class BatchPublisher:
    """A ``foreachBatch`` function that publishes each micro-batch exactly once.

    ``opts`` are the sink's options (``broker``, ``selector``, ``mapping``,
    ``stateLocation`` for the records); ``token`` is this driver's fencing token
    (one per process unless a test plays two drivers)."""

    def __init__(self, opts: HeraldOptions, token: str = DRIVER_TOKEN) -> None:
        if not opts.state_location:
            raise ValidationError("stateLocation", "required: the directory of the sink's batch records")
        self.opts = opts
        self.token = token

    def __call__(self, frame: Any, batch_id: int) -> None:
        """Driver, once per micro-batch (Spark's ``foreachBatch`` signature)."""
        self.publish(frame, batch_id)

    def publish(self, frame: Any, batch_id: int, query_id: str | None = None) -> int:
        """Driver: publish ``frame`` (``key``, ``value``) exactly once as batch
        ``batch_id`` of ``query_id`` (default: the running query's, from Spark);
        returns the rows this call published (0 for a replay, whose recorded
        intents are re-appended instead). Raises FencedError if a newer driver
        took over."""
        opts = self._options_of(query_id or _running_query_id(frame))
        rows = frame.mapInArrow(lambda batches: _publish_partition(opts, batches), "commit binary").collect()
        commits = [_commit_of(row) for row in rows]
        record = commit_batch(opts, self.token, commits, batch_id)
        ours = tuple(AckIntent(journal, data) for c in commits for journal, data in c.intents)
        return sum(c.rows for c in commits) if record.intents == ours else 0

    def _options_of(self, query_id: str) -> HeraldOptions:
        location = str(Path(self.opts.state_location) / "queries" / query_id)
        return dataclasses.replace(self.opts, state_location=location)


def _running_query_id(frame: Any) -> str:
    query_id = frame.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
    if not query_id:
        raise ValidationError("query_id", "not inside a streaming query's foreachBatch: pass query_id")
    return str(query_id)


def _publish_partition(opts: HeraldOptions, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor, once per task attempt: publish uncommitted, return the ACK intents as one row."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    seed = ctx.taskAttemptId() if ctx else int.from_bytes(os.urandom(4), "big")
    done = publish_rows(opts, batches, seed)
    doc = {"rows": done.rows, "producer": done.producer,
           "intents": [[journal, base64.b64encode(data).decode()] for journal, data in done.intents]}
    yield pa.RecordBatch.from_arrays([pa.array([orjson.dumps(doc)], pa.binary())], schema=COMMIT_SCHEMA)


def _commit_of(row: Any) -> SinkCommit:
    doc = orjson.loads(row["commit"])
    return SinkCommit([(j, base64.b64decode(d)) for j, d in doc["intents"]], doc["rows"], doc["producer"])
