"""``make demo``: Segment's exactly-once de-duplication, end to end, on one machine.

Starts an embedded broker in a temp dir, creates ``events/part-000..003`` and
``deduped/part-000..003``, publishes 200,000 events of which 0.6 % are re-sent
by "retrying clients", runs ``herald pipelines dedupe`` to completion
(available-now) on a local Spark, prints the audit and the throughput, and stops
everything. The same steps by hand are in docs/dedupe.md.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

from herald.cli.output import print_table
from herald.client import BrokerClient
from herald.pipelines.audit import audit
from herald.pipelines.dedupe import DedupeSettings, run_dedupe
from herald.pipelines.generate import GeneratorSettings, generate
from herald.pipelines.streaming import spark_session
from herald.testing.broker import BrokerProcess, apply_specs, journal_spec

PARTITIONS = 4


def create_journals(url: str) -> None:
    specs = []
    for prefix, role in (("events/", "input"), ("deduped/", "output")):
        for i in range(PARTITIONS):
            spec = journal_spec(f"{prefix}part-{i:03d}", length=16 << 20)
            spec["labels"] += [{"name": "app.herald.dev/pipeline", "value": "dedupe"},
                               {"name": "app.herald.dev/role", "value": role}]
            specs.append(spec)
    apply_specs(url, *specs)
    print(f"$ herald journals apply   # events/part-000..{PARTITIONS - 1:03d}, deduped/part-000..{PARTITIONS - 1:03d}")


def run(tmp: Path, count: int, dup_rate: float) -> bool:
    broker = BrokerProcess(tmp / "data", tmp / "fragments").start()
    print(f"started an embedded broker at {broker.url} (data in {tmp})")
    spark = None
    try:
        create_journals(broker.url)
        with BrokerClient(broker.url) as client:
            print(f"$ herald pipelines generate --output prefix=events/ --count {count} --dup-rate {dup_rate}")
            gen = generate(client, "prefix=events/", GeneratorSettings(count=count, dup_rate=dup_rate, seed=2017))
            print(f"  published {gen.events} events + {gen.retries} client retries "
                  f"in {gen.elapsed_s:.1f} s ({gen.events_per_s:,.0f} events/s)")
            print("$ herald pipelines dedupe --input prefix=events/ --output prefix=deduped/ --window 28d "
                  "--trigger available-now")
            started = time.monotonic()
            spark = spark_session("local[2]", PARTITIONS)
            settings = DedupeSettings(broker=broker.url, input="prefix=events/", output="prefix=deduped/",
                                      checkpoint=str(tmp / "checkpoint"))
            summary = run_dedupe(spark, settings, report=lambda line: print("  " + line, flush=True))
            wall_s = time.monotonic() - started
            print(f"  summary: {summary.line()}")
            print("$ herald pipelines audit --input prefix=events/ --output prefix=deduped/")
            report = audit(client, "prefix=events/", "prefix=deduped/")
        print_table(["METRIC", "VALUE"], report.rows())
        print(f"throughput: dedupe {summary.events_per_s:,.0f} events/s in Spark batches; "
              f"{summary.events_in / wall_s:,.0f} events/s end to end including Spark start-up ({wall_s:.0f} s)")
        return report.ok
    finally:
        if spark is not None:
            spark.stop()
        code = broker.terminate()
        print(f"stopped Spark and the broker (exit {code})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--dup-rate", type=float, default=0.006)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="herald-demo-") as tmp:
        ok = run(Path(tmp), args.count, args.dup_rate)
    print(f"demo {'passed' if ok else 'FAILED'}: each messageId exactly once "
          f"({time.monotonic() - started:.0f} s in all)")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
