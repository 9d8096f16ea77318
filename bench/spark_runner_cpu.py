"""A stream source runner's start-up, phase by phase: what is PySpark's and what is Herald's.

Every streaming query over format ``herald`` starts a fresh Python process (PySpark's
``python_streaming_source_runner``) before its first micro-batch. The dedupe backlog
pays it outside its batches, and Spark's ``rate`` source does not. This probe replays
what that process does, in a fresh interpreter per run, against a broker with the
dedupe bench's input (4 journals of generated events):

1. PySpark's own imports;
2. unpickling `HeraldDataSource` (``herald.spark.datasource``);
3. ``streamReader``;
4. ``prepareForTriggerAvailableNow`` (the one listing of the journals);
5. ``initialOffset``, ``latestOffset`` and ``partitions``.

It prints each phase's CPU and wall time in ms. With several source trees it takes
turns between them run by run. It leaves out the interpreter's start and PySpark's
zip path (`herald.spark.pyspark_zip`).

``python -m bench.spark_runner_cpu [RUNS] [SRC ...]`` (default: 5 runs of this
checkout's ``src``). It is not in ``make bench``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["main"]

PHASES = ("pyspark runner imports", "herald.spark.datasource", "streamReader", "prepareForTriggerAvailableNow",
          "initialOffset", "latestOffset", "partitions")
SELECTOR = "prefix=bench/runner-in/"


def _child(url: str, state: str) -> None:
    """One runner's start in this fresh interpreter; prints ``phase cpu_ms wall_ms`` lines."""
    marks: list[tuple[str, float, float]] = []
    wall0, cpu0 = time.perf_counter(), time.process_time()

    def mark(name: str) -> None:
        marks.append((name, time.process_time() - cpu0, time.perf_counter() - wall0))

    import pyspark.sql.streaming.python_streaming_source_runner  # noqa: F401 — the runner's own imports
    mark(PHASES[0])
    from herald.spark.datasource import HeraldDataSource  # what unpickling the data source imports
    mark(PHASES[1])
    from pyspark.sql import types as T
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    schema = T.StructType([T.StructField("timestamp", T.TimestampType()), T.StructField("value", T.BinaryType()),
                           T.StructField("dedupe_key", T.StringType())])  # the dedupe job's columns
    source = HeraldDataSource({"broker": url, "selector": SELECTOR, "stateLocation": state,
                               "dedupeKey": "messageId", "jsonFields": "", "maxBytesPerTrigger": "0"})
    reader = source.streamReader(schema)
    mark(PHASES[2])
    reader.prepareForTriggerAvailableNow()
    mark(PHASES[3])
    start = reader.initialOffset()
    mark(PHASES[4])
    end = reader.latestOffset(start, ReadAllAvailable())
    mark(PHASES[5])
    reader.partitions(start, end)
    mark(PHASES[6])
    cpu, wall = 0.0, 0.0
    for name, c, w in marks:
        print(f"{name}\t{1000 * (c - cpu):.1f}\t{1000 * (w - wall):.1f}")
        cpu, wall = c, w


def _run(tree: str, url: str, state: str) -> dict[str, tuple[float, float]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((tree, str(Path(__file__).resolve().parents[1]))))
    done = subprocess.run([sys.executable, "-m", "bench.spark_runner_cpu", "--child", url, state], env=env,
                          capture_output=True, text=True, check=True, timeout=120)
    rows = (line.split("\t") for line in done.stdout.splitlines() if line.count("\t") == 2)
    return {name: (float(cpu), float(wall)) for name, cpu, wall in rows}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--child"]:
        _child(args[1], args[2])
        return 0
    runs = int(args[0]) if args else 5
    trees = args[1:] or [str(Path(__file__).resolve().parents[1] / "src")]
    from bench.servers import apply, bench_spec, herald_broker
    from herald.client import BrokerClient
    from herald.pipelines.generate import GeneratorSettings, generate

    with tempfile.TemporaryDirectory(prefix="herald-bench-runner-") as scratch, \
            herald_broker(Path(scratch)) as broker:
        apply(broker.url, *(bench_spec(f"bench/runner-in/{i:02d}") for i in range(4)))
        with BrokerClient(broker.url, timeout_s=120) as client:
            generate(client, SELECTOR, GeneratorSettings(count=30_000, dup_rate=0.006, retry_delay_s=0.5, seed=7))
        seen: dict[str, list[dict[str, tuple[float, float]]]] = {tree: [] for tree in trees}
        for n in range(runs):
            for tree in trees:
                seen[tree].append(_run(tree, broker.url, f"{scratch}/state-{n}"))
    print(f"load {os.getloadavg()[0]:.1f}; medians of {runs} runs, CPU / wall ms per phase")
    for tree, results in seen.items():
        print(f"{tree}:")
        for phase in PHASES:
            cpu = statistics.median(r[phase][0] for r in results)
            wall = statistics.median(r[phase][1] for r in results)
            print(f"  {phase:32s} {cpu:7.1f} / {wall:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
