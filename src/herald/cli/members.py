"""``herald members list``: the brokers of the cluster, their zones and journal counts."""

from __future__ import annotations

import typer

from herald.cli.options import BROKER, LOG_LEVEL, OUTPUT, broker_client, command
from herald.cli.output import OutputFormat, print_doc, print_table

members_app = typer.Typer(no_args_is_help=True, help="Brokers of the cluster.")


@members_app.command("list")
@command
def list_command(output: OutputFormat = OUTPUT, broker: str = BROKER, log_level: str = LOG_LEVEL) -> None:
    """List broker members (zone, id, endpoint, primary and replica journal counts)."""
    with broker_client(broker) as client:
        members = client.members()
    if output is not OutputFormat.table:
        print_doc(members, output)
        return
    print_table(["ZONE", "ID", "ENDPOINT", "PRIMARY", "REPLICA"],
                [[m["zone"], m["suffix"], m["endpoint"], m["primary_journals"], m["replica_journals"]]
                 for m in members])
