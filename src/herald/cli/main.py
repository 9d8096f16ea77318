"""The ``herald`` command: gazctl's equal, plus ``serve``, ``auth`` and ``pipelines``.

How to add a command (there is one way):

1. A noun is a module with a ``typer.Typer`` named ``<noun>_app`` (``journals_app``
   in ``cli/journals.py``), added below with ``app.add_typer``; a top-level verb
   (``serve``, ``attach-uuids``) is a ``<verb>_command`` function added below with
   ``app.command``.
2. A command is ``@<noun>_app.command("verb")`` over ``@command`` (from
   ``cli/options.py``), taking the shared options ``BROKER``, ``LOG_LEVEL``,
   ``OUTPUT``, ``selector_option`` and opening its client with ``broker_client``.
3. It raises errors, never prints them: `run` renders every `HeraldError` (and an
   unreachable broker) as one ``error: …`` line and exit code 1.
"""

from __future__ import annotations

import sys

import httpx
import typer

from herald.cli.auth import auth_app
from herald.cli.examples import examples_app
from herald.cli.journals import journals_app
from herald.cli.members import members_app
from herald.cli.messages import attach_uuids_command
from herald.cli.pipelines import pipelines_app
from herald.cli.serve import serve_command
from herald.protocol.errors import HeraldError

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Herald: journals, fragments and exactly-once messages, with pipelines on Spark.")
app.command("serve")(serve_command)
app.command("attach-uuids")(attach_uuids_command)
app.add_typer(journals_app, name="journals")
app.add_typer(members_app, name="members")
app.add_typer(pipelines_app, name="pipelines")
app.add_typer(auth_app, name="auth")
app.add_typer(examples_app, name="examples")


def run(typer_app: typer.Typer) -> None:
    """Run ``typer_app``, rendering every expected error as one line (exit 1)."""
    try:
        typer_app()
    except HeraldError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
    except httpx.TransportError as err:
        print(f"error: cannot reach the broker: {err}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


def main() -> None:
    run(app)


if __name__ == "__main__":
    main()
