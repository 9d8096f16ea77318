"""``herald examples bike-share …``: Citi Bike cycles and ride history with an exactly-once PostgreSQL store."""

from __future__ import annotations

import typer

app = typer.Typer(help="Citi Bike cycles and ride history with an exactly-once PostgreSQL store.", no_args_is_help=True)


@app.callback()
def bike_share() -> None:
    """Citi Bike cycles and ride history with an exactly-once PostgreSQL store."""
