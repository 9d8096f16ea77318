"""A running dedupe's numbers, for Prometheus and for the broker's status page.

`PipelineReporter` runs in the driver beside `DedupeMonitor`. After the batches
of each poll it (1) exports the totals, state and lag on ``--metrics-port`` (a
Prometheus endpoint served by prometheus_client from its own registry, so two
pipelines in one process never collide), and (2) POSTs the same as a report to the
broker's ``/v1/pipelines/report``, which its status page (``/``) shows. Lag is
each input journal's write head minus the read-through of the newest *committed*
batch of the query's checkpoint (`herald.spark.lag`), looked up at most every
``LAG_EVERY_S``. A broker that refuses or cannot take reports is logged once and
not asked again: reporting never stops a pipeline.

    reporter = PipelineReporter("herald-dedupe", broker_url, checkpoint / "query", metrics_port=9108)
    summary = run_dedupe(spark, settings, reporter=reporter)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from herald.client import BrokerClient
from herald.pipelines.dedupe_metrics import DedupeSummary
from herald.protocol.errors import HeraldError
from herald.spark.lag import JournalLag, checkpoint_offsets, lag

__all__ = ["LAG_EVERY_S", "PipelineReporter"]

log = logging.getLogger(__name__)

LAG_EVERY_S = 2.0
BATCH_BUCKETS = (.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class PipelineReporter(Collector):
    """Exports one pipeline's metrics and reports them to its broker (driver only)."""

    def __init__(self, name: str, broker: str, query_checkpoint: str | Path, metrics_port: int = 0,
                 metrics_host: str = "127.0.0.1", report_to_broker: bool = True) -> None:
        self.name, self.broker = name, broker
        self.query_checkpoint = Path(query_checkpoint)
        self.registry = CollectorRegistry()
        self.batch_seconds = Histogram("herald_dedupe_batch_seconds", "Duration of one micro-batch",
                                       buckets=BATCH_BUCKETS, registry=self.registry)
        self.registry.register(self)
        self.summary: DedupeSummary | None = None
        self.lags: list[JournalLag] = []
        self.last_batch_s = 0.0
        self._lag_at = float("-inf")
        self._reporting = report_to_broker
        self._server: Any = None
        self.port = 0
        if metrics_port or metrics_port == -1:  # -1: any free port (tests)
            self._server, _thread = start_http_server(max(metrics_port, 0), metrics_host, registry=self.registry)
            self.port = self._server.server_port
            log.info("pipeline metrics on http://%s:%d/metrics", metrics_host, self.port,
                     extra={"pipeline": name})

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- fed by run_dedupe ---------------------------------------------------------------

    def observe_batch(self, progress: dict) -> None:
        """One new micro-batch's progress (StreamingQueryProgress as a dict)."""
        seconds = float((progress.get("durationMs") or {}).get("triggerExecution", 0)) / 1000
        self.batch_seconds.observe(seconds)
        self.last_batch_s = seconds

    def publish(self, summary: DedupeSummary, force_lag: bool = False) -> None:
        """New totals: refresh the lag if due, and report to the broker."""
        self.summary = summary
        now = time.monotonic()
        if force_lag or now - self._lag_at >= LAG_EVERY_S:
            self._lag_at = now
            self.lags = self._lag()
        if self._reporting:
            self._report()

    def _lag(self) -> list[JournalLag]:
        try:
            offsets = checkpoint_offsets(self.query_checkpoint)
            with BrokerClient(self.broker, timeout_s=10) as client:
                return lag(client, offsets)
        except (HeraldError, httpx.HTTPError, OSError) as err:
            log.info("pipeline lag not known yet: %s", err, extra={"pipeline": self.name})
            return self.lags

    def report_body(self) -> dict[str, Any]:
        s = self.summary
        doc: dict[str, Any] = {"pipeline": self.name, "batches": s.batches if s else 0,
                               "batch_duration_s": self.last_batch_s,
                               "journals": [{"journal": r.journal, "read_through": r.read_through,
                                             "write_head": r.write_head} for r in self.lags]}
        if s is not None:
            doc["dedupe"] = {"state_keys": s.state_keys, "state_bytes": s.state_bytes,
                             "effective_window_s": s.effective_window_s, "events_in": s.events_in,
                             "events_out": s.events_out, "duplicates_dropped": s.duplicates_dropped}
        return doc

    def _report(self) -> None:
        try:
            with BrokerClient(self.broker, timeout_s=10) as client:
                resp = client.http.post("/v1/pipelines/report", json=self.report_body())
            if resp.status_code != 200:
                self._reporting = False
                log.info("the broker does not take pipeline reports (%d %s); not reporting again",
                         resp.status_code, resp.text[:200], extra={"pipeline": self.name})
        except httpx.HTTPError as err:
            log.info("pipeline report not delivered (retried after the next batch): %s", err,
                     extra={"pipeline": self.name})

    # -- Prometheus ------------------------------------------------------------------------

    def describe(self) -> list:
        return []

    def collect(self) -> Iterator[Any]:
        s = self.summary
        totals = {"events_in": "Events read", "events_out": "Events published",
                  "duplicates_dropped": "Duplicates dropped", "late_dropped": "Rows dropped as late",
                  "batches": "Micro-batches"}
        for key, text in totals.items():
            yield CounterMetricFamily(f"herald_dedupe_{key}", text, value=getattr(s, key) if s else 0)
        gauges = {"state_keys": ("state_keys", "Keys in the de-duplication state"),
                  "state_bytes": ("state_bytes", "Bytes of the state (RocksDB SST files)"),
                  "effective_window_seconds": ("effective_window_s", "The window now kept"),
                  "events_per_second": ("events_per_s", "Events/s while processing")}
        for name, (key, text) in gauges.items():
            yield GaugeMetricFamily(f"herald_dedupe_{name}", text, value=getattr(s, key) if s else 0)
        lag_bytes = GaugeMetricFamily("herald_pipeline_lag_bytes", "Write head − read-through of the "
                                      "newest committed batch", labels=["pipeline", "journal"])
        for row in self.lags:
            lag_bytes.add_metric([self.name, row.journal], row.lag)
        yield lag_bytes
