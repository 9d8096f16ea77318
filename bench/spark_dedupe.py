"""The spark benchmark's dedupe cases: `herald pipelines dedupe` end to end.

- backlog: events/s of one available-now run over pre-generated events, against
  ``dropDuplicatesWithinWatermark`` over the in-memory ``rate-micro-batch``
  source into ``noop`` (the engine's own ceiling) and the same dedupe query into
  ``noop`` instead of the exactly-once sink (the cost of exactly-once); both
  sides warmed up first (the first stateful query loads RocksDB). Every side runs
  as the job runs a backlog (one available-now run: one micro-batch of all the
  events, then the closing no-data batch) and is timed from building its query
  to the run's end (``events_per_s``), and also
  in micro-batches (``batch_events_per_s``: events ÷ the batches'
  ``triggerExecution`` from Spark's progress events), with the seconds outside
  them (``outside_batches_s``: the query's start-up, e.g. a Python source's fresh
  source-runner process, which ``rate`` does not have, and its end);
- live: p50/p99 from append to deduplicated output with events arriving at
  10 k events/s into a query triggered every ``LIVE_TRIGGER_S`` (the audit's
  latency, from UUID clocks; it also checks the output is exactly once);
- journals: events/s of the backlog run over 1, 4 (full mode) and 16 input journals, taking turns;
- state: the job's own state bytes per key after the backlog run (its metrics);
- split (only when named): the job, its ``noop`` twin, ``rate`` with a JSON value into ``noop``
  and into the herald sink, and a do-nothing Python stream source into ``noop``, taking
  turns: the source's and the sink's factors of the job's ratio to ``rate``, and the
  floor of any Python source (`bench.spark_dedupe_split`).

``python -m bench.spark_dedupe [--quick] [--cases backlog,live,journals,split]`` runs
only these cases (a broker and a Spark session of their own) and prints the
figures, the headline ratios and each backlog query's per-batch durations.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from bench.runner import Config, Report, measure_interleaved
from bench.servers import apply, bench_spec, wait_until

__all__ = ["CASES", "LIVE_RATE", "LIVE_TRIGGER_S", "NOOP_SINK", "OPT_IN_CASES", "RATE_DEDUPE", "dedupe_headlines",
           "main", "run_dedupe_cases"]

UNITS = {"events_per_s": "events/s", "batch_events_per_s": "events/s", "outside_batches_s": "s", "p50_ms": "ms",
         "p99_ms": "ms", "state_bytes_per_key": "B/key"}
CASES = ("backlog", "live", "journals")
#: Cases run only when named (``--cases split``): four sides × three turns, ≈ 1 min more.
OPT_IN_CASES = ("split",)

NOOP_SINK = "herald dedupe query into noop"
RATE_DEDUPE = "spark rate + dropDuplicatesWithinWatermark"
DEDUPE_WINDOW = "1h"
#: Events of each side's warm-up run. After a warm-up of 2,000 events the first
#: 30 k-event run of a session spent 0.3-0.5 s more CPU in the JVM's JIT compiler
#: threads than the next one (job then noop: 1.17-1.36 s against 0.75-0.82 s;
#: noop then job: 0.93-1.00 s against 0.69-0.95 s; load 6-9).
WARMUP_EVENTS = 30_000
LIVE_RATE = 10_000.0  # events/s (issue 15's goal: p50 ≤ 1.5 s, p99 ≤ 3 s)
#: The live query's trigger. A batch holds what arrived during the previous one,
#: so latency ≈ half a batch period (waiting) + one batch (processing). At 10 k
#: events/s on 2 cores a batch is ~0.5 s of fixed cost (tasks, state commit,
#: checkpoint logs, ACKs) + ~0.45 s per 10 k events, so batches run back to back
#: from about 0.5 s on: measured p50/p99 1.57/3.14 s with a 1 s trigger, 1.17/1.72 s
#: with 0.5 s, 1.24/1.82 s with 0.25 s (same run, quiet machine). Below 0.5 s
#: nothing is gained but idle polls of the brokers.
LIVE_TRIGGER_S = 0.5


class _Journals:
    """Fresh input/output journal sets per dedupe run."""

    def __init__(self, url: str) -> None:
        self.url, self.n = url, 0

    def make(self, count: int) -> tuple[str, str]:
        self.n += 1
        names = [f"bench/dd{self.n}-{side}/{i:02d}" for side in ("in", "out") for i in range(count)]
        apply(self.url, *(bench_spec(name) for name in names))
        return f"prefix=bench/dd{self.n}-in/", f"prefix=bench/dd{self.n}-out/"


def run_dedupe_cases(report: Report, config: Config, spark: Any, url: str, scratch: Path, phase,
                     cases: tuple[str, ...] = CASES) -> None:
    """The dedupe ``cases`` of the spark benchmark into ``report`` (``phase`` times a step on stderr)."""
    journals = _Journals(url)
    events = config.scale(150_000, 30_000)
    report.inputs.update(dedupe_events=events, dedupe_window=DEDUPE_WINDOW, dup_rate=0.006,
                         dedupe_live_trigger_s=LIVE_TRIGGER_S)
    # The session's first stateful query loads RocksDB and starts the sink's and
    # the state's workers (tens of seconds here): warm both sides first, so the
    # figures compare steady throughput, not whichever query happened to run first.
    # With as many events as a measured run (`WARMUP_EVENTS`): the JIT compiles the
    # per-row paths only once they have run that often, and the first measured run
    # (always the job's, in the quick bench) paid for it alone.
    warm = min(events, WARMUP_EVENTS)
    phase("warm-up dedupe", lambda: (_dedupe_backlog(spark, url, journals, warm, 4, scratch),
                                     _dedupe_backlog(spark, url, journals, warm, 4, scratch, sink="noop"),
                                     _rate_dedupe(spark, warm, scratch)))
    if "backlog" in cases:
        samples = measure_interleaved(config, {
            "herald": lambda: _dedupe_backlog(spark, url, journals, events, 4, scratch),
            NOOP_SINK: lambda: _dedupe_backlog(spark, url, journals, events, 4, scratch, sink="noop"),
            RATE_DEDUPE: lambda: _rate_dedupe(spark, events, scratch),
        }, 1 if config.quick else config.runs)
        for system, values in samples.items():
            report.add(system, "dedupe backlog", values, UNITS)
    if "live" in cases:
        phase("dedupe live", lambda: report.add("herald", "dedupe live 10k/s",
                                                _dedupe_latency(config, spark, url, journals, scratch), UNITS))
        trigger_ms = LIVE_TRIGGER_S * 1000
        report.add("trigger interval", "dedupe live 10k/s", {"p50_ms": [trigger_ms], "p99_ms": [trigger_ms]},
                   UNITS)
    if "journals" in cases:
        _journal_counts(report, config, spark, url, journals, events, scratch)
    if "split" in cases:
        from bench.spark_dedupe_split import run_split

        run_split(report, config, spark, url, journals, events, scratch)


#: Pairs of runs over 1 and 16 journals: the ratio's goal (≥ 0.9) is within what a
#: single pair of runs disagrees by on this machine (0.67-1.27 at load 15).
JOURNAL_PAIRS = 3


def _journal_counts(report: Report, config: Config, spark: Any, url: str, journals: _Journals, events: int,
                    scratch: Path) -> None:
    """The backlog run over 1 and 16 (and, full mode, 4) input journals, taking
    turns run by run (`JOURNAL_PAIRS` each), and each 16 ÷ 1 pair's ratio as a note."""
    counts = (1, 16) if config.quick else (1, 4, 16)
    samples = measure_interleaved(config, {
        str(count): lambda count=count: {"events_per_s": _dedupe_backlog(spark, url, journals, events, count,
                                                                         scratch)["events_per_s"]}
        for count in counts}, max(JOURNAL_PAIRS, config.runs))
    for count in counts:
        report.add("herald", f"dedupe {count} journal{'s' * (count > 1)}", samples[str(count)], UNITS)
    ratios = sorted(b / a for a, b in zip(samples["1"]["events_per_s"], samples["16"]["events_per_s"], strict=True))
    report.note(f"dedupe 16 / 1 journals, events/s, pairs of runs back to back: median "
                f"{ratios[len(ratios) // 2]:.2f}, range {ratios[0]:.2f}-{ratios[-1]:.2f} ({len(ratios)} pairs)")


def dedupe_headlines(report: Report) -> None:
    report.headline("dedupe end to end (backlog): events/s vs rate + dropDuplicatesWithinWatermark",
                    ("herald", "dedupe backlog", "events_per_s"), (RATE_DEDUPE, "dedupe backlog", "events_per_s"))
    report.headline("dedupe exactly once vs the same query into Spark's noop sink: events/s",
                    ("herald", "dedupe backlog", "events_per_s"), (NOOP_SINK, "dedupe backlog", "events_per_s"))
    report.headline("dedupe backlog in micro-batches (start-up excluded): events/s vs rate + "
                    "dropDuplicatesWithinWatermark", ("herald", "dedupe backlog", "batch_events_per_s"),
                    (RATE_DEDUPE, "dedupe backlog", "batch_events_per_s"))
    # Both sides are timed alike (from building the query to the run's end); what differs outside the
    # batches is the job's Python source: a fresh source-runner process per query (PySpark's imports,
    # then Herald's listing), which `rate` does not have.
    report.headline("dedupe backlog: seconds outside micro-batches (start-up, end) vs rate + "
                    "dropDuplicatesWithinWatermark", ("herald", "dedupe backlog", "outside_batches_s"),
                    (RATE_DEDUPE, "dedupe backlog", "outside_batches_s"))
    report.headline("dedupe exactly once vs into noop, in micro-batches (start-up excluded): events/s",
                    ("herald", "dedupe backlog", "batch_events_per_s"),
                    (NOOP_SINK, "dedupe backlog", "batch_events_per_s"))
    for metric in ("p50_ms", "p99_ms"):
        report.headline(f"dedupe live 10k events/s: {metric[:3]} latency append→output vs the "
                        f"{LIVE_TRIGGER_S:g} s trigger",
                        ("herald", "dedupe live 10k/s", metric), ("trigger interval", "dedupe live 10k/s", metric))
    from bench.spark_dedupe_split import split_headlines

    split_headlines(report)
    for count in (4, 16):
        report.headline(f"dedupe over {count} journals vs 1: events/s",
                        ("herald", f"dedupe {count} journals", "events_per_s"),
                        ("herald", "dedupe 1 journal", "events_per_s"))


def _settings(url: str, inp: str, out: str, checkpoint: Path, trigger: str):
    from herald.pipelines.dedupe import DedupeSettings, parse_window

    return DedupeSettings(broker=url, input=inp, output=out, checkpoint=str(checkpoint),
                          window_s=parse_window(DEDUPE_WINDOW), min_window_s=60.0, trigger=trigger)


def _dedupe_backlog(spark: Any, url: str, journals: _Journals, events: int, count: int,
                    scratch: Path, sink: str = "herald") -> dict[str, float]:
    """Generate ``events`` (+0.6 % retries) first, then one available-now run over
    them: the dedupe job (``sink="herald"``, exactly once) or the same query into
    Spark's ``noop`` sink (what exactly-once costs is the difference)."""
    from herald.client import BrokerClient
    from herald.pipelines.dedupe import run_dedupe
    from herald.pipelines.generate import GeneratorSettings, generate

    inp, out = journals.make(count)
    with BrokerClient(url, timeout_s=120) as client:
        stats = generate(client, inp, GeneratorSettings(count=events, dup_rate=0.006, retry_delay_s=0.5, seed=7))
    total = stats.events + stats.retries
    settings = _settings(url, inp, out, scratch / f"dd-{journals.n}", "available-now")
    start = time.perf_counter()
    if sink == "noop":
        in_batches = _dedupe_to_noop(spark, settings)
        wall = time.perf_counter() - start
        return {"events_per_s": total / wall, "batch_events_per_s": total / in_batches,
                "outside_batches_s": wall - in_batches}
    summary = run_dedupe(spark, settings, report=None)
    wall = time.perf_counter() - start
    # The job's own figures (its metrics line): events/s in batches, what a key costs in the state store.
    in_batches = summary.events_in / summary.events_per_s if summary.events_per_s else wall
    return {"events_per_s": total / wall, "batch_events_per_s": total / in_batches,
            "outside_batches_s": wall - in_batches, "state_bytes_per_key": summary.state_bytes_per_key}


def _in_batches(query: Any, last_batch: int | None = None) -> float:
    """Seconds ``query`` spent in micro-batches (up to ``last_batch``), from its progress events."""
    return sum(p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress
               if last_batch is None or p["batchId"] <= last_batch) / 1000


def _dedupe_to_noop(spark: Any, settings: Any) -> float:
    """The dedupe query (`herald.pipelines.dedupe.dedupe_frame`, same state store)
    written to ``noop`` instead of the exactly-once sink; returns its seconds in batches."""
    from herald.pipelines.dedupe import dedupe_frame
    from herald.pipelines.streaming import configure_state_store

    configure_state_store(spark)
    query = (dedupe_frame(spark, settings).writeStream.format("noop")
             .option("checkpointLocation", str(Path(settings.checkpoint) / "query"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    if query.exception() is not None:
        raise query.exception()
    return _in_batches(query)


def _rate_dedupe(spark: Any, events: int, scratch: Path) -> dict[str, float]:
    """The engine's ceiling: rows from memory, 0.6 % of keys repeated, same state
    store, watermark and operator; sink ``noop``. Run as the dedupe job runs a
    backlog, so both sides do the same work: timed from building the query (the
    job's time includes its `dedupe_frame`) to its end, one available-now run —
    ``rate-micro-batch`` then makes all ``events`` one micro-batch, as the job's
    source does with its backlog — and the closing no-data batch that applies the
    advanced watermark, which the job pays too. (It used to be four batches of
    ``events / 4`` under the default trigger, timed from ``start()`` to the fourth
    batch's end: three batches' fixed costs more than the job pays, and no
    closing batch and no query building. That reference was 1.3-2× slower in
    events/s than this one, in the same session.)

    ``startTimestamp`` is now: the source's default (the epoch) stamps the rows at
    0, which the initial watermark (0) would drop as late before they reach the state."""
    from pyspark.sql import functions as F

    checkpoint = scratch / f"rate-{time.monotonic_ns()}"
    start = time.perf_counter()
    df = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", max(1, events))
          .option("numPartitions", 2).option("startTimestamp", int(time.time() * 1000)).load())
    key = F.when(F.col("value") % 167 == 0, F.col("value") - 1).otherwise(F.col("value")).cast("string")
    deduped = (df.select(key.alias("key"), F.col("timestamp").alias("t")).withWatermark("t", "30 minutes")
               .dropDuplicatesWithinWatermark(["key"]))
    query = (deduped.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    elapsed = time.perf_counter() - start
    if query.exception() is not None:
        raise query.exception()
    batches = query.recentProgress
    late = sum(p["stateOperators"][0]["numRowsDroppedByWatermark"] for p in batches)
    if late:
        raise RuntimeError(f"rate reference: {late} rows dropped as late; the reference must dedupe every row")
    done = sum(p["numInputRows"] for p in batches)
    in_batches = _in_batches(query)
    return {"events_per_s": done / elapsed, "batch_events_per_s": done / in_batches,
            "outside_batches_s": elapsed - in_batches}


def _dedupe_latency(config: Config, spark: Any, url: str, journals: _Journals,
                    scratch: Path) -> dict[str, list[float]]:
    """Events at a steady rate into a running query (1 s trigger); the audit's
    append→output latency, and that the output holds each key exactly once."""
    from herald.client import BrokerClient
    from herald.pipelines.audit import audit
    from herald.pipelines.dedupe import start_dedupe
    from herald.pipelines.generate import GeneratorSettings, generate

    rate, secs = LIVE_RATE, config.scale(20, 5)
    out: dict[str, list[float]] = {}
    for _ in range(1 if config.quick else 2):
        inp, outp = journals.make(4)
        query = start_dedupe(spark, _settings(url, inp, outp, scratch / f"dd-{journals.n}", str(LIVE_TRIGGER_S)))
        try:
            with BrokerClient(url, timeout_s=120) as client:
                wait_until(lambda q=query: q.lastProgress is not None, 120, "the first dedupe batch", 0.1)
                stats = generate(client, inp, GeneratorSettings(count=int(rate * secs), rate=rate,
                                                                dup_rate=0.006, retry_delay_s=0.5, seed=3))
                _await_caught_up(query)
        finally:
            query.stop()
        with BrokerClient(url, timeout_s=120) as client:
            result = audit(client, inp, outp)
        if not result.ok:
            raise RuntimeError(f"dedupe output is not exactly once: {result}")
        out.setdefault("p50_ms", []).append(result.latency_p50_ms or float("nan"))
        out.setdefault("p99_ms", []).append(result.latency_p99_ms or float("nan"))
        out.setdefault("events_per_s", []).append(stats.events_per_s)
    return out


def _await_caught_up(query: Any) -> None:
    """Two batches in a row with no input once the generator is done (bounded)."""
    seen = threading.Event()

    def idle() -> bool:
        recent = query.recentProgress[-2:]
        if query.exception() is not None:
            raise query.exception()
        if len(recent) == 2 and all(p["numInputRows"] == 0 for p in recent):
            seen.set()
        return seen.is_set()

    wait_until(idle, 120, "the dedupe query to catch up", interval_s=0.2)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.spark_dedupe``: these cases alone (`bench.spark_dedupe_main`)."""
    from bench.spark_dedupe_main import main as run_alone

    return run_alone(argv)


if __name__ == "__main__":
    raise SystemExit(main())
