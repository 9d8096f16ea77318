"""Where the ``herald`` command finds its broker (gazctl's order, Herald's file):

1. ``--broker`` (alias ``--broker.address``),
2. else the ``BROKER_ADDRESS`` environment variable,
3. else ``Address`` under ``[journals.Broker]`` in ``~/.config/herald/herald.ini``
   (``$XDG_CONFIG_HOME/herald/herald.ini`` when that is set),
4. else ``http://localhost:8080``.

    [journals.Broker]
    Address = http://localhost:8080

``herald journals edit`` runs ``$VISUAL``, else ``$EDITOR``, else ``vi``. This module is
the CLI's one reader of the environment and the config file.
"""

from __future__ import annotations

import configparser
import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from herald.protocol.errors import ValidationError

__all__ = ["DEFAULT_BROKER_ADDRESS", "config_path", "editor_command", "resolve_broker_address"]

DEFAULT_BROKER_ADDRESS = "http://localhost:8080"
ENV_BROKER_ADDRESS = "BROKER_ADDRESS"
SECTION, KEY = "journals.Broker", "Address"


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/herald/herald.ini``, default ``~/.config/herald/herald.ini``."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or str(Path.home()), ".config")
    return Path(base) / "herald" / "herald.ini"


def _from_file(path: Path) -> str | None:
    if not path.is_file():
        return None
    parser = configparser.ConfigParser()
    try:
        parser.read(path)
    except configparser.Error as err:
        raise ValidationError(str(path), f"cannot parse config file: {err}") from None
    value = parser.get(SECTION, KEY, fallback="").strip()
    return value or None


def resolve_broker_address(flag: str | None = None, env: Mapping[str, str] | None = None,
                           path: Path | None = None) -> str:
    """The broker address by the order above, without a trailing ``/``."""
    env = os.environ if env is None else env
    address = (flag or env.get(ENV_BROKER_ADDRESS) or _from_file(path or config_path(env))
               or DEFAULT_BROKER_ADDRESS)
    if "://" not in address:
        raise ValidationError("broker", f"address must be a URL like http://host:port ({address!r})")
    return address.rstrip("/")


def editor_command(env: Mapping[str, str] | None = None) -> list[str]:
    """The editor to run, split as a shell would (``EDITOR="code --wait"`` works)."""
    env = os.environ if env is None else env
    return shlex.split(env.get("VISUAL") or env.get("EDITOR") or "vi")
