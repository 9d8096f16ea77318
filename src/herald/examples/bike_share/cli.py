"""``herald examples bike-share …``: Citi Bike cycles and ride history with an exactly-once PostgreSQL store.

    herald examples bike-share generate rides.csv --planted planted.ndjson
    herald examples bike-share setup
    tail -n +2 rides.csv | herald attach-uuids --format csv | awk -F , '{print $13}{print}' \\
        | herald journals append -l app.herald.dev/message-type=bike_share.Ride --framing lines --mapping modulo
    herald examples bike-share run --checkpoint /tmp/bikes --dsn postgresql://…
    herald examples bike-share serve --dsn postgresql://… &  curl 'localhost:8090/api/bikes?id=33153'

``python -m herald.examples.bike_share.cli run …`` runs the driver without the rest
of the CLI (the crash tests run it that way, in its own process group).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from herald.cli import config
from herald.cli.options import BROKER, LOG_LEVEL, broker_client, command
from herald.protocol.errors import HeraldError, Status, ValidationError

app = typer.Typer(help="Citi Bike cycles and ride history with an exactly-once PostgreSQL store.", no_args_is_help=True)

DSN = typer.Option(..., "--dsn", envvar="HERALD_BIKE_SHARE_DSN",
                   help="PostgreSQL connection string, e.g. postgresql://user@127.0.0.1:5432/postgres.")


@app.callback()
def bike_share() -> None:
    """Citi Bike cycles and ride history with an exactly-once PostgreSQL store."""


@app.command("generate")
@command
def generate_command(
    out: Path = typer.Argument(..., help="The CSV file to write (Citi Bike's September 2019 columns)."),
    bikes: int = typer.Option(40, "--bikes", help="Bikes."),
    rides: int = typer.Option(2000, "--rides", help="Rides (about)."),
    stations: int = typer.Option(60, "--stations", help="Stations."),
    cycles: int = typer.Option(5, "--cycles", help="Cycles of length 10-14 to plant."),
    seed: int = typer.Option(None, "--seed", show_default=False,
                            help="Seed for a reproducible file [default: random]."),
    planted: Path = typer.Option(None, "--planted", show_default=False,
                                help="Also write the planted cycles here, as NDJSON [default: none]."),
    log_level: str = LOG_LEVEL,
) -> None:
    """Write realistic Citi Bike trip data with long cycles planted on purpose."""
    from herald.examples.bike_share.generate import GenerateSettings, generate

    settings = GenerateSettings(stations=stations, bikes=bikes, rides=rides, cycles=cycles, seed=seed)
    try:
        found = generate(out, settings)
        lines = "".join(json.dumps(c.to_dict()) + "\n" for c in found)
        if planted is not None:
            planted.write_text(lines)
    except OSError as err:
        raise ValidationError("out" if err.filename == str(out) else "planted",
                              f"cannot write {err.filename}: {err.strerror}") from None
    print(f"wrote {out} with {len(found)} planted cycles:")
    sys.stdout.write(lines)


@app.command("setup")
@command
def setup_command(
    rides: int = typer.Option(4, "--rides", help="Ride partitions."),
    cycles: int = typer.Option(2, "--cycles", help="Cycle partitions."),
    store: str = typer.Option("file:///", "--store", help="Fragment store of the journals."),
    broker: str = BROKER, log_level: str = LOG_LEVEL,
) -> None:
    """Create the rides (text/csv) and cycles (NDJSON) journals."""
    from herald.examples.bike_share.specs import apply_journals

    with broker_client(broker) as client:
        for name in apply_journals(client, rides, cycles, store):
            print(name)


@app.command("run")
@command
def run_command(
    checkpoint: str = typer.Option(..., "--checkpoint", help="Checkpoint directory (both queries')."),
    dsn: str = DSN,
    history: int = typer.Option(20, "--history", help="Rides kept per bike in PostgreSQL."),
    min_length: int = typer.Option(10, "--min-length", help="Shortest cycle reported."),
    trigger: str = typer.Option("available-now", "--trigger", help="available-now, or seconds between batches."),
    on_bad_row: str = typer.Option("skip", "--on-bad-row",
                                   help="skip (record it in bad_rides with its journal offset) or stop."),
    max_bytes_per_trigger: int = typer.Option(0, "--max-bytes-per-trigger", help="Input bytes per batch (0 = all)."),
    master: str = typer.Option("local[2]", "--master", help="Spark master."),
    broker: str = BROKER, log_level: str = LOG_LEVEL,
) -> None:
    """Find cycles (to the cycles journals) and keep ride history (PostgreSQL), exactly once."""
    from herald.examples.bike_share.job import BikeShareSettings, run_bike_share
    from herald.pipelines.streaming import parse_trigger, spark_session

    trigger_s = parse_trigger(trigger)
    settings = BikeShareSettings(broker=config.resolve_broker_address(broker), checkpoint=checkpoint, dsn=dsn,
                                 history=history, min_length=min_length, trigger=trigger_s,
                                 max_bytes_per_trigger=max_bytes_per_trigger, on_bad_row=on_bad_row)
    _check_dsn(dsn)
    spark = spark_session(master, 2)
    try:
        run_bike_share(spark, settings, report=lambda line: print(line, flush=True))
    except HeraldError:
        raise
    except Exception as err:  # noqa: BLE001 — the process edge: Spark's errors as one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise HeraldError(Status.INTERNAL, f"the bike-share job failed: {first}") from err
    print("done", flush=True)


@app.command("serve")
@command
def serve_command(
    dsn: str = DSN,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8090, "--port", help="Port (0: any free one)."),
    log_level: str = LOG_LEVEL,
) -> None:
    """Serve GET /api/bikes?id=N: a bike's recent rides, NDJSON, from PostgreSQL."""
    import asyncio

    from aiohttp import web

    from herald.examples.bike_share.api import make_app

    _check_dsn(dsn)

    async def serve() -> None:
        runner = web.AppRunner(make_app(dsn))
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0]
        print(f"bike-share API listening on http://{bound[0]}:{bound[1]}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


def _check_dsn(dsn: str) -> None:
    """Fail at start, in one line, if PostgreSQL cannot be reached with ``dsn``."""
    import psycopg

    try:
        psycopg.connect(dsn, connect_timeout=10).close()
    except (psycopg.Error, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValidationError("dsn", f"cannot connect to PostgreSQL: {first}") from None


@app.command("postgres")
@command
def postgres_command(log_level: str = LOG_LEVEL) -> None:
    """Run a throwaway PostgreSQL (Debian's binaries, temp dir) until Ctrl-C; prints its DSN."""
    import signal
    import threading

    from herald.testing.postgres import PostgresServer

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # `kill` too stops the server and deletes its directory

    signal.signal(signal.SIGTERM, stop)
    with PostgresServer() as server:
        print(f"export HERALD_BIKE_SHARE_DSN={server.dsn}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    from herald.cli.main import run

    run(app)
