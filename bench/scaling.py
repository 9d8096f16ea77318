"""Benchmark 5 — Scaling: how append cost grows with work. 32 writers spread over
1, 4 and 16 journals (1 KiB appends; each journal group-commits on its own, so
more journals mean fewer appends per fdatasync), and one journal with payloads
from 256 B to 1 MiB. The reference for each row is Herald's own first row
(1 journal; 256 B payloads), so ratios read as "cost relative to the smallest".
Dedupe throughput per journal count is in the spark benchmark (`bench.spark`).
"""

from __future__ import annotations

from bench.append import UNITS, size_name
from bench.loadgen import run_wrk
from bench.references import ndjson_body
from bench.runner import Config, Report, measure, measure_interleaved, remove_tree
from bench.servers import apply, bench_spec, herald_broker, with_sync_rates

__all__ = ["JOURNAL_COUNTS", "PAYLOAD_SIZES", "run"]

JOURNAL_COUNTS = (1, 4, 16)
PAYLOAD_SIZES = (256, 4 << 10, 64 << 10, 1 << 20)
WRITERS = 32


def run(config: Config) -> Report:
    report = Report("scaling", config, inputs={"writers": WRITERS, "journal_counts": JOURNAL_COUNTS,
                                               "payload_sizes": PAYLOAD_SIZES, "load": "wrk, round-robin"})
    scratch = config.scratch("scaling")
    secs = config.duration_s
    try:
        with herald_broker(scratch) as broker:
            body = ndjson_body(1 << 10)
            systems = {}
            for count in JOURNAL_COUNTS:
                names = [f"bench/scale-{count}-{i:02d}" for i in range(count)]
                apply(broker.url, *(bench_spec(n) for n in names))
                paths = ["/" + n for n in names]
                systems[_journals(count)] = lambda p=paths: with_sync_rates(broker.url, lambda: run_wrk(
                    broker.url, p, body, WRITERS, secs).metrics(1 << 10), broker.proc.pid)
            # The journal counts take turns run by run: their ratio to one journal is a
            # headline, and a noisy minute must hit every count alike.
            for case, samples in measure_interleaved(config, systems).items():
                report.add("herald", case, samples, UNITS)
            for size in PAYLOAD_SIZES:
                journal = f"bench/scale-size-{size}"
                apply(broker.url, bench_spec(journal))
                payload = ndjson_body(size)
                samples = measure(config, lambda j=journal, b=payload, n=size: run_wrk(
                    broker.url, ["/" + j], b, WRITERS, secs).metrics(n))
                report.add("herald", f"{size_name(size)} x{WRITERS}", samples, UNITS)
    finally:
        remove_tree(scratch)
    for count in JOURNAL_COUNTS[1:]:
        report.headline(f"append 1 KiB x{WRITERS} over {count} journals vs 1: appends/s",
                        ("herald", _journals(count), "appends_per_s"), ("herald", _journals(1), "appends_per_s"))
    base = f"{size_name(PAYLOAD_SIZES[0])} x{WRITERS}"
    for size in PAYLOAD_SIZES[1:]:
        report.headline(f"append {size_name(size)} vs {size_name(PAYLOAD_SIZES[0])} x{WRITERS}: MB/s",
                        ("herald", f"{size_name(size)} x{WRITERS}", "mb_per_s"), ("herald", base, "mb_per_s"))
    return report


def _journals(count: int) -> str:
    return f"{count} journal{'s' if count > 1 else ''}"
