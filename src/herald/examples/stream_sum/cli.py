"""``herald examples stream-sum …``: chunkers publish files, a Spark summer publishes their digests."""

from __future__ import annotations

import typer

app = typer.Typer(help="chunkers publish files, a Spark summer publishes their digests.", no_args_is_help=True)


@app.callback()
def stream_sum() -> None:
    """chunkers publish files, a Spark summer publishes their digests."""
