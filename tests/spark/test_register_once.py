"""``herald.spark.register`` sets a session up once: a pipeline calls it for every
query it starts, and the later calls return at once (no bytecode walk, no class
pickled to the JVM again)."""

from __future__ import annotations

import pytest

import herald.spark
from herald.testing import Producer, make_journals

pytestmark = pytest.mark.spark


def test_register_is_remembered_per_session_and_later_calls_leave_the_format_working(spark, broker, client):
    [journal] = make_journals(broker, "register-once/a")
    Producer(client).committed(journal, *[{"n": i} for i in range(5)])
    assert spark in herald.spark._registered  # the fixture's make_spark_session registered it
    herald.spark.register(spark)  # again, as a pipeline does per query: returns at once
    herald.spark.register(spark)
    df = spark.read.format("herald").option("broker", broker.url).option("selector", f"name={journal}").load()
    assert df.count() == 5
