"""``herald examples stream-sum`` as a command: bad flags are one ``error:`` line
naming the flag, before any broker or Spark starts; ``journals`` creates them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from herald.client import BrokerClient


def _herald(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "herald.cli.main", "examples", "stream-sum", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("flags", "field"), [
    (["--chunkers", "0"], "chunkers"), (["--duration", "soon"], "duration"), (["--sum-timeout", "-3s"], "sum_timeout"),
])
def test_a_bad_flag_is_one_error_line_naming_it(flags, field):
    result = _herald("run", *flags)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:"), result.stderr
    assert "started an embedded broker" not in result.stdout


def test_journals_creates_the_chunks_and_sums_journals(broker):
    result = _herald("journals", "--partitions", "2", "--broker", broker.url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["stream-sum/chunks/part-000", "stream-sum/chunks/part-001",
                                     "stream-sum/sums/part-000"]
    with BrokerClient(broker.url) as client:
        assert len(client.list("app.herald.dev/example=stream-sum")) == 3
