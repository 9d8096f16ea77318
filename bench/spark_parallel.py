"""The spark benchmark's parallel efficiency: the same reads under ``local[1]`` and
``local[2]``, each in its own fresh process (one SparkContext per process).

Run by `bench.spark` as ``python -m bench.spark_parallel MASTER URL JOURNAL ROWS RUNS``
against the journal its read cases filled; prints one JSON object of samples
(``batch_rows_per_s``, ``stream_rows_per_s``) after a warm-up read of each kind.
Efficiency is local[2] ÷ local[1] (2.0 would be perfect on two cores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["MASTERS", "measure_masters"]

MASTERS = ("local[1]", "local[2]")


def measure_masters(url: str, journal: str, rows: int, runs: int) -> dict[str, dict[str, list[float]]]:
    """Samples per master, measured one master after the other."""
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    out: dict[str, dict[str, list[float]]] = {}
    for master in MASTERS:
        done = subprocess.run([sys.executable, "-m", "bench.spark_parallel", master, url, journal, str(rows),
                               str(runs)], env=env, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"bench.spark_parallel {master} failed: {done.stderr[-2000:]}")
        out[master] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def _reads(spark: Any, url: str, journal: str, rows: int, runs: int) -> dict[str, list[float]]:
    scratch = Path(tempfile.mkdtemp(prefix="herald-bench-parallel-"))

    def batch() -> float:
        df = spark.read.format("herald").option("broker", url).option("selector", f"name={journal}").load()
        return rows / _wall(lambda: df.write.format("noop").mode("overwrite").save())

    def stream(n: int) -> float:
        state = scratch / f"s{n}"
        df = (spark.readStream.format("herald").option("broker", url).option("selector", f"name={journal}")
              .option("stateLocation", str(state)).load())
        query = (df.writeStream.format("noop").option("checkpointLocation", str(state / "query"))
                 .trigger(availableNow=True))
        return rows / _wall(lambda: query.start().awaitTermination())

    batch(), stream(-1)  # warm-up: workers and their imports
    out: dict[str, list[float]] = {"batch_rows_per_s": [], "stream_rows_per_s": []}
    for n in range(runs):
        out["batch_rows_per_s"].append(batch())
        out["stream_rows_per_s"].append(stream(n))
    return out


def _wall(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str]) -> None:
    master, url, journal, rows, runs = argv
    from bench.spark import spark_session

    spark = spark_session(master)
    try:
        print(json.dumps(_reads(spark, url, journal, int(rows), int(runs))), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
