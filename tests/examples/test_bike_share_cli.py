"""``herald examples bike-share …`` on bad input: one ``error:`` line naming the field, exit 1."""

from __future__ import annotations

import subprocess
import sys

import pytest

BIKES = [sys.executable, "-m", "herald.cli.main", "examples", "bike-share"]


@pytest.mark.parametrize(("args", "field"), [
    (["generate", "/nonexistent/rides.csv"], "out"),
    (["generate", "rides.csv", "--stations", "3"], "stations"),
    (["run", "--checkpoint", "ckpt", "--dsn", "postgresql://x@127.0.0.1:1/x", "--on-bad-row", "maybe"], "on_bad_row"),
    (["run", "--checkpoint", "ckpt", "--dsn", "postgresql://x@127.0.0.1:1/x"], "dsn"),
    (["serve", "--dsn", "no-such-option=1"], "dsn"),
])
def test_bad_input_is_one_error_line_naming_the_field(tmp_path, args, field):
    done = subprocess.run([*BIKES, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {field}: ") and done.stderr.count("\n") == 1, done.stderr
    assert not list(tmp_path.iterdir())  # nothing written
