"""`BatchPublisher`: exactly-once publishing from ``foreachBatch`` [I-SINK-1], with
real Spark local mode and a real broker: a replayed (query id, batch id) publishes
nothing new, a fenced older driver is refused, and a running query is keyed by
Spark's own query id."""

from __future__ import annotations

import json

import pytest

from herald.spark.batch_publisher import BatchPublisher
from herald.spark.options import HeraldOptions
from herald.spark.sink import FencedError
from herald.testing import Producer, make_journals
from tests.spark.spark_helpers import reference_committed

pytestmark = pytest.mark.spark
OLD_DRIVER, NEW_DRIVER = "a1" * 8, "b2" * 8


def _options(broker, selector: str, state) -> HeraldOptions:
    return HeraldOptions.parse({"broker": broker.url, "selector": selector, "mapping": "modulo",
                                "stateLocation": str(state)}, streaming=True)


def _frame(spark, numbers):
    return spark.createDataFrame([(str(n), json.dumps({"n": n}).encode()) for n in numbers], "key string, value binary")


def _committed(client, journals) -> list[int]:
    return sorted(json.loads(v)["n"] for j in journals for v in reference_committed(client, j))


def test_a_replayed_batch_id_publishes_nothing_new(spark, broker, client, tmp_path):
    outs = make_journals(broker, "bp1/out-0", "bp1/out-1", labels={"app": "bp1-out"})
    publisher = BatchPublisher(_options(broker, "app=bp1-out", tmp_path / "sink"), OLD_DRIVER)
    assert publisher.publish(_frame(spark, range(10)), 0, query_id="q1") == 10
    assert publisher.publish(_frame(spark, range(100, 110)), 0, query_id="q1") == 0  # Spark's replay of batch 0
    assert _committed(client, outs) == list(range(10))
    # Another query (a fresh checkpoint: batch ids from 0 again) is not the first one's replay.
    assert publisher.publish(_frame(spark, range(200, 205)), 0, query_id="q2") == 5
    assert _committed(client, outs) == [*range(10), *range(200, 205)]


def test_a_fenced_older_driver_is_refused_and_writes_nothing(spark, broker, client, tmp_path):
    outs = make_journals(broker, "bp2/out-0", "bp2/out-1", labels={"app": "bp2-out"})
    opts = _options(broker, "app=bp2-out", tmp_path / "sink")
    old, new = BatchPublisher(opts, OLD_DRIVER), BatchPublisher(opts, NEW_DRIVER)
    assert old.publish(_frame(spark, range(5)), 0, query_id="q") == 5
    assert new.publish(_frame(spark, range(5, 10)), 1, query_id="q") == 5  # takes over: fences the old one
    with pytest.raises(FencedError, match="another driver took over"):
        old.publish(_frame(spark, range(90, 95)), 2, query_id="q")
    assert _committed(client, outs) == list(range(10))


def test_a_running_query_publishes_each_batch_once_under_its_query_id(spark, broker, client, tmp_path):
    [src] = make_journals(broker, "bp3/in", labels={"app": "bp3-in"})
    outs = make_journals(broker, "bp3/out-0", "bp3/out-1", labels={"app": "bp3-out"})
    Producer(client).committed(src, *[{"n": i} for i in range(40)])
    publisher = BatchPublisher(_options(broker, "app=bp3-out", tmp_path / "sink"))
    frame = (spark.readStream.format("herald").option("broker", broker.url).option("selector", "app=bp3-in")
             .option("stateLocation", str(tmp_path / "source")).option("maxBytesPerTrigger", "1500").load())
    query = (frame.selectExpr("CAST(begin AS STRING) AS key", "value").writeStream.foreachBatch(publisher)
             .option("checkpointLocation", str(tmp_path / "query")).trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None
    assert _committed(client, outs) == list(range(40))
    assert [p.name for p in (tmp_path / "sink" / "queries").iterdir()] == [query.id]
