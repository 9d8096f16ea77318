"""``herald members list``: the brokers of the cluster, their zones and journal counts."""

from __future__ import annotations

import httpx
import typer

from herald.cli import config
from herald.client import BrokerClient
from herald.cli.journals import BROKER, OUTPUT
from herald.cli.output import OutputFormat, print_doc, print_table
from herald.protocol.errors import HeraldError, Status

members_app = typer.Typer(no_args_is_help=True, help="Brokers of the cluster.")


@members_app.command("list")
def list_command(output: OutputFormat = OUTPUT, broker: str = BROKER) -> None:
    """List broker members (zone, id, endpoint, primary and replica journal counts)."""
    address = config.resolve_broker_address(broker)
    try:
        with BrokerClient(address) as client:
            members = client.members()
    except httpx.HTTPError as err:
        raise HeraldError(Status.INTERNAL, f"cannot reach the broker at {address}: {err}") from None
    if output is not OutputFormat.table:
        print_doc(members, output)
        return
    print_table(["ZONE", "ID", "ENDPOINT", "PRIMARY", "REPLICA"],
                [[m["zone"], m["suffix"], m["endpoint"], m["primary_journals"], m["replica_journals"]]
                 for m in members])
