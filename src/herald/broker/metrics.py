"""The broker's Prometheus metrics, declared in one place (``/metrics`` serves them)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Counter, Gauge, Histogram


@dataclass(frozen=True)
class _Metrics:
    appended_bytes: Counter
    append_groups: Counter
    append_requests: Histogram
    sync_rounds: Counter
    fdatasyncs: Counter
    syncfs: Counter
    persisted_fragments: Counter
    read_bytes: Counter
    write_head: Gauge


METRICS = _Metrics(
    appended_bytes=Counter("herald_broker_appended_bytes", "Bytes committed to journals", ["journal"]),
    append_groups=Counter("herald_broker_append_groups", "Group commits (one fsync each)", ["journal"]),
    append_requests=Histogram("herald_broker_append_seconds", "Append latency, request to ack",
                              buckets=(.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5)),
    sync_rounds=Counter("herald_broker_sync_rounds", "Broker-wide sync rounds (group commits of all journals)"),
    fdatasyncs=Counter("herald_broker_fdatasyncs", "fdatasyncs issued by group commits (data + commit line)"),
    syncfs=Counter("herald_broker_syncfs", "syncfs calls, each making a whole sync round durable at once"),
    persisted_fragments=Counter("herald_broker_persisted_fragments", "Fragments persisted", ["journal"]),
    read_bytes=Counter("herald_broker_read_bytes", "Bytes streamed to readers", ["journal"]),
    write_head=Gauge("herald_broker_write_head_bytes", "Journal write head", ["journal"]),
)
