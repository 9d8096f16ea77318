"""What every ``herald`` command shares: its options, its logging set-up, its client.

    @journals_app.command("list")
    @command
    def list_command(selector: str = selector_option(False), broker: str = BROKER,
                     log_level: str = LOG_LEVEL) -> None:
        with broker_client(broker) as client:
            ...

The broker address is resolved one way for all (`herald.cli.config`): ``--broker``,
``$BROKER_ADDRESS``, the config file, ``http://localhost:8080``. Errors are not
handled here: `herald.cli.main.run` renders every error in one place.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import typer

from herald.cli import config
from herald.cli.logs import configure
from herald.cli.output import OutputFormat
from herald.client import BrokerClient

__all__ = ["BROKER", "LOG_FORMAT", "LOG_LEVEL", "OUTPUT", "OUTPUT_FORMAT", "broker_client", "command",
           "selector_option"]

BROKER = typer.Option(None, "--broker", "--broker.address", show_default=False,
                      help="Broker URL [default: $BROKER_ADDRESS, ~/.config/herald/herald.ini, "
                           "http://localhost:8080].")
LOG_LEVEL = typer.Option("warning", "--log.level", help="debug, info, warning or error.")
LOG_FORMAT = typer.Option("text", "--log.format", help="text, or json (one object per line, fields as keys).")
OUTPUT = typer.Option(OutputFormat.table, "-o", "--output", "--format", help="table, yaml or json.")
#: For commands whose ``--output`` names something else (the pipelines' output journals).
OUTPUT_FORMAT = typer.Option(OutputFormat.table, "-o", "--output-format", "--format", help="table, yaml or json.")


def selector_option(required: bool) -> Any:
    return typer.Option(... if required else "", "-l", "--selector", show_default=False,
                        help="Label selector of journals, e.g. 'prefix=foobar/, name not in (foobar/part-001)'.")


def command(fn: Callable[..., None]) -> Callable[..., None]:
    """Set up logging from the command's ``--log.level`` before it runs."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        level = kwargs.get("log_level") or "warning"
        fmt = kwargs.get("log_format") or "text"
        if fmt not in ("text", "json"):
            raise typer.BadParameter("must be text or json", param_hint="--log.format")
        if level != "warning" or fmt != "text":  # else Python's last-resort handler prints warnings.
            configure(level, fmt)
        fn(*args, **kwargs)

    return run


def broker_client(broker: str | None) -> BrokerClient:
    """A client of the resolved broker address (credentials from the environment)."""
    return BrokerClient(config.resolve_broker_address(broker))
