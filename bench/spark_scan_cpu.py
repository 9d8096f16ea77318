"""CPU per row of the ``herald`` batch read's Python side, outside Spark.

``python -m bench.spark_scan_cpu [rows] [rounds]`` starts one broker, fills a
journal as `bench.spark` does (~200-byte committed messages, SNAPPY fragments of
16 MiB), then runs ``rounds`` reads in this process exactly as Spark's tasks run
them: `HeraldDataSource` → reader → ``partitions()`` → ``read(partition)`` for
each, every batch consumed; and, for scale, the Arrow-ceiling source's batches
(`bench.spark_ceiling`: pre-built, no Herald work) of the same count. Per round it
prints this process's CPU per row for both, with and without writing the batches
as an Arrow IPC stream (what Spark's Python worker then does with each batch);
a third argument (``herald``, ``herald+ipc``, ``ceiling``, ``ceiling+ipc``) runs
that one only (for a profiler).
CPU per row is far less sensitive to a shared machine's neighbours than rows/s.
Not in ``make bench``: a probe for A/B runs (``PYTHONPATH=<checkout>/src``).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.servers import herald_broker
from bench.spark import fill_journal

JOURNAL = "bench/spark-read"


class _Sink:
    """An Arrow IPC stream writer into a throwaway buffer, as Spark's worker writes its socket."""

    def __init__(self) -> None:
        self.out = pa.BufferOutputStream()
        self.writer: Any = None

    def write(self, batch: pa.RecordBatch) -> None:
        if self.writer is None:
            self.writer = pa.ipc.new_stream(self.out, batch.schema)
        self.writer.write_batch(batch)
        if self.out.tell() > 64 << 20:
            self.writer.close()
            self.out, self.writer = pa.BufferOutputStream(), None


def herald_read(url: str) -> Callable[[bool], int]:
    from herald.spark.datasource import HeraldDataSource

    reader = HeraldDataSource({"broker": url, "selector": f"name={JOURNAL}"}).reader(None)

    def run(ipc: bool) -> int:
        rows, sink = 0, _Sink()
        for partition in reader.partitions():
            for batch in reader.read(partition):
                rows += batch.num_rows
                if ipc:
                    sink.write(batch)
        return rows

    return run


def ceiling_read(rows: int) -> Callable[[bool], int]:
    from bench.spark_ceiling import CeilingSource

    reader = CeilingSource({"rows": str(rows), "partitions": "2"}).reader(None)

    def run(ipc: bool) -> int:
        n, sink = 0, _Sink()
        for partition in reader.partitions():
            batches: Iterator[pa.RecordBatch] = reader.read(partition)
            for batch in batches:
                n += batch.num_rows
                if ipc:
                    sink.write(batch)
        return n

    return run


def _cpu_per_row_us(fn: Callable[[bool], int], ipc: bool) -> tuple[float, float, int]:
    wall, cpu = time.perf_counter(), time.process_time()
    rows = fn(ipc)
    return (time.process_time() - cpu) / rows * 1e6, rows / (time.perf_counter() - wall), rows


def main(rows: int, rounds: int, only: str = "") -> None:
    with tempfile.TemporaryDirectory(prefix="herald-scan-cpu-") as tmp, herald_broker(Path(tmp)) as broker:
        fill_journal(broker.url, JOURNAL, rows, Path(tmp), text=False)
        herald, ceiling = herald_read(broker.url), ceiling_read(rows)
        herald(False)  # warm: imports, page cache
        ceiling(False)
        for r in range(rounds):
            figures = []
            for name, fn in (("herald", herald), ("ceiling", ceiling)):
                for ipc in (False, True):
                    if only and only != f"{name}{'+ipc' if ipc else ''}":
                        continue
                    per_row, rate, n = _cpu_per_row_us(fn, ipc)
                    figures.append(f"{name}{'+ipc' if ipc else ''} {per_row:.3f} us/row ({rate / 1e6:.2f} M/s)")
            print(f"round {r}: rows {n}; " + "; ".join(figures), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000, int(sys.argv[2]) if len(sys.argv) > 2 else 5,
         sys.argv[3] if len(sys.argv) > 3 else "")
