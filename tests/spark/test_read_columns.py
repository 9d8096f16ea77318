"""A user schema naming a subset of the read's columns (herald.spark.projection):
the tasks build and send only those, with exactly the full read's values, batch
and stream; a schema the read can't give is a clear error naming the column."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from herald.message.columnar import scan_ndjson
from herald.protocol.errors import ValidationError
from herald.spark.options import HeraldOptions
from herald.spark.projection import built_columns, select_columns
from herald.spark.rows import ARROW_SCHEMA, RowBuffer, columns_batch
from herald.testing import Producer, make_journals
from tests.spark.spark_helpers import herald_read, run_stream, stream_rows
from tests.spark.test_rows_bulk import FRAMING, JOURNAL, lines

SUBSETS = [frozenset(names) for names in (["journal", "begin", "timestamp", "value"], ["uuid"], ["producer", "end"],
                                          ["clock", "flags"], ["value"])]


@settings(max_examples=60, deadline=None)
@given(st.lists(lines, max_size=30), st.sampled_from(SUBSETS))
def test_subset_batches_hold_the_full_batch_columns(body, columns):
    """Bulk (`columns_batch`) and per-message (`RowBuffer`) paths alike."""
    cols, _ = scan_ndjson(b"".join(body), 0, FRAMING)
    if not len(cols):
        return
    full, part = columns_batch(JOURNAL, cols), columns_batch(JOURNAL, cols, columns)
    rows = RowBuffer(JOURNAL, columns=columns)
    for i in range(len(cols)):
        rows.add(full.column("begin")[i].as_py(), full.column("end")[i].as_py(),
                 bytes(cols.uuids[i]) if cols.has_uuid[i] else None, full.column("value")[i].as_py())
    per_message = rows.flush()
    assert part.schema.names == per_message.schema.names == [n for n in ARROW_SCHEMA.names if n in columns]
    assert part.equals(full.select(part.schema.names)) and per_message.equals(part)


def _opts(**options: str) -> HeraldOptions:
    return HeraldOptions.parse({"broker": "http://localhost:1", **options}, streaming=False)


def test_select_columns_keeps_the_schema_order_and_builds_value_for_keys():
    schema = StructType([StructField("key", StringType()), StructField("begin", LongType())])
    opts = select_columns(schema, _opts(keyField="messageId"))
    assert opts.columns == ("key", "begin") and built_columns(opts) == {"begin", "value"}
    schema = StructType([StructField("value", BinaryType()), StructField("dedupe_key", StringType())])
    opts = select_columns(schema, _opts(dedupeKey="messageId"))  # a keyless message is keyed by its position
    assert opts.columns == ("value", "dedupe_key") and built_columns(opts) == {"journal", "begin", "value"}


@pytest.mark.parametrize(("fields", "message"), [
    ([StructField("offset", LongType())], "column 'offset' is not one of the read's columns"),
    ([StructField("begin", StringType())], "column 'begin' is bigint, not string"),
    ([StructField("value", BinaryType()), StructField("value", BinaryType())], "column 'value' is named twice"),
    ([StructField("json_n", StringType())], "column 'json_n' is not one of"),  # no jsonFields option
])
def test_a_schema_the_read_cant_give_is_an_error_naming_the_column(fields, message):
    with pytest.raises(ValidationError, match=message):
        select_columns(StructType(fields), _opts())


COMPARED = "begin long, value binary, timestamp timestamp, json_n string"


def _journal(broker, client, name: str) -> None:
    """Committed, duplicated and rolled-back messages: bulk and per-message sequencing."""
    [journal] = make_journals(broker, name, labels={"app": name.replace("/", "-")})
    a, b = Producer(client), Producer(client)
    for i in range(20):
        a.uncommitted(journal, {"n": i, "pad": "q" * 30})
    dup = b.committed(journal, *[{"n": 100 + i} for i in range(10)])
    client.append(journal, dup)
    [ack] = a.ack()
    a.uncommitted(journal, {"n": 999})
    client.append(journal, ack.data)  # rolls {"n": 999} back


@pytest.mark.spark
def test_subset_schema_reads_the_full_reads_values_batch_and_stream(spark, broker, client, tmp_path):
    _journal(broker, client, "cols/a")
    full = herald_read(spark, broker, "app=cols-a", committed=True, jsonFields="n")
    want = [tuple(r) for r in full.select("begin", "value", "timestamp", "json_n").orderBy("begin").collect()]
    reader = (spark.read.format("herald").schema(COMPARED).option("broker", broker.url)
              .option("selector", "app=cols-a").option("committed", "true").option("jsonFields", "n"))
    part = reader.load()
    assert part.columns == ["begin", "value", "timestamp", "json_n"] and len(want) == 30
    assert [tuple(r) for r in part.orderBy("begin").collect()] == want
    raw = herald_read(spark, broker, "app=cols-a", jsonFields="n", maxPartitionBytes=700)
    uncommitted = reader.option("committed", "false").option("maxPartitionBytes", "700").load()
    assert uncommitted.rdd.getNumPartitions() > 1
    assert sorted(map(tuple, uncommitted.collect())) == sorted(map(tuple, raw.select(*part.columns).collect()))

    ck, out = tmp_path / "ck", tmp_path / "out"
    run_stream(spark, broker, "app=cols-a", ck, out, max_bytes=700, jsonFields="n",
               schema="value binary, journal string, json_n string")
    got = sorted((bytes(r.value), r.journal, r.json_n) for r in stream_rows(spark, out))
    assert got == sorted((bytes(v), "cols/a", n) for _, v, _, n in want)


@pytest.mark.spark
def test_a_bad_schema_fails_the_read_naming_the_column(spark, broker):
    with pytest.raises(Exception, match="column 'uuid' is string, not bigint"):
        (spark.read.format("herald").schema("begin long, uuid long").option("broker", broker.url)
         .option("selector", "app=none").load().collect())
