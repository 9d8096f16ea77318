"""The ``herald`` command: gazctl's equal, plus ``serve`` and ``pipelines``.

One module per noun registers its sub-commands here. Errors print one clear line
(no traceback) and exit 1.
"""

from __future__ import annotations

import sys

import typer

from herald.cli.auth import auth_app
from herald.cli.journals import journals_app
from herald.cli.members import members_app
from herald.cli.messages import attach_uuids_command
from herald.cli.pipelines import pipelines_app
from herald.cli.serve import serve_command
from herald.protocol.errors import HeraldError

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Herald: journals, fragments and exactly-once messages, with pipelines on Spark.")
app.command("serve")(serve_command)
app.add_typer(journals_app, name="journals")
app.add_typer(members_app, name="members")
app.add_typer(pipelines_app, name="pipelines")
app.add_typer(auth_app, name="auth")
app.command("attach-uuids")(attach_uuids_command)


def main() -> None:
    try:
        app()
    except HeraldError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
