"""Format ``herald`` and the dedupe job on a real Spark standalone cluster.

A master and two one-core workers run as separate processes
(`herald.testing.spark_cluster`); apps go in through ``spark-submit --master
spark://…``, so the driver, the executors and their Python workers are
different processes that share nothing but the broker, the fragment store and
the checkpoint directory. Each test ``kill -9``s one worker (its executor and
Python workers with it) while micro-batches run; the job must finish on the
other worker with every message exactly once [I-SINK-1] [I-DEDUP-1].
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from herald.client import BrokerClient
from herald.pipelines.audit import audit
from herald.pipelines.generate import GeneratorSettings, generate
from herald.testing import apply_specs, journal_spec

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(900)]

APP = Path(__file__).with_name("cluster_app.py")
BATCH_LINE_DEADLINE_S = 300.0  # a first batch starts executors and their Python workers
APP_DEADLINE_S = 420.0


def _journals(url: str, *prefixes: str, n: int = 2) -> None:
    apply_specs(url, *(journal_spec(f"{prefix}part-{i:03d}") for prefix in prefixes for i in range(n)))


def _cli_main() -> str:
    """The ``herald`` CLI as a file, as spark-submit wants an app (docs/spark.md)."""
    import herald.cli.main

    return herald.cli.main.__file__


def test_connector_survives_a_worker_killed_mid_stream(spark_cluster, broker, tmp_path):
    spark_cluster.ensure_workers()
    _journals(broker.url, "events/", "copies/", "batch-copies/")
    with BrokerClient(broker.url, timeout_s=30) as client:
        generate(client, "prefix=events/", GeneratorSettings(count=1200, dup_rate=0.0, seed=11))
        app = spark_cluster.submit([str(APP), broker.url, str(tmp_path / "ckpt"), str(tmp_path / "result.json")],
                                   log="connector-app.log")
        app.wait_for_line(r"^batch 1 ", BATCH_LINE_DEADLINE_S)
        app.skip_pending()  # a batch line after the kill is then one that ran after it
        spark_cluster.kill_worker(random.randrange(2))  # mid-stream: the next batch is running
        app.wait_for_line(r"^batch ", BATCH_LINE_DEADLINE_S)  # and batches went on without it
        assert app.wait(APP_DEADLINE_S) == 0, app.tail()
        result = json.loads((tmp_path / "result.json").read_text())
        assert result["batch_rows"] == 1200
        for output in ("prefix=batch-copies/", "prefix=copies/"):
            report = audit(client, "prefix=events/", output)
            assert report.ok and report.output_events == 1200, (output, report)


def test_dedupe_via_spark_submit_survives_a_worker_killed_mid_batch(spark_cluster, broker, tmp_path):
    spark_cluster.ensure_workers()
    _journals(broker.url, "events/", "deduped/")
    with BrokerClient(broker.url, timeout_s=30) as client:
        generate(client, "prefix=events/", GeneratorSettings(count=1200, dup_rate=0.05, retry_delay_s=0.5, seed=12))
        args = [_cli_main(), "pipelines", "dedupe", "--input", "prefix=events/", "--output", "prefix=deduped/",
                "--checkpoint", str(tmp_path / "ckpt"), "--broker", broker.url, "--partitions", "2",
                "--max-bytes-per-trigger", "30000", "--trigger", "available-now"]
        app = spark_cluster.submit(args, log="dedupe-app.log")
        app.wait_for_line(r"^batch ", BATCH_LINE_DEADLINE_S)
        app.skip_pending()
        spark_cluster.kill_worker(random.randrange(2))
        app.wait_for_line(r"^batch ", BATCH_LINE_DEADLINE_S)
        assert app.wait(APP_DEADLINE_S) == 0, app.tail()
        report = audit(client, "prefix=events/", "prefix=deduped/")
        assert report.ok, report
        assert report.unique_keys == report.output_events == 1200
        assert report.input_events > 1200  # retries were there to drop

