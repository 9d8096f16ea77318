"""Helpers for CLI tests: run ``herald`` in-process (CliRunner) or as a subprocess."""

from __future__ import annotations

import re
import subprocess
import sys

from typer.testing import CliRunner

from herald.cli.main import app

DEADLINE_S = 30.0


def herald(url: str, *args: str, input: str | bytes | None = None, env: dict | None = None):
    """``herald journals <args>`` in-process against the broker at ``url``."""
    result = CliRunner().invoke(app, ["journals", *args], input=input,
                                env={"BROKER_ADDRESS": url, **(env or {})})
    return result


def ok(url: str, *args: str, input: str | bytes | None = None, env: dict | None = None) -> str:
    result = herald(url, *args, input=input, env=env)
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def table(text: str) -> list[list[str]]:
    """A kubectl-style table → rows of cells (the header row first)."""
    return [re.split(r" {2,}", line.strip()) for line in text.splitlines() if line.strip()]


def names(text: str) -> list[str]:
    return [row[0] for row in table(text)[1:]]


def spawn(url: str, *args: str, stdin=subprocess.DEVNULL) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "herald.cli.main", "journals", *args, "--broker", url],
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
