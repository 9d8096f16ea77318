"""The job's exactly-once output: the herald sink's transaction, driven from ``foreachBatch``.

Spark lets a Python data source sink take only *append* output, and a running
count is an *update* (each batch re-emits the new total of every bigram it
touched). ``foreachBatch`` accepts update mode, so the job drives the sink's
own protocol (`herald.spark.sink`) itself, for each micro-batch ``batch_id``:

1. executors publish the batch's rows as CONTINUE_TXN messages
   (`herald.spark.sink.publish_rows`, one fresh producer per task attempt) and
   return their ACK intents, which the driver collects;
2. the driver runs `herald.spark.sink.commit_batch`: recover and fence if this
   is a new driver incarnation, record the intents at ``batch_id``
   (create-if-absent), then append them.

Spark calls ``foreachBatch`` again with the same ``batch_id`` when it replays a
batch after a crash; the recorded intents win, so the replay's own messages are
never acknowledged and readers see each batch's counts once [I-SINK-1].

The incarnation token is drawn once per driver process (`DRIVER_TOKEN`): the
data source sink derives it from its Python worker's parent, but here the
commit runs in the driver process itself.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from typing import Any

import orjson
import pyarrow as pa

from herald.spark.options import HeraldOptions
from herald.spark.sink import SinkCommit, commit_batch, publish_rows

__all__ = ["DRIVER_TOKEN", "publish_batch", "sink_options"]

DRIVER_TOKEN = os.urandom(8).hex()
COMMIT_SCHEMA = pa.schema([("commit", pa.binary())])


def sink_options(broker: str, selector: str, state_location: str) -> HeraldOptions:
    """The sink's options: modulo mapping on ``key``, records under ``state_location``."""
    return HeraldOptions.parse({"broker": broker, "selector": selector, "mapping": "modulo",
                                "stateLocation": state_location}, streaming=True)


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


def publish_batch(opts: HeraldOptions, frame: Any, batch_id: int) -> int:
    """Driver (``foreachBatch``): publish ``frame`` (``key``, ``value``) exactly once as
    batch ``batch_id``; returns the rows published. Raises FencedError if a newer
    driver took over."""
    rows = frame.mapInArrow(lambda batches: _publish_partition(opts, batches), "commit binary").collect()
    commits = [_commit_of(row) for row in rows]
    commit_batch(opts, DRIVER_TOKEN, commits, batch_id)
    return sum(c.rows for c in commits)
