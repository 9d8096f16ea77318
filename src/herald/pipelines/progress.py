"""A streaming query's micro-batches, each once, from its progress reports.

Spark reports a progress for every micro-batch that ran, and also for a trigger
that found no new data (at most every ``spark.sql.streaming.noDataProgressEventInterval``,
10 s, and at once on a query's first idle trigger). That idle report carries the id
of the batch *not yet run*: the batch that later runs with data reports the same
id. A run loop that counted batches by id alone took the idle report for the
batch, and never reported the batch itself: a summer whose first trigger came
before its first chunk printed no line for it (a crash test waits for that line),
and the dedupe's totals missed the batch's rows. An idle report is told apart by what
it lacks: a batch that ran timed its ``addBatch`` (the sink's step); a trigger
that found nothing timed only ``latestOffset``.

    batches = Batches()
    for doc in batches.new(query):   # oldest first, each batch once
        print(doc["batchId"], doc["numInputRows"])
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["Batches", "as_dict", "ran"]


def as_dict(progress: Any) -> dict[str, Any]:
    """A progress report (PySpark's ``StreamingQueryProgress``, or a dict already) as a dict."""
    if isinstance(progress, dict):
        return progress
    if hasattr(progress, "json"):
        return orjson.loads(progress.json)  # type: ignore[no-any-return]
    return dict(progress)


def ran(doc: dict[str, Any]) -> bool:
    """Whether ``doc`` reports a micro-batch that ran (not a trigger that found no data)."""
    return "addBatch" in (doc.get("durationMs") or {})


class Batches:
    """The micro-batches of one query seen so far: the id of the last that ran and
    how many did. Batch ids only grow, so a high-water mark tells a new batch from
    one already reported (a set of every id would grow for as long as the query runs)."""

    __slots__ = ("count", "last")

    def __init__(self) -> None:
        self.last = -1
        self.count = 0

    def new(self, query: Any) -> list[dict[str, Any]]:
        """The progress of each batch of ``query`` that ran since the last call,
        oldest first. Reads ``query.recentProgress``: call it more often than
        Spark's buffer of recent reports fills (100 batches)."""
        found = []
        for doc in map(as_dict, query.recentProgress):
            batch = int(doc.get("batchId", -1))
            if batch > self.last and ran(doc):
                self.last = batch
                self.count += 1
                found.append(doc)
        return found
