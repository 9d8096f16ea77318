"""Broker address resolution (flag, env, config file, default) and one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from typer.testing import CliRunner

from herald.cli.config import DEFAULT_BROKER_ADDRESS, config_path, editor_command, resolve_broker_address
from herald.cli.main import app
from herald.cli.output import humanize_age, humanize_bytes, table_header
from herald.protocol.errors import ValidationError
from herald.testing import journal_spec
from tests.cli.cli_helpers import ok, table


def write_ini(home, address: str):
    path = home / ".config" / "herald" / "herald.ini"
    path.parent.mkdir(parents=True)
    path.write_text(f"[journals.Broker]\nAddress = {address}\n")
    return path


def test_address_precedence_is_flag_then_env_then_file_then_default(tmp_path):
    ini = write_ini(tmp_path, "http://from-file:1/")
    env = {"HOME": str(tmp_path), "BROKER_ADDRESS": "http://from-env:2"}
    assert config_path({"HOME": str(tmp_path)}) == ini
    assert resolve_broker_address("http://flag:3", env) == "http://flag:3"
    assert resolve_broker_address(None, env) == "http://from-env:2"
    assert resolve_broker_address(None, {"HOME": str(tmp_path)}) == "http://from-file:1"
    assert resolve_broker_address(None, {"HOME": str(tmp_path / "nobody")}) == DEFAULT_BROKER_ADDRESS
    assert config_path({"XDG_CONFIG_HOME": "/x", "HOME": "/h"}).as_posix() == "/x/herald/herald.ini"
    with pytest.raises(ValidationError):
        resolve_broker_address("localhost:8080", {})


def test_cli_finds_the_broker_through_the_config_file(broker, tmp_path):
    write_ini(tmp_path, broker.url)
    ok(broker.url, "apply", input=yaml.safe_dump(journal_spec("conf/journal")))
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": None, "BROKER_ADDRESS": None}
    result = CliRunner().invoke(app, ["journals", "list"], env=env)
    assert result.exit_code == 0 and table(result.stdout) == [["NAME"], ["conf/journal"]]


def test_editor_command_prefers_visual_and_splits_like_a_shell():
    assert editor_command({"VISUAL": "code --wait", "EDITOR": "nano"}) == ["code", "--wait"]
    assert editor_command({"EDITOR": "sed -i 's/a b/c/'"}) == ["sed", "-i", "s/a b/c/"]
    assert editor_command({}) == ["vi"]


def run_herald(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "herald.cli.main", "journals", *args],
                          capture_output=True, text=True, timeout=60)


def test_a_bad_selector_exits_1_with_one_line_naming_it(broker):
    done = run_herald("list", "-l", "name in (", "--broker", broker.url)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: selector:")


def test_an_unreachable_broker_exits_1_with_one_line():
    done = run_herald("list", "--broker", "http://127.0.0.1:9")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "cannot reach the broker" in done.stderr


def test_human_formats_match_gazctl():
    assert [humanize_bytes(n) for n in (43, 2355, 1 << 20, 21 << 20)] == ["43 B", "2.3 KiB", "1.0 MiB", "21 MiB"]
    assert [humanize_age(s) for s in (0.2, 1, 59, 60, 480, 7200)] == [
        "now", "1 second ago", "59 seconds ago", "1 minute ago", "8 minutes ago", "2 hours ago"]
    assert table_header("app.gazette.dev/message-type") == "APP GAZETTE DEV/MESSAGE-TYPE"
