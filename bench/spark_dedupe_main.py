"""``python -m bench.spark_dedupe``: the dedupe cases alone, outside ``make bench``.

A broker and a Spark session of their own (the spark benchmark's session
settings), the cases asked for (`bench.spark_dedupe.run_dedupe_cases`), then the
figures, the headline ratios and every query's per-batch durations, recorded by
a `StreamingQueryListener` (the job's queries start inside ``run_dedupe``, out of
the caller's sight).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.runner import Config, Report
from bench.spark_dedupe import CASES, OPT_IN_CASES, dedupe_headlines, run_dedupe_cases

__all__ = ["BREAKDOWN", "main"]

BREAKDOWN = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets", "triggerExecution")


def _progress_recorder(spark: Any) -> list[dict]:
    """Every query's progress reports, as they come (a StreamingQueryListener):
    queries started inside ``run_dedupe`` are not otherwise visible here."""
    import json

    from pyspark.sql.streaming import StreamingQueryListener

    seen: list[dict] = []

    class Recorder(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            seen.append(json.loads(event.progress.json))

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    spark.streams.addListener(Recorder())
    return seen


def _print_breakdown(progress: list[dict]) -> None:
    """Per micro-batch with input: where its time went (ms), and its state store's share."""
    print("per-batch durations (ms) of every query with input (name, batch, rows: "
          + ", ".join(BREAKDOWN) + " | state updates, state commit):")
    for p in progress:
        if not p.get("numInputRows"):
            continue
        op = (p.get("stateOperators") or [{}])[0]
        spent = " ".join(str(p["durationMs"].get(k, 0)) for k in BREAKDOWN)
        print(f"  {p.get('name') or '-':14s} {p['batchId']:3d} {p['numInputRows']:7d}: {spent} | "
              f"{op.get('allUpdatesTimeMs', 0)} {op.get('commitTimeMs', 0)}")


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.spark_dedupe``: the dedupe cases alone, on a broker and
    Spark session of their own (the spark benchmark's session settings)."""
    import argparse
    import sys

    from bench.runner import remove_tree
    from bench.servers import herald_broker
    from bench.spark import spark_session

    parser = argparse.ArgumentParser(prog="python -m bench.spark_dedupe", description=main.__doc__)
    parser.add_argument("--quick", action="store_true", help="the quick bench's sizes")
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"comma-separated subset of {','.join(CASES + OPT_IN_CASES)} (default {','.join(CASES)})")
    parser.add_argument("--work-dir", type=Path, default=None, help="scratch space (default: a temp dir)")
    args = parser.parse_args(argv)
    cases = tuple(c for c in args.cases.split(",") if c)
    if set(cases) - set(CASES + OPT_IN_CASES):
        parser.error(f"unknown case(s): {', '.join(sorted(set(cases) - set(CASES + OPT_IN_CASES)))}")
    config = Config(quick=args.quick, work_dir=args.work_dir)
    report, scratch = Report("spark-dedupe", config), config.scratch("spark-dedupe")

    def phase(name: str, fn) -> Any:
        start = time.perf_counter()
        value = fn()
        print(f"bench: {name}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
        return value

    try:
        with herald_broker(scratch) as broker:
            spark = spark_session()
            progress = _progress_recorder(spark)
            try:
                run_dedupe_cases(report, config, spark, broker.url, scratch, phase, cases)
            finally:
                spark.stop()
    finally:
        remove_tree(scratch)
    dedupe_headlines(report)
    for fig in report.figures:
        print(f"{fig.system:45s} {fig.case:22s} {fig.metric:20s} {fig.median:12,.1f} {fig.unit}")
    for line in report.headlines:
        print(f"{line.ratio:6.2f}  {line.label}")
    for note in report.notes:
        print(f"note: {note}")
    _print_breakdown(progress)
    return 0
