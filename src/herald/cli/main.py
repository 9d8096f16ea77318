"""The ``herald`` command: gazctl's equal, plus ``serve``, ``auth`` and ``pipelines``.

How to add a command (there is one way):

1. A noun is a module with a ``typer.Typer`` named ``<noun>_app`` (``journals_app``
   in ``cli/journals.py``), added below with ``app.add_typer``; a top-level verb
   (``serve``, ``attach-uuids``) is a ``<verb>_command`` function added below with
   ``app.command``.
2. A command is ``@<noun>_app.command("verb")`` over ``@command`` (from
   ``cli/options.py``), taking the shared options ``BROKER``, ``LOG_LEVEL``,
   ``OUTPUT``, ``selector_option`` and opening its client with ``broker_client``.
3. It raises errors, never prints them: `run` renders every `HeraldError`, every
   usage error (a bad or missing flag) and an unreachable broker as one
   ``error: …`` line.

Help is click's plain layout (``rich_markup_mode=None``): Rich markup would eat the
``[default: …]`` of a help text, and Rich's panels show ``<bool>`` beside flags.
``-h`` is ``--help``; ``--version``; ``--install-completion`` / ``--show-completion``
are typer's shell completion.
"""

from __future__ import annotations

import sys

import httpx
import typer
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

import herald
from herald.cli.auth import auth_app
from herald.cli.examples import examples_app
from herald.cli.journals import journals_app
from herald.cli.members import members_app
from herald.cli.messages import attach_uuids_command
from herald.cli.pipelines import pipelines_app
from herald.cli.serve import serve_command
from herald.protocol.errors import HeraldError

PROG_NAME = "herald"
#: For every ``herald`` app: ``-h`` as well as ``--help`` (inherited by subcommands).
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None, context_settings=CONTEXT_SETTINGS,
                  help="Herald: journals, fragments and exactly-once messages, with pipelines on Spark.")
app.command("serve")(serve_command)
app.command("attach-uuids")(attach_uuids_command)
app.add_typer(journals_app, name="journals")
app.add_typer(members_app, name="members")
app.add_typer(pipelines_app, name="pipelines")
app.add_typer(auth_app, name="auth")
app.add_typer(examples_app, name="examples")


def _print_version(value: bool) -> None:
    if value:
        print(f"herald {herald.__version__}")
        raise typer.Exit()


@app.callback()
def herald_callback(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                 help="Print herald's version and exit."),
) -> None:
    """Herald: journals, fragments and exactly-once messages, with pipelines on Spark."""


def _usage_error_line(err: UsageError) -> str:
    """``error: <what> (see herald journals list --help)``: one line naming the flag."""
    message = " ".join(err.format_message().split())
    where = f" (see {err.ctx.command_path} --help)" if err.ctx is not None else ""
    return f"error: {message}{where}"


def run(typer_app: typer.Typer, args: list[str] | None = None) -> None:
    """Run ``typer_app`` on ``args`` (default: the command line), rendering every
    expected error as one line: exit 2 for a usage error (as click), 1 for anything
    else, 130 on Ctrl-C. Always ends in SystemExit."""
    command = typer.main.get_command(typer_app)
    try:
        code = command.main(args, prog_name=PROG_NAME, standalone_mode=False)
    except NoArgsIsHelpError as err:  # ``herald journals``: the help, as click shows it
        print(err.format_message(), file=sys.stderr)
        sys.exit(2)
    except UsageError as err:
        print(_usage_error_line(err), file=sys.stderr)
        sys.exit(2)
    except ClickException as err:
        print(f"error: {' '.join(err.format_message().split())}", file=sys.stderr)
        sys.exit(err.exit_code)
    except HeraldError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
    except httpx.TransportError as err:  # a client built outside broker_client's guard
        print(f"error: cannot reach the broker: {err}", file=sys.stderr)
        sys.exit(1)
    except (KeyboardInterrupt, typer.Abort):
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


def main() -> None:
    run(app)


if __name__ == "__main__":
    main()
