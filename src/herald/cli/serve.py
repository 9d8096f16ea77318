"""``herald serve``: run a broker. With no flags, one embedded broker on 127.0.0.1:8080."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from herald.broker import BrokerSettings, serve
from herald.broker.settings import DEFAULT_MAX_APPEND_BYTES
from herald.cli.logs import configure


def serve_command(
    host: str = typer.Option("127.0.0.1", "--host", "--broker.host", envvar="HERALD_BROKER_HOST",
                             help="Address to bind."),
    port: int = typer.Option(8080, "--port", "--broker.port", envvar="HERALD_BROKER_PORT",
                             help="Port to bind; 0 picks a free one (printed when ready)."),
    data_dir: Path = typer.Option(Path("herald-data"), "--data-dir", "--broker.data-dir",
                                  envvar="HERALD_BROKER_DATA_DIR",
                                  help="Local spools and the embedded keyspace."),
    file_root: Path = typer.Option(None, "--file-root", "--broker.file-root",
                                   envvar="HERALD_BROKER_FILE_ROOT",
                                   help="Where file:/// store URLs resolve [default: DATA_DIR/fragments]."),
    max_append_bytes: int = typer.Option(DEFAULT_MAX_APPEND_BYTES, "--max-append-bytes",
                                         "--broker.max-append-bytes",
                                         envvar="HERALD_BROKER_MAX_APPEND_BYTES",
                                         help="Largest accepted append (413 beyond)."),
    log_level: str = typer.Option("info", "--log.level", envvar="HERALD_LOG_LEVEL"),
    log_format: str = typer.Option("text", "--log.format", envvar="HERALD_LOG_FORMAT",
                                   help="text or json"),
) -> None:
    """Serve journals over HTTP until SIGTERM (then finish appends, persist spools, exit 0)."""
    if log_format not in ("text", "json"):
        raise typer.BadParameter("must be text or json", param_hint="--log.format")
    configure(log_level, log_format)
    settings = BrokerSettings(host=host, port=port, data_dir=data_dir, file_root=file_root,
                              max_append_bytes=max_append_bytes)
    asyncio.run(serve(settings, ready=lambda line: print(line, flush=True)))
