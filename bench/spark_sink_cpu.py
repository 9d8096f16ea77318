"""The batch sink's CPU per row, by process kind: ``python -m bench.spark_sink_cpu [rows] [runs]``.

Wall rows/s swings with the neighbours on a shared machine; CPU time per row
far less (issue 15). Writes the `bench.spark_sink` case's rows (format
``herald``, batch, two journals, ``random`` mapping) ``runs`` times after one
warm-up, and prints per run the µs of CPU per row of Spark's Python workers
(PySpark's daemon, its forked workers, reaped ones included), of the JVM, and
of the broker, with the wall rows/s. Not in ``make bench``: a probe for A/B
pairs (``PYTHONPATH`` picks the tree). A worker that exits between the two
snapshots but is not yet reaped by its daemon drops out of the sum (a run's
figure can then come out low, even negative): compare medians.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from bench.servers import apply, bench_spec, herald_broker

__all__ = ["process_cpu"]

_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int, reaped: bool = True) -> float:
    """Seconds of CPU of ``pid`` (with ``reaped``: and of its children it waited for)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + ((int(fields[13]) + int(fields[14])) if reaped else 0)
    return ticks / _TICK


def _children() -> dict[int, list[int]]:
    """Every process's children, from /proc (ppid of each)."""
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            out.setdefault(ppid, []).append(int(entry))
    return out


def _kinds(broker_pid: int) -> dict[str, float]:
    """CPU seconds so far of Spark's Python processes (the JVM's descendants:
    daemon, workers, runners — reaped ones included), the JVM (this driver's
    child), and the broker."""
    children = _children()
    cpu = {"workers": 0.0, "jvm": 0.0, "broker": process_cpu(broker_pid)}
    for jvm in (pid for pid in children.get(os.getpid(), []) if pid != broker_pid):
        cpu["jvm"] += process_cpu(jvm, reaped=False)
        stack = list(children.get(jvm, []))
        while stack:  # a reaped worker's CPU moves into its parent's cutime: the sum holds
            pid = stack.pop()
            cpu["workers"] += process_cpu(pid)
            stack += children.get(pid, [])
    return cpu


def main(rows: int = 300_000, runs: int = 5, fmt: str = "herald") -> None:
    from pyspark.sql import functions as F

    from bench.spark import spark_session

    with tempfile.TemporaryDirectory(prefix="sink-cpu-") as tmp, herald_broker(Path(tmp)) as broker:
        spark = spark_session()
        apply(broker.url, *(bench_spec(f"bench/spark-sink/{i}") for i in range(2)))
        df = spark.range(rows, numPartitions=2).select(F.format_string(
            '{"messageId":"m-%d","type":"track","event":"Order Completed","properties":{"sku":"SKU-%d",'
            '"revenue":%d.5,"currency":"EUR"}}', "id", "id", "id").alias("value")).cache()
        df.count()

        from bench.spark_sink_ceiling import SinkCeiling

        spark.dataSource.register(SinkCeiling)

        def write() -> None:
            (df.write.format(fmt).option("broker", broker.url).option("selector", "prefix=bench/spark-sink/")
             .option("mapping", "random").mode("append").save())

        write()  # warm-up: workers start, imports
        broker_pid = broker.proc.pid
        for _ in range(runs):
            before, start = _kinds(broker_pid), time.perf_counter()
            write()
            wall, after = time.perf_counter() - start, _kinds(broker_pid)
            per_row = {k: (after[k] - before[k]) / rows * 1e6 for k in before}
            print(f"rows/s {rows / wall / 1e3:7.1f} k  µs/row workers {per_row['workers']:.3f} "
                  f"jvm {per_row['jvm']:.3f} broker {per_row['broker']:.3f}  load {os.getloadavg()[0]:.1f}",
                  flush=True)
        spark.stop()


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]), *sys.argv[3:4])
