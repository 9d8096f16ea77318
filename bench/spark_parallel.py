"""The spark benchmark's parallel efficiency: the same reads under ``local[1]`` and
``local[2]``, each in its own fresh process (one SparkContext per process).

The data is its own: `JOURNALS` journals (`fill`), so that a read has work for two
cores whatever Herald's split rules are (a batch read has a partition per
fragment, a stream a slice per journal, packed into as many tasks as cores); one
journal of a quick bench's 20 MiB is one task and measures nothing but noise.
Masters take turns in rounds (local[1], local[2], then local[2], local[1], …),
several reads of each kind per process after a warm-up, so the figure is a
median over runs, not one run against one.

Run by `bench.spark` as ``python -m bench.spark_parallel MASTER URL SELECTOR ROWS RUNS``;
prints one JSON object of samples: ``batch_rows_per_s`` (wall time of a batch job),
``stream_rows_per_s`` (wall time of an availableNow query, start-up included) and
``stream_batch_rows_per_s`` (the same query's rows ÷ its micro-batches' time, from
Spark's progress events: the part that can run in parallel). Efficiency is
local[2] ÷ local[1] (2.0 would be perfect on two cores; the machine's other load
takes its share of the second core).
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

__all__ = ["JOURNALS", "MASTERS", "fill", "measure_masters"]

MASTERS = ("local[1]", "local[2]")
JOURNALS = 4
PREFIX = "bench/spark-parallel/"


def fill(url: str, rows: int, scratch: Path) -> str:
    """``rows`` messages over `JOURNALS` journals (as the read cases' journal);
    returns their selector."""
    from bench.spark import fill_journal

    for i in range(JOURNALS):
        fill_journal(url, f"{PREFIX}{i}", rows // JOURNALS, scratch / f"parallel-{i}", text=False)
    return f"prefix={PREFIX}"


def measure_masters(url: str, selector: str, rows: int, runs: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Samples per master: ``rounds`` rounds, the masters' order reversed every
    other round, ``runs`` reads of each kind per process."""
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    out: dict[str, dict[str, list[float]]] = {master: {} for master in MASTERS}
    for n in range(rounds):
        for master in MASTERS if n % 2 == 0 else MASTERS[::-1]:
            done = subprocess.run([sys.executable, "-m", "bench.spark_parallel", master, url, selector, str(rows),
                                   str(runs)], env=env, capture_output=True, text=True, timeout=900, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"bench.spark_parallel {master} failed: {done.stderr[-2000:]}")
            for metric, values in json.loads(done.stdout.strip().splitlines()[-1]).items():
                out[master].setdefault(metric, []).extend(values)
    return out


def _reads(spark: Any, url: str, selector: str, rows: int, runs: int) -> dict[str, list[float]]:
    from bench.spark import stream_figures

    scratch = Path(tempfile.mkdtemp(prefix="herald-bench-parallel-"))

    def batch() -> float:
        df = spark.read.format("herald").option("broker", url).option("selector", selector).load()
        start = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        return rows / (time.perf_counter() - start)

    def stream(n: int) -> dict[str, float]:
        state = scratch / f"s{n}"
        df = (spark.readStream.format("herald").option("broker", url).option("selector", selector)
              .option("stateLocation", str(state)).load())
        return stream_figures(rows, df, state)

    batch(), stream(-1)  # warm-up: workers and their imports
    out: dict[str, list[float]] = {"batch_rows_per_s": [], "stream_rows_per_s": [], "stream_batch_rows_per_s": []}
    for n in range(runs):
        out["batch_rows_per_s"].append(batch())
        figures = stream(n)
        out["stream_rows_per_s"].append(figures["rows_per_s"])
        out["stream_batch_rows_per_s"].append(figures["batch_rows_per_s"])
    return out


def main(argv: list[str]) -> None:
    master, url, selector, rows, runs = argv
    from bench.spark import spark_session

    spark = spark_session(master)
    try:
        print(json.dumps(_reads(spark, url, selector, int(rows), int(runs))), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
