"""The ``key`` column of reads (``keyField``): each message's mapping key, as
Kafka's source gives one, and the same key Herald's sink maps by."""

from __future__ import annotations

import pytest

from herald.spark.keys import key_of
from herald.testing import Producer, make_journals
from tests.spark.spark_helpers import herald_read, run_stream, stream_rows


@pytest.mark.parametrize("value, field, key", [
    (b'{"messageId":"m-1","n":2}\n', "messageId", "m-1"),
    (b'{"messageId":17}\n', "messageId", "17"),
    (b'{"messageId":{"a":1}}\n', "messageId", '{"a":1}'),
    (b'{"other":1}\n', "messageId", None),
    (b'[1,2]\n', "messageId", None),
    (b'{"messageId": "half\n', "messageId", None),
    (b'\xff\xfe', "messageId", None),
    (b'3,"Penn, St",x\n', "1", "Penn, St"),
    (b'3,4\n', "7", None),
])
def test_key_of_a_value(value, field, key):
    assert key_of(value, field) == key


@pytest.mark.spark
def test_batch_and_stream_reads_carry_the_key_the_sink_maps_by(spark, broker, client, tmp_path):
    journals = make_journals(broker, "keys/a", "keys/b", labels={"app": "keys"})
    p = Producer(client)
    for i in range(20):
        p.committed(journals[i % 2], {"messageId": f"m-{i}", "n": i})
    rows = herald_read(spark, broker, "app=keys", keyField="messageId").collect()
    assert sorted(r.key for r in rows) == sorted(f"m-{i}" for i in range(20))
    assert herald_read(spark, broker, "app=keys").columns[-1] == "value"  # No keyField, no column.

    ck, out = tmp_path / "ck", tmp_path / "out"
    run_stream(spark, broker, "app=keys", ck, out, keyField="messageId")
    assert sorted(r.key for r in stream_rows(spark, out)) == sorted(f"m-{i}" for i in range(20))
