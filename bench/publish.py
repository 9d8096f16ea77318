"""Benchmark 2 — Publish: ~200-byte JSON messages through Herald's Publisher
(`PublisherCore` stamping UUIDs under the journal's append slot, then the batching
`AppendService`): messages/s until all are durable (``flush`` returned).

Reference, same run: JetStream publish with the same durability (file storage,
``sync_interval: always``; each ack means the message is fsynced), 256 publishes
in flight on one connection — JetStream has no client-side batching, so a window
of outstanding acks is its equivalent. For scale, also JetStream with its default
durability (fsync every 2 min), which acks before the disk has the message.
"""

from __future__ import annotations

import contextlib
import time

from bench.loadgen import nats_js_publish, run_closed_loop
from bench.references import jetstream_stream
from bench.runner import Config, Report, measure_interleaved, remove_tree
from bench.servers import apply, bench_spec, herald_broker, nats_server

__all__ = ["framed_messages", "publish_herald", "run"]

WINDOW = 256
UNITS = {"messages_per_s": "msg/s", "mb_per_s": "MB/s", "batches": "PUTs", "p50_ms": "ms", "p99_ms": "ms",
         "errors": "errors", "appends_per_s": "msg/s"}


def framed_messages(count: int = 1000) -> list[bytes]:
    """Distinct JSON bodies that frame (with Herald's UUID field) to ~200 bytes."""
    return [(b'{"type":"track","event":"Order Completed","userId":"u%07d","properties":{"sku":"SKU-%06d",'
             b'"revenue":%d.%02d,"currency":"EUR"},"ts":%d}' % (i * 7919 % 10**7, i, i % 500, i % 100,
                                                             1_700_000_000_000 + i)) for i in range(count)]


def publish_herald(url: str, journal: str, messages: int, bodies: list[bytes]) -> dict[str, float]:
    """Publish ``messages`` committed messages and flush; rates over the whole span."""
    from herald.client import AppendService, BrokerClient
    from herald.client.publisher import Publisher

    with BrokerClient(url) as client, AppendService(client) as service:
        publisher = Publisher(service, journals=[journal])
        n = len(bodies)
        start = time.perf_counter()
        for i in range(messages):
            publisher.publish_committed(b"k", bodies[i % n])
        publisher.flush()
        elapsed = time.perf_counter() - start
        stats = service.statistics()
    if stats["failed_batches"]:
        raise RuntimeError(f"{stats['failed_batches']} append batches failed")
    return {"messages_per_s": messages / elapsed, "mb_per_s": stats["bytes"] / elapsed / 1e6,
            "batches": float(stats["batches"])}


def run(config: Config) -> Report:
    messages = config.scale(300_000, 60_000)
    bodies = framed_messages()
    report = Report("publish", config, inputs={
        "herald_messages_per_run": messages, "framed_message_bytes": len(bodies[0]) + 48,
        "herald": "Publisher.publish_committed + AppendService(max_batch_bytes=1 MiB, linger 5 ms)",
        "jetstream_window": WINDOW})
    scratch = config.scratch("publish")
    secs = config.duration_s
    payload = bodies[0][:-1] + b',"_meta":{"uuid":"00000000-0000-0000-0000-000000000000"}}\n'
    try:
        with contextlib.ExitStack() as stack:
            broker = stack.enter_context(herald_broker(scratch))
            durable = stack.enter_context(nats_server(scratch / "durable"))
            lax = stack.enter_context(nats_server(scratch / "default", sync_interval=None))
            apply(broker.url, bench_spec("bench/publish"))
            for server in (durable, lax):
                jetstream_stream(server.url, "PUB", ["pub.>"], 4 << 30)
            proto = nats_js_publish("pub.events", payload)
            samples = measure_interleaved(config, {
                "herald": lambda: publish_herald(broker.url, "bench/publish", messages, bodies),
                "jetstream": lambda: _rename(run_closed_loop(durable.port, proto, 1, secs, depth=WINDOW)
                                             .metrics(len(payload))),
                "jetstream (default sync, not durable at ack)": lambda: _rename(
                    run_closed_loop(lax.port, proto, 1, secs, depth=WINDOW).metrics(len(payload))),
            })
    finally:
        remove_tree(scratch)
    for system, values in samples.items():
        report.add(system, "200 B JSON", values, UNITS)
    report.headline("publish 200 B JSON: messages/s (same durability)", ("herald", "200 B JSON", "messages_per_s"),
                    ("jetstream", "200 B JSON", "messages_per_s"))
    report.headline("publish 200 B JSON: messages/s vs JetStream acking before fsync",
                    ("herald", "200 B JSON", "messages_per_s"),
                    ("jetstream (default sync, not durable at ack)", "200 B JSON", "messages_per_s"))
    return report


def _rename(metrics: dict[str, float]) -> dict[str, float]:
    out = dict(metrics)
    out["messages_per_s"] = out.pop("appends_per_s")
    return out
