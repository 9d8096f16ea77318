"""``--help`` shows every default and flags as flags; ``-h``, ``--version`` and shell
completion; one broker-address lookup (flag, env, ./herald.ini, the user's file, gazctl.ini)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

import herald
from herald.cli.config import DEFAULT_BROKER_ADDRESS, config_paths, resolve_broker
from herald.cli.main import app
from herald.protocol.errors import ValidationError


def all_commands(command=None, path=()):
    """Every (path, click command) of the ``herald`` tree."""
    command = command or typer.main.get_command(app)
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from all_commands(sub, (*path, name))


def help_of(*path: str) -> str:
    result = CliRunner().invoke(app, [*path, "-h"])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_every_option_with_a_default_shows_it_in_help():
    missing = []
    for path, command in all_commands():
        for param in command.params:
            if param.param_type_name != "option" or param.required or getattr(param, "is_flag", False):
                continue
            if param.hidden or param.name in ("help", "install_completion", "show_completion"):
                continue
            record = param.get_help_record(typer.Context(command)) or ("", "")
            if "default:" not in " ".join(record[1].split()):
                missing.append(f"herald {' '.join(path)} {param.opts[0]}")
    assert missing == []


def test_help_keeps_bracketed_defaults_and_shows_flags_without_a_type():
    text = " ".join(help_of("journals", "read").split())
    assert "[default: $BROKER_ADDRESS, else ./herald.ini" in text
    assert "--block Keep reading" in text and "<bool>" not in text
    assert "<bool>" not in help_of("examples") and "-h, --help" in help_of("examples")


def test_version_and_short_help():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"herald {herald.__version__}\n"
    assert help_of().startswith("Usage: ") and "-h, --help" in help_of()


def test_shell_completion_completes_commands_and_flags():
    env = {**os.environ, "_HERALD_COMPLETE": "complete_bash", "COMP_WORDS": "herald journals re",
           "COMP_CWORD": "2"}
    done = subprocess.run([sys.executable, "-m", "herald.cli.main"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.split() == ["read"], done
    script = subprocess.run([sys.executable, "-m", "herald.cli.main", "--show-completion", "bash"],
                            env={**os.environ, "SHELL": "/bin/bash"}, capture_output=True, text=True, timeout=60)
    assert "_HERALD_COMPLETE=complete_bash" in script.stdout, script.stderr


def write_ini(path, address: str, section: str = "journals.Broker", key: str = "Address"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"[{section}]\n{key} = {address}\n")


def test_broker_lookup_order_is_flag_env_local_user_gazctl_default(tmp_path):
    cwd, home = tmp_path / "project", tmp_path / "home"
    cwd.mkdir()
    env = {"HOME": str(home)}
    paths = config_paths(env, cwd)
    assert paths == [cwd / "herald.ini", home / ".config/herald/herald.ini", home / ".config/gazette/gazctl.ini"]
    assert resolve_broker(None, env, paths).url == DEFAULT_BROKER_ADDRESS
    write_ini(paths[2], "http://gazctl:1/", key="address")  # go-flags keys: any case
    assert resolve_broker(None, env, paths) == resolve_broker(None, env, paths[2:])
    assert resolve_broker(None, env, paths).source == str(paths[2])
    write_ini(paths[1], "http://user:2")
    assert resolve_broker(None, env, paths).url == "http://user:2"
    write_ini(paths[0], "http://local:3")
    assert resolve_broker(None, env, paths).url == "http://local:3"
    env["BROKER_ADDRESS"] = "http://env:4"
    assert resolve_broker(None, env, paths).source == "$BROKER_ADDRESS"
    assert resolve_broker("http://flag:5", env, paths).url == "http://flag:5"


@pytest.mark.parametrize("content", ["not an ini at all", "[journals.Broker]\nAddress = localhost:8080\n",
                                     "\xff\xfe garbage"])
def test_a_hostile_config_file_is_named_in_the_error(tmp_path, content):
    path = tmp_path / "herald.ini"
    path.write_text(content, errors="surrogateescape") if "\xff" not in content else path.write_bytes(b"\xff\xfe[")
    with pytest.raises(ValidationError) as err:
        resolve_broker(None, {}, [path])
    assert str(path) in str(err.value)
