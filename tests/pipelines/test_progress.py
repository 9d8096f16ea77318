"""`herald.pipelines.progress.Batches`: each micro-batch that ran is reported once,
an idle trigger's report (which carries the id of the batch not yet run) never,
and what it keeps does not grow with the query's age."""

from __future__ import annotations

from types import SimpleNamespace

from herald.pipelines.progress import Batches


def _ran(batch: int, rows: int) -> dict:
    return {"batchId": batch, "numInputRows": rows, "durationMs": {"latestOffset": 1, "addBatch": 5}}


def _idle(batch: int) -> dict:
    return {"batchId": batch, "numInputRows": 0, "durationMs": {"latestOffset": 1, "triggerExecution": 1}}


def test_each_batch_that_ran_is_new_once_and_an_idle_report_never():
    query = SimpleNamespace(recentProgress=[_idle(0)])
    batches = Batches()
    assert batches.new(query) == []  # batch 0 has not run yet
    query.recentProgress = [_idle(0), _ran(0, 7), _ran(1, 3)]
    assert [d["batchId"] for d in batches.new(query)] == [0, 1]
    query.recentProgress = [_ran(0, 7), _ran(1, 3), _idle(2), _ran(2, 4)]
    assert [d["batchId"] for d in batches.new(query)] == [2]
    assert batches.new(query) == []
    assert (batches.count, batches.last) == (3, 2)
