"""``herald examples word-count …``: a real-time bigram language model with a query API."""

from __future__ import annotations

import typer

app = typer.Typer(help="a real-time bigram language model with a query API.", no_args_is_help=True)


@app.callback()
def word_count() -> None:
    """a real-time bigram language model with a query API."""
