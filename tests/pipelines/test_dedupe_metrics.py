"""The dedupe's metrics folded from Spark progress reports (plain dicts, as
``StreamingQueryProgress.json`` gives them): state bytes per key."""

from __future__ import annotations

import json

from herald.pipelines.dedupe_metrics import DedupeMonitor


def _progress(batch: int, keys: int, sst_bytes: int) -> dict:
    op = {"numRowsTotal": keys, "numRowsUpdated": 10, "customMetrics": {"rocksdbTotalSSTFilesSize": sst_bytes,
                                                                       "numDroppedDuplicateRows": 1}}
    return {"batchId": batch, "numInputRows": 11, "stateOperators": [op], "durationMs": {"triggerExecution": 500}}


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
