"""A dedupe run exports its metrics on a Prometheus port and reports its lag and
state to the broker, whose status page then shows them (small data: one run)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from herald.pipelines.dedupe import DedupeSettings, run_dedupe
from herald.pipelines.generate import GeneratorSettings, generate
from herald.pipelines.reporting import PipelineReporter

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_dedupe_exports_metrics_and_reports_lag_and_state_to_the_broker(spark, broker, client, journals,
                                                                           tmp_path: Path):
    stats = generate(client, "prefix=events/", GeneratorSettings(count=300, dup_rate=0.05, seed=9))
    settings = DedupeSettings(broker=broker.url, input="prefix=events/", output="prefix=deduped/",
                              checkpoint=str(tmp_path / "ckpt"))
    reporter = PipelineReporter("dedupe-under-test", broker.url, tmp_path / "ckpt" / "query", metrics_port=-1)
    try:
        summary = run_dedupe(spark, settings, report=None, reporter=reporter)
        metrics = scrape(reporter.port)
    finally:
        reporter.close()
    assert summary.events_in == stats.events + stats.retries
    assert metrics[("herald_dedupe_events_in_total", ())] == summary.events_in
    assert metrics[("herald_dedupe_duplicates_dropped_total", ())] == summary.duplicates_dropped > 0
    assert metrics[("herald_dedupe_state_keys", ())] == summary.state_keys > 0
    assert metrics[("herald_dedupe_batch_seconds_count", ())] == summary.batches
    lags = {dict(labels)["journal"]: value for (name, labels), value in metrics.items()
            if name == "herald_pipeline_lag_bytes"}
    assert lags == {name: 0 for name in journals[0]}  # an available-now run read everything

    page = httpx.get(f"{broker.url}/", timeout=10).text
    assert 'data-pipeline="dedupe-under-test"' in page
    assert f"{summary.state_keys:,}</strong> keys" in page
    assert all(name in page for name in journals[0])
