"""``herald pipelines``: inspect Spark pipelines built on the ``herald`` format.

    herald pipelines lag --checkpoint /ckpt/q1 --broker http://localhost:8080
"""

from __future__ import annotations

import typer

from herald.cli.pipelines_dedupe import register
from herald.client import BrokerClient
from herald.protocol.errors import HeraldError
from herald.spark.lag import checkpoint_offsets, lag

pipelines_app = typer.Typer(help="Spark pipelines: lag and friends.", no_args_is_help=True)


@pipelines_app.callback()
def pipelines() -> None:
    """Spark pipelines built on the ``herald`` format (a group, even with one command)."""


@pipelines_app.command("lag")
def lag_command(
    checkpoint: str = typer.Option(..., "--checkpoint", help="The streaming query's checkpoint directory."),
    broker: str = typer.Option("http://localhost:8080", "--broker", envvar="HERALD_BROKER_ADDRESS",
                               help="Broker address."),
) -> None:
    """Per journal: read-through offset of the last committed batch, write head, lag."""
    try:
        offsets = checkpoint_offsets(checkpoint)
        with BrokerClient(broker) as client:
            rows = lag(client, offsets)
    except HeraldError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"{'JOURNAL':<40} {'READ THROUGH':>14} {'WRITE HEAD':>14} {'LAG':>12}")
    for row in rows:
        typer.echo(f"{row.journal:<40} {row.read_through:>14} {row.write_head:>14} {row.lag:>12}")


register(pipelines_app)  # dedupe, generate, audit
