"""``herald examples …``: Gazette's example applications (stream-sum, word-count, bike-share) on Spark."""

from __future__ import annotations

import typer

from herald.examples.bike_share.cli import app as bike_share_app
from herald.examples.stream_sum.cli import app as stream_sum_app
from herald.examples.word_count.cli import app as word_count_app

__all__ = ["examples_app"]

examples_app = typer.Typer(help="Gazette's example applications as Spark jobs.", no_args_is_help=True)
examples_app.add_typer(stream_sum_app, name="stream-sum")
examples_app.add_typer(word_count_app, name="word-count")
examples_app.add_typer(bike_share_app, name="bike-share")
