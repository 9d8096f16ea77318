"""The dedupe's metrics folded from Spark progress reports (plain dicts, as
``StreamingQueryProgress.json`` gives them): state bytes per key."""

from __future__ import annotations

import json

from herald.pipelines.dedupe_metrics import DedupeMonitor


def _progress(batch: int, keys: int, sst_bytes: int) -> dict:
    op = {"numRowsTotal": keys, "numRowsUpdated": 10, "customMetrics": {"rocksdbTotalSSTFilesSize": sst_bytes,
                                                                       "numDroppedDuplicateRows": 1}}
    return {"batchId": batch, "numInputRows": 11, "stateOperators": [op],
            "durationMs": {"addBatch": 400, "latestOffset": 10, "triggerExecution": 500}}


def _idle(batch: int) -> dict:
    """What Spark reports for a trigger that found no new data: the id of the batch
    not yet run, no input, no ``addBatch`` (PySpark 4.3, seen in a local query)."""
    return {"batchId": batch, "numInputRows": 0, "stateOperators": [],
            "durationMs": {"latestOffset": 3, "triggerExecution": 3}}


def test_an_idle_trigger_before_a_batch_does_not_hide_the_batch():
    monitor = DedupeMonitor(window_s=3600, min_window_s=60, max_keys=0, band_s=360, clock=lambda: 100.0)
    assert monitor.observe(_idle(0)) is None
    assert monitor.observe(_progress(0, 5, 0)).startswith("batch 0: in 11")
    assert monitor.observe(_progress(0, 5, 0)) is None  # each batch once
    assert monitor.observe(_idle(1)) is None
    assert monitor.summary().events_in == 11


def test_state_bytes_per_key_is_reported_in_the_line_the_summary_and_the_exports(tmp_path):
    monitor = DedupeMonitor(window_s=3600, min_window_s=60, max_keys=0, band_s=360, clock=lambda: 100.0)
    assert "state bytes 0 (0 per key)" in monitor.observe(_progress(0, 0, 0))
    monitor.observe(_progress(1, 4000, 180_000))
    summary = monitor.summary()
    assert summary.state_bytes_per_key == 45.0
    assert "state bytes 180000 (45 per key)" in summary.line()
    monitor.export(tmp_path)
    assert json.loads((tmp_path / "metrics.json").read_text())["state_bytes_per_key"] == 45.0
    assert "herald_dedupe_state_bytes_per_key 45.0\n" in (tmp_path / "metrics.prom").read_text()
