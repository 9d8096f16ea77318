"""Where the ``herald`` command finds its broker: one lookup for every command.

First match wins:

1. ``--broker`` (alias ``--broker.address``),
2. the ``BROKER_ADDRESS`` environment variable (gazctl's),
3. ``Address`` under ``[journals.Broker]`` in ``./herald.ini`` (the working
   directory: a project's own broker),
4. the same in ``$XDG_CONFIG_HOME/herald/herald.ini`` (default
   ``~/.config/herald/herald.ini``: the user's),
5. the same in Gazette's ``$XDG_CONFIG_HOME/gazette/gazctl.ini`` (default
   ``~/.config/gazette/gazctl.ini``), so a gazctl user's set-up works unchanged,
6. ``http://localhost:8080``.

    [journals.Broker]
    Address = http://localhost:8080

Every file has gazctl's INI shape, keys case-insensitive. `resolve_broker` also says
where the address came from, so an unreachable broker's error can name the place to
fix. ``herald journals edit`` runs ``$VISUAL``, else ``$EDITOR``, else ``vi``. This
module is the CLI's one reader of the environment and the config files.
"""

from __future__ import annotations

import configparser
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from herald.protocol.errors import ValidationError

__all__ = [
    "DEFAULT_BROKER_ADDRESS",
    "BrokerAddress",
    "config_path",
    "config_paths",
    "editor_command",
    "resolve_broker",
    "resolve_broker_address",
]

DEFAULT_BROKER_ADDRESS = "http://localhost:8080"
ENV_BROKER_ADDRESS = "BROKER_ADDRESS"
SECTION, KEY = "journals.Broker", "Address"


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """A resolved broker URL and where it came from (``--broker``, ``$BROKER_ADDRESS``,
    a file's path, or ``default``)."""

    url: str
    source: str


def _config_home(env: Mapping[str, str]) -> Path:
    return Path(env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or str(Path.home()), ".config"))


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The user's file: ``$XDG_CONFIG_HOME/herald/herald.ini`` (``~/.config/…``)."""
    return _config_home(os.environ if env is None else env) / "herald" / "herald.ini"


def config_paths(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> list[Path]:
    """The files searched, in order: ``./herald.ini``, the user's, gazctl's."""
    env = os.environ if env is None else env
    return [(cwd or Path.cwd()) / "herald.ini", config_path(env), _config_home(env) / "gazette" / "gazctl.ini"]


def _from_file(path: Path) -> str | None:
    if not path.is_file():
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path)
    except (configparser.Error, UnicodeDecodeError, OSError) as err:
        raise ValidationError(str(path), f"cannot parse config file ({err}); fix or remove it") from None
    value = parser.get(SECTION, KEY, fallback="").strip()
    return value or None


def resolve_broker(flag: str | None = None, env: Mapping[str, str] | None = None,
                   paths: list[Path] | None = None) -> BrokerAddress:
    """The broker address by the order above, without a trailing ``/``."""
    env = os.environ if env is None else env
    found = None
    if flag:
        found = BrokerAddress(flag, "--broker")
    elif env.get(ENV_BROKER_ADDRESS):
        found = BrokerAddress(env[ENV_BROKER_ADDRESS], f"${ENV_BROKER_ADDRESS}")
    else:
        for path in config_paths(env) if paths is None else paths:
            if (value := _from_file(path)) is not None:
                found = BrokerAddress(value, str(path))
                break
    found = found or BrokerAddress(DEFAULT_BROKER_ADDRESS, "default")
    if "://" not in found.url:
        raise ValidationError("broker", f"address from {found.source} must be a URL like http://host:port "
                                        f"({found.url!r})")
    return BrokerAddress(found.url.rstrip("/"), found.source)


def resolve_broker_address(flag: str | None = None, env: Mapping[str, str] | None = None,
                           path: Path | None = None) -> str:
    """`resolve_broker`'s URL alone (``path``: search only that file)."""
    return resolve_broker(flag, env, None if path is None else [path]).url


def editor_command(env: Mapping[str, str] | None = None) -> list[str]:
    """The editor to run, split as a shell would (``EDITOR="code --wait"`` works)."""
    env = os.environ if env is None else env
    return shlex.split(env.get("VISUAL") or env.get("EDITOR") or "vi")
