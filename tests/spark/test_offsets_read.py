"""Batch reads honour ``startingOffsets`` / ``endingOffsets`` / ``minPartitions``, fail
on pruned bytes unless ``failOnDataLoss=false``, and take a list of brokers."""

from __future__ import annotations

import json
import os
import socket
import time

import pytest

from herald.spark.offsets import DataLossError, check_data_loss
from herald.testing import Producer, make_journals
from herald.testing.waiting import wait_until
from tests.spark.spark_helpers import run_stream, stream_rows

pytestmark = pytest.mark.spark


def batch(spark, broker_url: str, selector: str, **options):
    reader = spark.read.format("herald").option("broker", broker_url).option("selector", selector)
    for k, v in options.items():
        reader = reader.option(k, v if isinstance(v, str) else json.dumps(v))
    return reader.load()


def test_batch_reads_honour_starting_and_ending_offsets_and_min_partitions(spark, broker, client):
    [a, b] = make_journals(broker, "offs/a", "offs/b", labels={"app": "offs"}, length=1024)
    p = Producer(client)
    ends = []
    for i in range(10):
        p.committed(a, {"n": i, "pad": "x" * 600})  # about two a fragment
        ends.append(client.write_head(a))
    p.committed(b, {"n": 100})
    wait_until(lambda: len(persisted(client, a)) >= 3, "3 persisted fragments")
    rows = batch(spark, broker.url, "app=offs", startingOffsets={a: ends[1]}, endingOffsets={a: ends[4]}).collect()
    got = sorted((r.journal, json.loads(r.value)["n"]) for r in rows)
    assert got == [(a, 2), (a, 3), (a, 4), (b, 100)]  # b: earliest..latest
    assert batch(spark, broker.url, "app=offs", startingOffsets="latest").count() == 0
    assert batch(spark, broker.url, f"name={a}").rdd.getNumPartitions() == 1  # packed: 64 MiB partitions
    for committed in ("false", "true"):
        split = batch(spark, broker.url, f"name={a}", minPartitions="3", committed=committed)
        assert split.rdd.getNumPartitions() >= 3 and split.count() == 10


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


def test_a_broker_list_skips_a_broker_that_is_down(spark, broker, client):
    [journal] = make_journals(broker, "offs/listed")
    Producer(client).committed(journal, {"n": 1})
    brokers = f"http://127.0.0.1:{free_port()},{broker.url}"
    assert batch(spark, brokers, f"name={journal}").count() == 1


def persisted(client, journal: str) -> list:
    return [f for f in client.fragments(journal) if f.fragment.is_persisted]


@pytest.mark.slow
def test_pruned_bytes_fail_the_read_unless_fail_on_data_loss_is_false(spark, broker, client):
    [journal] = make_journals(broker, "offs/pruned", length=1024, refresh_interval="1s", retention="1h0m0s")
    p = Producer(client)
    for i in range(60):
        p.committed(journal, {"n": i, "pad": "x" * 40})
    wait_until(lambda: len(persisted(client, journal)) >= 2, "2 persisted fragments")
    two_hours_ago = time.time() - 7200
    for path in (broker.file_root / journal).iterdir():
        os.utime(path, (two_hours_ago, two_hours_ago))
    wait_until(lambda: persisted(client, journal) and all(f.fragment.mod_time < time.time() - 3600
                                                          for f in persisted(client, journal)), "listing refresh")
    gone = max(f.fragment.end for f in client.prune(journal))
    first = min(f.fragment.begin for f in client.fragments(journal))
    assert first >= gone > 0
    lost_at = {journal: gone // 2 + 1}
    with pytest.raises(Exception, match="no longer exist") as err:
        batch(spark, broker.url, f"name={journal}", startingOffsets=lost_at).count()
    assert "failOnDataLoss" in str(err.value)
    rows = batch(spark, broker.url, f"name={journal}", startingOffsets=lost_at, failOnDataLoss="false").collect()
    assert rows and min(r.begin for r in rows) == first
    assert batch(spark, broker.url, f"name={journal}").count() == len(rows)  # earliest: what remains, no error
    # Streams check the same on the driver, per micro-batch (one HEAD per journal).
    with pytest.raises(DataLossError):
        check_data_loss(client, journal, gone // 2 + 1, client.write_head(journal), fail=True)
    assert check_data_loss(client, journal, gone // 2 + 1, client.write_head(journal), fail=False) == first


def test_a_starting_offset_inside_a_record_starts_at_the_next_record(spark, broker, client, tmp_path):
    """No torn record decoded: batch (read-uncommitted, split or not, and
    read-committed) and stream reads all begin at the record after the offset."""
    [journal] = make_journals(broker, "offs/torn", labels={"app": "torn"}, length=1024)
    p = Producer(client)
    ends = []
    for i in range(0, 10, 2):  # two messages per append: records inside fragments, not only at their begins
        p.committed(journal, {"n": i, "pad": "x" * 300}, {"n": i + 1, "pad": "y" * 300})
        ends.append(client.write_head(journal))
    inside = ends[1] + 200  # inside the record of n=4, the first of an append
    start = {journal: inside}
    for options in ({}, {"minPartitions": "3"}, {"committed": "true"}):
        rows = batch(spark, broker.url, f"name={journal}", startingOffsets=start, **options).collect()
        assert sorted(json.loads(r.value)["n"] for r in rows) == list(range(5, 10)), options
        assert min(r.begin for r in rows) > inside
    ck, out = tmp_path / "ck", tmp_path / "out"
    run_stream(spark, broker, "app=torn", ck, out, startingOffsets=json.dumps(start))
    assert sorted(json.loads(r.value)["n"] for r in stream_rows(spark, out)) == list(range(5, 10))
