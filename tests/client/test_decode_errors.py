"""Bytes a journal's framing cannot decode are never delivered as messages: a
reader fails naming the journal and offset, or — asked to — skips and counts them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from herald.client.committed import read_committed
from herald.message.decode_errors import DecodeErrors, MessageDecodeError, OnDecodeError
from herald.testing import apply_specs, journal_spec

GOOD = b'{"n": 1}\n'
BAD = b"this is not json\n"


@pytest.fixture
def tainted(broker, client):
    """A journal with a non-JSON line between two good ones; yields its name."""
    apply_specs(broker.url, journal_spec("decode/tainted"))
    client.append("decode/tainted", GOOD + BAD + GOOD)
    return "decode/tainted"


def test_read_committed_fails_naming_journal_and_offset(client, tainted):
    with pytest.raises(MessageDecodeError) as raised:
        list(read_committed(client, tainted))
    assert (raised.value.journal, raised.value.offset) == (tainted, len(GOOD))
    assert "not valid JSON" in str(raised.value) and tainted in str(raised.value)


def test_read_committed_can_skip_and_count_instead(client, tainted):
    errors = DecodeErrors(tainted, OnDecodeError.SKIP)
    values = [env.value for env in read_committed(client, tainted, errors=errors)]
    assert values == [GOOD.strip(), GOOD.strip()] and errors.skipped == 1


def test_cli_read_committed_fails_with_one_line_or_skips_with_a_count(broker, tainted):
    base = [sys.executable, "-m", "herald.cli.main", "journals", "read", "-l", f"name={tainted}",
            "--committed", "--broker", broker.url]
    failed = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert f"offset {len(GOOD)}" in failed.stderr and tainted in failed.stderr
    skipped = subprocess.run(base + ["--on-decode-error", "skip"], capture_output=True, text=True, timeout=60)
    assert skipped.returncode == 0 and skipped.stdout == (GOOD * 2).decode()
    assert "skipped 1 undecodable" in skipped.stderr
