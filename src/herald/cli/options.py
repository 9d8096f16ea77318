"""What every ``herald`` command shares: its options, its logging set-up, its client.

    @journals_app.command("list")
    @command
    def list_command(selector: str = selector_option(False), broker: str = BROKER,
                     log_level: str = LOG_LEVEL) -> None:
        with broker_client(broker) as client:
            ...

The broker address is resolved one way for all (`herald.cli.config`): ``--broker``,
``$BROKER_ADDRESS``, ``./herald.ini``, ``~/.config/herald/herald.ini``, gazctl's
``~/.config/gazette/gazctl.ini``, ``http://localhost:8080``. Errors are not printed
here: `herald.cli.main.run` renders every error in one place; `command` only turns
an unreachable broker into an error that names the address tried and where it came
from.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import httpx
import typer

from herald.cli import config
from herald.cli.logs import configure
from herald.cli.output import OutputFormat
from herald.client import BrokerClient
from herald.protocol.errors import HeraldError, Status

__all__ = [
    "BROKER",
    "LOG_FORMAT",
    "LOG_LEVEL",
    "LOG_LEVELS",
    "OUTPUT",
    "OUTPUT_FORMAT",
    "BrokerUnreachableError",
    "broker_client",
    "command",
    "log_level_option",
    "selector_option",
]

LOG_LEVELS = ("debug", "info", "warning", "error")


def _check_log_level(value: str) -> str:
    """``--log.level``: one of `LOG_LEVELS` (any case), refused before anything runs."""
    if value.lower() not in LOG_LEVELS:
        raise typer.BadParameter(f"{value!r} is not a level; use one of {', '.join(LOG_LEVELS)}")
    return value.lower()


def log_level_option(default: str, envvar: str | None = None) -> Any:
    return typer.Option(default, "--log.level", envvar=envvar, callback=_check_log_level,
                        help=f"{', '.join(LOG_LEVELS[:-1])} or {LOG_LEVELS[-1]}.")


BROKER = typer.Option(None, "--broker", "--broker.address", show_default=False,
                      help="Broker URL [default: $BROKER_ADDRESS, else ./herald.ini, "
                           "~/.config/herald/herald.ini, ~/.config/gazette/gazctl.ini, else "
                           "http://localhost:8080].")
LOG_LEVEL = log_level_option("warning")
LOG_FORMAT = typer.Option("text", "--log.format", help="text, or json (one object per line, fields as keys).")
OUTPUT = typer.Option(OutputFormat.table, "-o", "--output", "--format", help="table, yaml or json.")
#: For commands whose ``--output`` names something else (the pipelines' output journals).
OUTPUT_FORMAT = typer.Option(OutputFormat.table, "-o", "--output-format", "--format", help="table, yaml or json.")


def selector_option(required: bool) -> Any:
    return typer.Option(... if required else "", "-l", "--selector", show_default=False,
                        help="Label selector of journals, e.g. 'prefix=foobar/, name not in (foobar/part-001)'"
                             + ("." if required else " [default: all journals]."))


class BrokerUnreachableError(HeraldError):
    """No connection to the broker: names the address tried, where it came from, the fix."""

    def __init__(self, address: config.BrokerAddress, reason: str) -> None:
        super().__init__(Status.INTERNAL,
                         f"cannot reach the broker at {address.url} (from {address.source}): {reason}; "
                         "start one with `herald serve`, or point --broker, $BROKER_ADDRESS or "
                         "herald.ini at a running broker", "broker")


def command(fn: Callable[..., None]) -> Callable[..., None]:
    """Set up logging from the command's ``--log.level`` before it runs; an
    unreachable broker becomes `BrokerUnreachableError`."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        level = kwargs.get("log_level") or "warning"
        fmt = kwargs.get("log_format") or "text"
        if fmt not in ("text", "json"):
            raise typer.BadParameter("must be text or json", param_hint="--log.format")
        if level != "warning" or fmt != "text":  # else Python's last-resort handler prints warnings.
            configure(level, fmt)
        try:
            fn(*args, **kwargs)
        except httpx.TransportError as err:
            address = config.resolve_broker(kwargs.get("broker"))
            logging.getLogger(fn.__module__).debug("broker unreachable", exc_info=True)
            raise BrokerUnreachableError(address, _reason(err)) from None

    return run


def _reason(err: httpx.TransportError) -> str:
    cause = err.__cause__ or err.__context__
    text = str(err) or type(err).__name__
    if isinstance(cause, OSError) and cause.strerror:
        text = cause.strerror
    return text.removeprefix("[Errno 111] ").removeprefix("[Errno -2] ")


def broker_client(broker: str | None) -> BrokerClient:
    """A client of the resolved broker address (credentials from the environment)."""
    return BrokerClient(config.resolve_broker(broker).url)
