"""``herald pipelines …``: Segment's de-duplication end to end, and Spark pipelines' lag.

    herald pipelines generate --output prefix=events/ --count 200000 --dup-rate 0.006
    herald pipelines dedupe --input prefix=events/ --output prefix=deduped/ --checkpoint /tmp/ckpt
    herald pipelines audit --input prefix=events/ --output prefix=deduped/ -o json
    herald pipelines lag --checkpoint /ckpt/q1

``python -m herald.cli.pipelines dedupe …`` runs these without the rest of the CLI
(the crash tests run the driver that way, in its own process group).
"""

from __future__ import annotations

import logging
import sys

import typer

from herald.cli import config
from herald.cli.options import BROKER, LOG_FORMAT, LOG_LEVEL, OUTPUT, OUTPUT_FORMAT, broker_client, command
from herald.cli.output import OutputFormat, print_doc, print_table, progress

__all__ = ["pipelines_app"]

log = logging.getLogger(__name__)

pipelines_app = typer.Typer(help="Spark pipelines: dedupe, generate, audit, lag.", no_args_is_help=True)


@pipelines_app.callback()
def pipelines() -> None:
    """Spark pipelines built on the ``herald`` format."""


@pipelines_app.command("lag")
@command
def lag_command(
    checkpoint: str = typer.Option(..., "--checkpoint", help="The streaming query's checkpoint directory."),
    fmt: OutputFormat = OUTPUT,
    broker: str = BROKER,
    log_level: str = LOG_LEVEL,
) -> None:
    """Per journal: read-through offset of the last committed batch, write head, lag."""
    from herald.spark.lag import checkpoint_offsets, lag

    offsets = checkpoint_offsets(checkpoint)
    with broker_client(broker) as client:
        rows = lag(client, offsets)
    if fmt is not OutputFormat.table:
        print_doc([{"journal": r.journal, "read_through": r.read_through, "write_head": r.write_head,
                    "lag": r.lag} for r in rows], fmt)
        return
    print_table(["JOURNAL", "READ THROUGH", "WRITE HEAD", "LAG"],
                [[r.journal, r.read_through, r.write_head, r.lag] for r in rows])


@pipelines_app.command("generate")
@command
def generate_command(
    output: str = typer.Option(..., "--output", help="Selector of the input journals to write, e.g. prefix=events/."),
    count: int = typer.Option(..., "--count", help="Events to generate (retries come on top)."),
    rate: float = typer.Option(0.0, "--rate", help="Events per second (0 = as fast as possible)."),
    dup_rate: float = typer.Option(0.006, "--dup-rate", help="Fraction of events a client sends twice."),
    retry_delay: str = typer.Option("2s", "--retry-delay", help="Mean delay of a retry after its original."),
    mapping: str = typer.Option("modulo", "--mapping", help="modulo, rendezvous or random (on messageId)."),
    seed: int = typer.Option(None, "--seed", help="Seed for a reproducible stream [default: random]."),
    broker: str = BROKER,
    log_level: str = LOG_LEVEL,
) -> None:
    """Publish Segment-like events; a fraction is re-sent later as a retrying client would."""
    from herald.pipelines.dedupe import parse_window
    from herald.pipelines.generate import GeneratorSettings, generate

    settings = GeneratorSettings(count=count, rate=rate or None, dup_rate=dup_rate,
                                 retry_delay_s=parse_window(retry_delay, "retry_delay"), mapping=mapping, seed=seed)
    with broker_client(broker) as client, progress("generate", count + round(count * dup_rate), "events") as bar:
        done = [0]

        def advance(published: int) -> None:
            bar.advance(published - done[0])
            done[0] = published

        stats = generate(client, output, settings, progress=advance)
    print(f"published {stats.events} events + {stats.retries} retries in {stats.elapsed_s:.1f} s "
          f"({stats.events_per_s:,.0f} events/s)")


@pipelines_app.command("dedupe")
@command
def dedupe_command(
    input: str = typer.Option(..., "--input", help="Selector of the input journals."),
    output: str = typer.Option(..., "--output", help="Selector of the output journals."),
    checkpoint: str = typer.Option(..., "--checkpoint", help="Checkpoint directory (Spark's and Herald's)."),
    key: str = typer.Option("messageId", "--key", help="JSON field holding the message id."),
    time_field: str = typer.Option("", "--time-field",
                                   help="JSON field of the event time (e.g. timestamp); default: arrival time."),
    window: str = typer.Option("28d", "--window", help="De-duplication window, e.g. 28d, 24h."),
    trigger: str = typer.Option("available-now", "--trigger", help="available-now, or an interval like 5s."),
    max_keys: int = typer.Option(0, "--max-keys", help="Cap on state keys (0 = none): the window shrinks."),
    min_window: str = typer.Option("24h", "--min-window", help="Warn when the effective window falls below."),
    mapping: str = typer.Option("modulo", "--mapping", help="Output mapping on the key."),
    max_bytes_per_trigger: int = typer.Option(0, "--max-bytes-per-trigger", help="Input bytes per batch (0 = all)."),
    master: str = typer.Option("", "--master",
                               help="Spark master (default: spark-submit's --master, else local[2])."),
    partitions: int = typer.Option(0, "--partitions", min=0,
                                   help="State partitions (fixed by the first run; 0: one per core)."),
    no_skew_guard: bool = typer.Option(False, "--no-skew-guard", hidden=True,
                                       help="Raw event-time watermark (for measuring [I-DEDUP-1] only)."),
    metrics_port: int = typer.Option(0, "--metrics-port", min=0, max=65535,
                                     help="Serve Prometheus metrics (events, state, batch time, lag) on "
                                          "this port (0: none)."),
    metrics_host: str = typer.Option("127.0.0.1", "--metrics-host", help="Address --metrics-port binds."),
    report: bool = typer.Option(True, "--report/--no-report",
                                help="Report lag and state to the broker's status page after each batch."),
    broker: str = BROKER,
    log_level: str = LOG_LEVEL,
    log_format: str = LOG_FORMAT,
) -> None:
    """Publish each key once per window, exactly once (Spark + RocksDB state)."""
    from pathlib import Path

    from herald.pipelines.dedupe import (
        QUERY_NAME,
        DedupeSettings,
        parse_window,
        run_dedupe,
    )
    from herald.pipelines.reporting import PipelineReporter
    from herald.pipelines.streaming import parse_trigger, spark_session

    trigger_s = parse_trigger(trigger)
    settings = DedupeSettings(
        broker=config.resolve_broker_address(broker), input=input, output=output, checkpoint=checkpoint, key=key,
        time_field=time_field, window_s=parse_window(window), trigger=trigger_s, max_keys=max_keys,
        min_window_s=parse_window(min_window, "min_window"), skew_guard=not no_skew_guard, mapping=mapping,
        max_bytes_per_trigger=max_bytes_per_trigger)
    try:
        reporter = PipelineReporter(f"{QUERY_NAME} {checkpoint}", settings.broker, Path(checkpoint) / "query",
                                    metrics_port, metrics_host, report_to_broker=report)
    except OSError as err:
        raise typer.BadParameter(f"cannot listen on {metrics_host}:{metrics_port} ({err.strerror}); "
                                 "choose another port", param_hint="--metrics-port") from None
    spark = spark_session(master, partitions)
    try:
        summary = run_dedupe(spark, settings, report=lambda line: print(line, flush=True), reporter=reporter)
    finally:
        reporter.close()
    print(f"summary: {summary.line()}", flush=True)
    if summary.below_min_window:
        print(f"warning: effective window under --min-window {min_window}", file=sys.stderr)


@pipelines_app.command("audit")
@command
def audit_command(
    input: str = typer.Option(..., "--input", help="Selector of the input journals."),
    output: str = typer.Option(..., "--output", help="Selector of the output journals."),
    key: str = typer.Option("messageId", "--key", help="JSON field holding the message id."),
    fmt: OutputFormat = OUTPUT_FORMAT,
    broker: str = BROKER,
    log_level: str = LOG_LEVEL,
) -> None:
    """Count input events, unique keys, output events, duplicates and missing keys
    (read-committed). Exits 1 unless each key is in the output exactly once."""
    from herald.pipelines.audit import audit

    with broker_client(broker) as client, progress("audit", None, "messages") as bar:
        report = audit(client, input, output, key, progress=bar.advance)
    if fmt is OutputFormat.table:
        print_table(["METRIC", "VALUE"], report.rows())
    else:
        print_doc(report.to_dict(), fmt)
    if not report.ok:
        raise typer.Exit(1)


if __name__ == "__main__":
    from herald.cli.main import run

    run(pipelines_app)
