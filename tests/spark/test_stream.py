"""Streaming reads of format ``herald``: offsets per journal, read-committed
across micro-batches and query restarts [I-SEQ-1], deterministic replays."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from herald.testing import Producer, make_journals
from tests.spark.spark_helpers import reference_committed, run_stream, stream_rows

pytestmark = pytest.mark.spark


def _values(rows, journal=None) -> list[bytes]:
    return sorted(bytes(r.value) for r in rows if journal is None or r.journal == journal)


def _batch_ranges(ck: Path) -> list[dict]:
    return [json.loads((ck / "offsets" / str(n)).read_text().splitlines()[2])
            for n in sorted(int(p.name) for p in (ck / "offsets").iterdir() if p.name.isdigit())]


def test_read_committed_stream_survives_restarts_with_txns_spanning_batches(spark, broker, client, tmp_path):
    [a_journal] = make_journals(broker, "stream/a", labels={"app": "st"})
    ck, out = tmp_path / "ck", tmp_path / "out"
    a, b, c = Producer(client), Producer(client), Producer(client)
    for i in range(30):
        a.uncommitted(a_journal, {"n": i, "pad": "p" * 50})  # One txn over many batches.
    run_stream(spark, broker, "app=st", ck, out, max_bytes=900)
    assert stream_rows(spark, out) == []  # Nothing ACKed yet.

    dup = b.committed(a_journal, *[{"n": 100 + i} for i in range(10)])
    client.append(a_journal, dup)  # A duplicated append.
    a.uncommitted(a_journal, *[{"n": 40 + i} for i in range(10)])
    run_stream(spark, broker, "app=st", ck, out, max_bytes=900)  # A restarted query.
    assert len(stream_rows(spark, out)) == 10

    a.ack()  # Commits 40 messages written 2 runs and many batches ago.
    c.uncommitted(a_journal, *[{"n": 200 + i} for i in range(3)])
    [c_ack] = c.ack()
    c.uncommitted(a_journal, *[{"n": 300 + i} for i in range(5)])  # Abandoned...
    client.append(a_journal, c_ack.data)  # ...rolled back by re-appending the last ACK.
    [b_journal] = make_journals(broker, "stream/b", labels={"app": "st"})  # Joins the stream.
    Producer(client).committed(b_journal, *[{"n": 500 + i} for i in range(7)])
    run_stream(spark, broker, "app=st", ck, out, max_bytes=900)

    rows = stream_rows(spark, out)
    assert _values(rows, a_journal) == sorted(reference_committed(client, a_journal))
    assert _values(rows, b_journal) == sorted(reference_committed(client, b_journal))
    assert len(rows) == 10 + 40 + 3 + 7
    assert len(_batch_ranges(ck)) >= 8  # Many micro-batches, cut by maxBytesPerTrigger.


def test_max_bytes_per_trigger_bounds_every_batch(spark, broker, client, tmp_path):
    journals = make_journals(broker, "limit/a", "limit/b", labels={"app": "limit"})
    p = Producer(client)
    for i in range(60):
        p.committed(journals[i % 2], {"n": i})
    ck, out = tmp_path / "ck", tmp_path / "out"
    run_stream(spark, broker, "app=limit", ck, out, max_bytes=500)
    ranges = [{}] + _batch_ranges(ck)
    for prev, cur in zip(ranges, ranges[1:]):
        assert sum(cur[j] - prev.get(j, 0) for j in cur) <= 500
    assert ranges[-1] == {j: client.write_head(j) for j in journals}
    assert sorted(r.value for r in stream_rows(spark, out)) == sorted(
        v for j in journals for v in reference_committed(client, j))


def test_replayed_batch_yields_identical_rows(spark, broker, client, tmp_path):
    [journal] = make_journals(broker, "replay/a", labels={"app": "replay"})
    a = Producer(client)
    for i in range(20):
        a.uncommitted(journal, {"n": i})
    a.ack()
    ck, out = tmp_path / "ck", tmp_path / "out"
    run_stream(spark, broker, "app=replay", ck, out, max_bytes=400)
    last = max(int(p.name) for p in (ck / "commits").iterdir() if p.name.isdigit())
    before = sorted(spark.read.parquet(f"{out}/{last:05d}").collect())
    assert before  # The ACK's batch emits the whole txn.
    for name in (str(last), f".{last}.crc"):  # As if the driver died before committing it.
        (ck / "commits" / name).unlink(missing_ok=True)
    shutil.rmtree(out / f"{last:05d}")
    run_stream(spark, broker, "app=replay", ck, out, max_bytes=400)
    assert sorted(spark.read.parquet(f"{out}/{last:05d}").collect()) == before


def test_starting_offsets_latest_skips_existing_messages(spark, broker, client, tmp_path):
    [journal] = make_journals(broker, "latest/a", labels={"app": "latest"})
    p = Producer(client)
    p.committed(journal, *[{"n": i} for i in range(10)])
    ck, out = tmp_path / "ck", tmp_path / "out"
    run_stream(spark, broker, "app=latest", ck, out, startingOffsets="latest")
    p.committed(journal, *[{"n": 10 + i} for i in range(5)])
    run_stream(spark, broker, "app=latest", ck, out, startingOffsets="latest")
    assert [json.loads(r.value)["n"] for r in sorted(stream_rows(spark, out), key=lambda r: r.begin)] == list(
        range(10, 15))


def test_max_rows_per_trigger_bounds_every_batch_in_messages(spark, broker, client, tmp_path):
    journals = make_journals(broker, "rows/a", "rows/b", labels={"app": "rows"})
    p = Producer(client)
    for i in range(60):
        p.committed(journals[i % 2], {"n": i, "pad": "x" * (i % 7)})  # Messages of uneven sizes.
    ck, out = tmp_path / "ck", tmp_path / "out"
    run_stream(spark, broker, "app=rows", ck, out, maxRowsPerTrigger=7)
    per_batch = [len(spark.read.parquet(str(d)).collect()) for d in sorted(out.iterdir())]
    assert per_batch == [7] * 8 + [4]  # Exact: each batch's sample holds all its messages.
    assert sorted(r.value for r in stream_rows(spark, out)) == sorted(
        v for j in journals for v in reference_committed(client, j))
