"""``herald auth token``: mint a JWT from the brokers' ``--auth-keys``.

    export BROKER_AUTH_TOKEN=$(herald auth token --cap READ,LIST -l 'prefix=events/' --ttl 1h)

The token carries Gazette's claims: ``cap`` (capabilities), ``sel`` (the label
selector of the journals it may see) and ``exp``. Anyone holding the keys can mint
any token, so keep them where the brokers' own configuration is kept.
"""

from __future__ import annotations

import time

import typer

from herald.auth import AuthKeys, Claims, parse_capabilities
from herald.cli.options import LOG_LEVEL, command
from herald.cli.output import OutputFormat, print_doc
from herald.protocol.journal import parse_duration
from herald.protocol.labels import LabelSelector, rewrite_prefix_selector

auth_app = typer.Typer(no_args_is_help=True, help="Authorization tokens (JWTs) for brokers run with --auth-keys.")


@auth_app.command("token")
@command
def token_command(
    cap: str = typer.Option(..., "--cap", help="Capabilities: LIST, APPLY, READ, APPEND, REPLICATE, "
                                               "ALL or integers, comma separated."),
    selector: str = typer.Option("", "-l", "--selector",
                                 help="Journals the token may see (a label selector; default: all)."),
    ttl: str = typer.Option("1h", "--ttl", help="How long the token is valid (Go duration)."),
    subject: str = typer.Option("", "--subject", help="The token's `sub` claim (who it is for) [default: none]."),
    keys: str = typer.Option(..., "--auth-keys", envvar="HERALD_AUTH_KEYS",
                             help="The brokers' keys (the first one signs).", show_default=False),
    output: OutputFormat = typer.Option(OutputFormat.table, "-o", "--output",
                                        help="table prints the bare token; json/yaml the claims too."),
    log_level: str = LOG_LEVEL,
) -> None:
    """Print a signed token (use it as BROKER_AUTH_TOKEN or the Spark option authToken)."""
    ttl_s = parse_duration(ttl, "--ttl")
    if ttl_s <= 0:
        raise typer.BadParameter("must be positive", param_hint="--ttl")
    claims = Claims(parse_capabilities(cap, "--cap"), rewrite_prefix_selector(LabelSelector.parse(selector)),
                    time.time() + ttl_s, subject)
    token = AuthKeys.parse(keys, "--auth-keys").sign(claims)
    if output is OutputFormat.table:
        print(token)
        return
    print_doc({"token": token, "claims": claims.to_jwt()}, output)
