"""The ``jsonFields`` columns of reads: top-level NDJSON fields parsed in the
Python worker, equal to what ``from_json`` gives in the JVM, row for row."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herald.protocol.errors import ValidationError
from herald.spark.fields import field_columns, field_text, line_columns, parse_json_fields, with_dedupe_key, with_fields
from herald.spark.options import HeraldOptions
from herald.testing import Producer, make_journals
from tests.spark.spark_helpers import herald_read, run_stream, stream_rows

FIELDS = ("messageId", "timestamp")
#: Lines the bulk parse rejects or that read differently: each must come out as from_json's.
ODD_LINES = [
    b'{"messageId":"a\\u00e9\\n\\"q","timestamp":"2026-01-01T00:00:00Z"}',
    '{"messageId":"é✓ ünï"}'.encode(),
    b'{"messageId":17}', b'{"messageId":-3,"timestamp":1.5}', b'{"messageId":1e3}', b'{"messageId":1.0E-4}',
    b'{"messageId":123456789.5}', b'{"messageId":true}', b'{"messageId":null}', b'{"other":"x"}', b'{}',
    b'{"messageId":{"b":[1,"x",{"messageId":"no"}]}}', b'{"messageId":[1,2]}',
    b'{"x":{"messageId":"nested"}}', b'{"messageId":"first","messageId":"last"}',
    b'[1,2]', b'"text"', b'12', b'', b'   ', b'{"messageId":"cut', b'{"messageId":"tab\there"}',
    b'\xff{"messageId":"a"}', b'{"messageId":"a"}\r', b'  {"messageId":"indented"}',
]

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["messageId", "k", "timestamp"]), inner,
                                                 max_size=3)), max_leaves=6)
documents = st.dictionaries(st.sampled_from(["messageId", "timestamp", "n", "payload", "é"]), json_values,
                            max_size=4).map(orjson.dumps)
lines = st.one_of(documents, documents, documents, st.sampled_from(ODD_LINES), st.binary(max_size=8))


@settings(max_examples=300, deadline=None)
@given(st.lists(lines, max_size=20), st.integers(0, 3))
def test_bulk_and_line_by_line_give_identical_columns(values, cut):
    """Whatever the mix, the batch's columns equal the per-line definition, also
    for a slice of the batch (a batch's value buffer need not start at 0)."""
    array = pa.array(values, pa.binary()).slice(min(cut, len(values)))
    got = [c.to_pylist() for c in field_columns(array, FIELDS)]
    assert got == [c.to_pylist() for c in line_columns(values[min(cut, len(values)):], FIELDS)]


def test_a_batch_of_plain_events_parses_in_bulk():
    from herald.spark.fields import _bulk_columns

    array = pa.array([orjson.dumps({"messageId": f"m-{i}", "payload": {"messageId": 1}}) for i in range(50)])
    bulk = _bulk_columns(array, FIELDS)
    assert bulk is not None and bulk[0].to_pylist() == [f"m-{i}" for i in range(50)]
    assert _bulk_columns(pa.array([b'{"messageId":1}'] * 3), FIELDS) is None  # not a string: line by line


@settings(max_examples=100, deadline=None)
@given(st.lists(lines, max_size=12), st.booleans())
def test_the_dedupe_key_is_the_field_else_the_position(values, also_a_json_field):
    """``dedupe_key``: the field as ``json_<field>`` reads it, or ``<journal>:<begin>``
    where that is null, whether or not ``jsonFields`` names the field too."""
    begins = [1000 + 37 * i for i in range(len(values))]
    batch = pa.RecordBatch.from_arrays([pa.array(["a/journal"] * len(values)), pa.array(begins, pa.int64()),
                                        pa.array(values, pa.binary())], names=["journal", "begin", "value"])
    batches = iter([batch])
    if also_a_json_field:
        batches = with_fields(batches, ["timestamp", "messageId"])
    [out] = list(with_dedupe_key(batches, "messageId"))
    [texts] = line_columns(values, ["messageId"])
    want = [text if text is not None else f"a/journal:{begin}" for text, begin in zip(texts.to_pylist(), begins)]
    assert out.column(out.schema.get_field_index("dedupe_key")).to_pylist() == want
    assert out.schema.names[-1] == "dedupe_key" and out.num_columns == batch.num_columns + 1 + 2 * also_a_json_field


def test_a_bad_dedupe_key_option_is_an_error_naming_it():
    with pytest.raises(ValidationError, match="dedupeKey.*comma or backtick"):
        HeraldOptions.parse({"broker": "http://localhost:1", "dedupeKey": "a,b"}, streaming=False)


@pytest.mark.parametrize("value, text", [
    (17, "17"), (True, "true"), (False, "false"), (1.5, "1.5"), (1000.0, "1000.0"), (1e-4, "1.0E-4"),
    (123456789.5, "1.234567895E8"), (-2.5e300, "-2.5E300"), ({"a": [1, "x"]}, '{"a":[1,"x"]}'), (None, None),
])
def test_a_non_string_field_reads_as_sparks_json_text(value, text):
    assert field_text(value) == text


@pytest.mark.parametrize("text, message", [
    ("messageId,", "empty one"), ("a,,b", "empty one"), ("a`b", "backtick"), ("id,ID", "twice"),
])
def test_a_bad_json_fields_option_is_an_error_naming_it(text, message):
    with pytest.raises(ValidationError, match=f"jsonFields.*{message}"):
        HeraldOptions.parse({"broker": "http://localhost:1", "jsonFields": text}, streaming=False)
    assert parse_json_fields(" messageId , timestamp ") == FIELDS


@pytest.mark.spark
def test_the_columns_equal_from_json_in_spark(spark, broker, client, tmp_path):
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    journal = make_journals(broker, "fields/a", labels={"app": "fields"})[0]
    for i in range(10):
        Producer(client).committed(journal, {"messageId": f"m-{i}", "timestamp": f"2026-01-0{i % 9 + 1}"})
    client.append(journal, b"\n".join(line.replace(b"\n", b" ") for line in ODD_LINES) + b"\n")
    df = herald_read(spark, broker, "app=fields", jsonFields="messageId,timestamp", dedupeKey="messageId",
                     onDecodeError="skip")
    schema = StructType([StructField(name, StringType()) for name in FIELDS])
    doc = F.from_json(F.col("value").cast("string"), schema)
    position = F.concat(F.col("journal"), F.lit(":"), F.col("begin").cast("string"))
    rows = df.select("json_messageId", "json_timestamp", "dedupe_key", doc["messageId"].alias("m"),
                     doc["timestamp"].alias("t"), F.coalesce(doc["messageId"], position).alias("k")).collect()
    assert len(rows) >= 10 + 15  # the Producer's events and the odd lines the framing lets through
    assert [(r.json_messageId, r.json_timestamp, r.dedupe_key) for r in rows] == [(r.m, r.t, r.k) for r in rows]
    assert any(r.m is None for r in rows)  # some are keyed by their position

    stream_journal = make_journals(broker, "fields/b", labels={"app": "fields-stream"})[0]
    for i in range(10):
        Producer(client).committed(stream_journal, {"messageId": f"m-{i}"})
    run_stream(spark, broker, "app=fields-stream", tmp_path / "ck", tmp_path / "out", jsonFields="messageId")
    streamed = stream_rows(spark, tmp_path / "out")
    assert sorted(r.json_messageId for r in streamed) == sorted(f"m-{i}" for i in range(10))


@pytest.mark.parametrize("field, value", [("key", "a,b"), ("time_field", "t`s")])
def test_the_dedupe_refuses_a_field_name_json_fields_cannot_carry(field, value):
    from herald.pipelines.dedupe import DedupeSettings

    with pytest.raises(ValidationError, match=f"{field}.*comma or backtick"):
        DedupeSettings(broker="http://localhost:1", input="", output="", checkpoint="/tmp/x", **{field: value})
