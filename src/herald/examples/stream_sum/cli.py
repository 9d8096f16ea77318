"""``herald examples stream-sum …``: chunkers publish files, a Spark summer publishes their digests.

    herald examples stream-sum run --chunkers 2 --files 4 --duration 20s     # all in one, embedded broker
    herald examples stream-sum summer --checkpoint /tmp/ss --broker URL      # the Spark job alone
    herald examples stream-sum chunker --chunkers 2 --files 4 --duration 60s --broker URL

``run`` and ``chunker`` exit 1 on any violation (a lost, repeated, wrong or late
sum). ``python -m herald.examples.stream_sum.cli summer …`` runs the summer
without the rest of the CLI (the crash test runs it that way, in its own
process group).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from herald.cli import config
from herald.cli.options import LOG_LEVEL, command

if TYPE_CHECKING:  # imported when a command runs: `herald --help` starts no Spark imports
    from herald.examples.stream_sum.chunker import ChunkerSettings
    from herald.examples.stream_sum.verify import Figures

app = typer.Typer(help="chunkers publish files, a Spark summer publishes their digests.", no_args_is_help=True)

BROKER_OR_EMBEDDED = typer.Option(None, "--broker", "--broker.address", show_default=False,
                                  help="Broker URL [default: start an embedded broker in a temp dir].")
BROKER = typer.Option(None, "--broker", "--broker.address", show_default=False,
                      help="Broker URL [default: $BROKER_ADDRESS, config file, http://localhost:8080].")
CHUNKERS = typer.Option(2, "--chunkers", help="Chunkers publishing at once.")
FILES = typer.Option(4, "--files", help="Files each chunker keeps open (their chunks interleave).")
DURATION = typer.Option("20s", "--duration", help="How long chunkers start new files, e.g. 20s, 5m.")
RATE = typer.Option(20.0, "--rate", help="Chunks per second per chunker (0 = as fast as possible).")
SUM_TIMEOUT = typer.Option("60s", "--sum-timeout", help="A sum later than this after its file's end is a violation.")
SEED = typer.Option(None, "--seed", show_default=False, help="Seed for reproducible files [default: random].")


@app.callback()
def stream_sum() -> None:
    """chunkers publish files, a Spark summer publishes their digests."""


def _seconds(text: str, field: str) -> float:
    """Seconds of a duration flag (``20s``, ``5m``), > 0."""
    from herald.pipelines.dedupe import parse_window
    from herald.protocol.errors import ValidationError

    seconds = parse_window(text, field)
    if seconds <= 0:
        raise ValidationError(field, f"must be > 0 ({text!r})")
    return seconds


def _chunker_settings(chunkers: int, files: int, duration: str, rate: float, seed: int | None) -> ChunkerSettings:
    from herald.examples.stream_sum.chunker import ChunkerSettings
    from herald.protocol.errors import ValidationError

    if chunkers < 1:
        raise ValidationError("chunkers", f"must be >= 1 ({chunkers})")

    return ChunkerSettings(files=files, duration_s=_seconds(duration, "duration"), rate=rate, seed=seed)


def _finish(figures: Figures) -> None:
    print(f"figures: {figures.line()}", flush=True)
    for violation in figures.violations[:20]:
        print(f"error: {violation}", flush=True)
    if figures.violations:
        raise typer.Exit(1)


@app.command("run")
@command
def run_command(chunkers: int = CHUNKERS, files: int = FILES, duration: str = DURATION, rate: float = RATE,
                sum_timeout: str = SUM_TIMEOUT, seed: int = SEED,
                checkpoint: str = typer.Option("", "--checkpoint", help="Summer checkpoint [default: a temp dir]."),
                broker: str = BROKER_OR_EMBEDDED, log_level: str = LOG_LEVEL) -> None:
    """Chunkers and a summer together; exits 1 on any violation."""
    from herald.examples.stream_sum.journals import create_journals
    from herald.examples.stream_sum.run import run_with_summer
    from herald.pipelines.streaming import spark_session
    from herald.testing.broker import BrokerProcess

    settings = _chunker_settings(chunkers, files, duration, rate, seed)
    timeout_s = _seconds(sum_timeout, "sum_timeout")
    with tempfile.TemporaryDirectory(prefix="herald-stream-sum-") as tmp:
        embedded = None if broker else BrokerProcess(Path(tmp) / "data", Path(tmp) / "fragments").start()
        url = embedded.url if embedded else config.resolve_broker_address(broker)
        try:
            if embedded:
                print(f"started an embedded broker at {url} (data in {tmp})", flush=True)
            create_journals(url)
            print("journals: stream-sum/chunks/part-000..003, stream-sum/sums/part-000", flush=True)
            print("starting the summer (Spark) …", flush=True)
            spark = spark_session("local[2]", 2)
            spark.sparkContext.setLogLevel("OFF")  # a failure is reported once, as one line
            try:
                figures = run_with_summer(spark, url, Path(checkpoint or Path(tmp) / "checkpoint"), chunkers,
                                          settings, timeout_s, report=lambda line: print(line, flush=True))
            finally:
                spark.stop()
        finally:
            if embedded:
                embedded.terminate()
    _finish(figures)


@app.command("summer")
@command
def summer_command(checkpoint: str = typer.Option(..., "--checkpoint", help="Checkpoint directory."),
                   trigger: str = typer.Option("0.5s", "--trigger", help="Interval between micro-batches."),
                   master: str = typer.Option("local[2]", "--master", help="Spark master."),
                   on_decode_error: str = typer.Option("fail", "--on-decode-error",
                                                       help="fail (stop at a line that is not JSON) or skip."),
                   broker: str = BROKER, log_level: str = LOG_LEVEL) -> None:
    """The summer alone: runs until interrupted, a line per micro-batch."""
    from herald.examples.stream_sum.summer import SummerSettings, run_summer
    from herald.pipelines.streaming import spark_session

    settings = SummerSettings(broker=config.resolve_broker_address(broker), checkpoint=checkpoint,
                              trigger_s=_seconds(trigger, "trigger"), on_decode_error=on_decode_error)
    spark = spark_session(master, 2)
    spark.sparkContext.setLogLevel("OFF")  # a failure is reported once, as one line (below)
    run_summer(spark, settings, report=lambda line: print(line, flush=True))


@app.command("chunker")
@command
def chunker_command(chunkers: int = CHUNKERS, files: int = FILES, duration: str = DURATION, rate: float = RATE,
                    sum_timeout: str = SUM_TIMEOUT, seed: int = SEED,
                    broker: str = BROKER, log_level: str = LOG_LEVEL) -> None:
    """Chunkers alone, verifying a summer that runs elsewhere; exits 1 on any violation."""
    from herald.cli.options import broker_client
    from herald.examples.stream_sum.run import run_chunkers

    settings = _chunker_settings(chunkers, files, duration, rate, seed)
    with broker_client(broker) as client:
        figures = run_chunkers(client, chunkers, settings, _seconds(sum_timeout, "sum_timeout"),
                               report=lambda line: print(line, flush=True))
    _finish(figures)


@app.command("journals")
@command
def journals_command(partitions: int = typer.Option(4, "--partitions", help="Chunks journals."),
                     replication: int = typer.Option(1, "--replication", help="Replication of each journal."),
                     broker: str = BROKER, log_level: str = LOG_LEVEL) -> None:
    """Create the chunks and sums journals that are missing (existing ones are left as they are)."""
    from herald.examples.stream_sum.journals import create_journals

    for name in create_journals(config.resolve_broker_address(broker), partitions, 1, replication):
        print(name)


if __name__ == "__main__":
    from herald.cli.main import run

    run(app)
