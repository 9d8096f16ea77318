"""The summer on the session-wide Spark: right sums across micro-batches and a
restart, and bad input — a malformed chunk is skipped and reported once with its
journal offset; a line that is not JSON stops the job, naming its offset."""

from __future__ import annotations

import os
import threading
import time

import pytest

from herald.client import AppendService, BrokerClient
from herald.client.committed import is_ack, read_committed
from herald.client.publisher import Publisher
from herald.examples.stream_sum.digest import file_digest
from herald.examples.stream_sum.journals import create_journals
from herald.examples.stream_sum.messages import Reject, Sum, chunk_body, parse_output
from herald.examples.stream_sum.summer import SummerSettings, run_summer
from herald.pipelines.progress import as_dict, ran
from herald.protocol.errors import HeraldError
from herald.testing import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]
SUMS = "stream-sum/sums/part-000"


def _outputs(client: BrokerClient) -> list[tuple[int, Sum | Reject | None]]:
    return [(env.begin, parse_output(env.value)) for env in read_committed(client, SUMS) if not is_ack(env)]


def _run_until(spark, broker, tmp_path, client: BrokerClient, count: int) -> None:
    """Run the summer until ``count`` outputs are committed (each check reads them all)."""
    settings = SummerSettings(broker=broker.url, checkpoint=str(tmp_path / "ckpt"), trigger_s=0.2)
    run_summer(spark, settings, report=None, stop=lambda: len(_outputs(client)) >= count)


def _publish(client: BrokerClient, files: dict[str, list[bytes]], ends: bool = True) -> None:
    with AppendService(client) as service:
        pub = Publisher(service, client.list("prefix=stream-sum/chunks/"))
        for seq in range(max(len(c) for c in files.values())):  # interleaved, as chunkers do
            for file_id, chunks in files.items():
                if seq < len(chunks):
                    pub.publish_committed(file_id.encode(), chunk_body(file_id, seq, chunks[seq], False))
        for file_id, chunks in files.items():
            if ends:
                pub.publish_committed(file_id.encode(), chunk_body(file_id, len(chunks), b"", True))
        pub.flush()


def test_sums_are_right_across_batches_and_a_restart_and_malformed_chunks_are_reported(
        spark, broker, tmp_path):
    create_journals(broker.url, chunk_partitions=2)
    with BrokerClient(broker.url, timeout_s=30) as client:
        files = {f"f{i}": [os.urandom(50 + i) for _ in range(1 + i % 4)] for i in range(8)}
        _publish(client, files, ends=False)  # the files are open across the restart
        bad = [b'{"id": "f1", "seq": 9, "data": "not base64!", "end": false}\n', b'{"seq": 3, "end": true}\n']
        offsets = [client.append("stream-sum/chunks/part-001", line).begin for line in bad]
        _run_until(spark, broker, tmp_path, client, 2)
        _publish(client, {f: [] for f in files})  # now only the ends, for a second run of the summer
        _run_until(spark, broker, tmp_path, client, 2 + len(files))
        outputs = [msg for _, msg in _outputs(client)]
    rejects = [m for m in outputs if isinstance(m, Reject)]
    assert sorted((r.journal, r.offset, r.reason.split(":")[0]) for r in rejects) == [
        ("stream-sum/chunks/part-001", offsets[0], "data"), ("stream-sum/chunks/part-001", offsets[1], "id")]
    sums = {m.file_id: (m.sum, m.chunks) for m in outputs if isinstance(m, Sum)}
    assert sums == {f: (file_digest(f, chunks), len(chunks)) for f, chunks in files.items()}
    assert len(outputs) == len(files) + 2  # each exactly once


def test_a_line_that_is_not_json_stops_the_summer_naming_its_offset(spark, broker, tmp_path):
    create_journals(broker.url, chunk_partitions=1)
    with BrokerClient(broker.url, timeout_s=30) as client:
        _publish(client, {"ok": [b"fine"]})
        offset = client.append("stream-sum/chunks/part-000", b"this is not JSON\n").begin
        settings = SummerSettings(broker=broker.url, checkpoint=str(tmp_path / "ckpt"), trigger_s=0.2)
        with pytest.raises(HeraldError, match=f"not a chunk: offset {offset}: journal stream-sum/chunks/part-000"):
            run_summer(spark, settings, report=None, stop=lambda: False)
        assert _outputs(client) == []  # nothing of the failed batch was committed


def test_a_batch_run_after_an_idle_trigger_is_reported(spark, broker, tmp_path):
    """The summer's first trigger finds no chunk; Spark reports it under the id of
    the batch not yet run, which the batch folding the chunk then reports too. Its
    line must still come (the crash tests wait for such lines)."""
    create_journals(broker.url, chunk_partitions=1)
    lines: list[str] = []
    with BrokerClient(broker.url, timeout_s=30) as client:
        def publish_after_an_idle_trigger() -> None:
            wait_until(lambda: any(not ran(as_dict(p)) for q in spark.streams.active for p in q.recentProgress),
                       "a trigger that found no chunk", 120)
            _publish(client, {"late": [b"chunk"]})

        publisher = threading.Thread(target=publish_after_an_idle_trigger)
        publisher.start()
        end = time.monotonic() + 120  # a deadline against a hang: the line comes within a poll of the batch
        settings = SummerSettings(broker=broker.url, checkpoint=str(tmp_path / "ckpt"), trigger_s=0.2)
        run_summer(spark, settings, report=lines.append,
                   stop=lambda: (bool(lines) and len(_outputs(client)) == 1) or time.monotonic() > end)
        publisher.join()
    assert sum(int(line.split("chunks in ")[1].split(",")[0]) for line in lines) == 2, lines  # the file's chunk and end
