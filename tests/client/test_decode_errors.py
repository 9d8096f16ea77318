"""Bytes a journal's framing cannot decode are never delivered as messages: a
reader fails naming the journal and offset, or — asked to — skips and counts them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from herald.client.committed import read_committed
from herald.message import NDJSONFraming, build_uuid
from herald.message.decode_errors import DecodeErrors, MessageDecodeError, OnDecodeError
from herald.testing import apply_specs, journal_spec

GOOD = b'{"n": 1}\n'
BAD = b"this is not json\n"
# A line the NDJSON fast path would take (it begins with a sound UUID field), torn.
TORN = NDJSONFraming().encode(b'{"n": 2}', build_uuid(b"\x01" * 6, 1 << 4, 0))[:-4] + b"\n"

# (content type, a good message, an undecodable one, why)
TAINTS = {
    "ndjson-not-json": ("application/x-ndjson", GOOD, BAD, "not valid JSON"),
    "ndjson-torn": ("application/x-ndjson", GOOD, TORN, "not valid JSON"),
    "csv-field-count": ("text/csv", b",a,b\n", b",a\n", "record has 2 fields, want 3"),
}


@pytest.fixture
def tainted(broker, client):
    """A journal with a non-JSON line between two good ones; yields its name."""
    apply_specs(broker.url, journal_spec("decode/tainted"))
    client.append("decode/tainted", GOOD + BAD + GOOD)
    return "decode/tainted"


@pytest.fixture(params=sorted(TAINTS))
def tainted_by(request, broker, client):
    """A journal of each framing with an undecodable message between two good ones
    (it is read by the journal's own framing, from its content-type label)."""
    content_type, good, bad, why = TAINTS[request.param]
    name = f"decode/{request.param}"
    spec = journal_spec(name)
    spec["labels"] = [{"name": "content-type", "value": content_type}]
    apply_specs(broker.url, spec)
    client.append(name, good + bad + good)
    return name, good, why


def test_read_committed_fails_naming_journal_and_offset(client, tainted_by):
    name, good, why = tainted_by
    with pytest.raises(MessageDecodeError) as raised:
        list(read_committed(client, name))
    assert (raised.value.journal, raised.value.offset) == (name, len(good))
    assert why in str(raised.value) and f"journal {name}" in str(raised.value)
    assert f"offset {len(good)}" in str(raised.value)


def test_read_committed_can_skip_and_count_instead(client, tainted_by):
    name, good, _why = tainted_by
    errors = DecodeErrors(name, OnDecodeError.SKIP)
    values = [env.value for env in read_committed(client, name, errors=errors)]
    assert values == [good.strip(), good.strip()] and errors.skipped == 1
    assert errors.statistics().first_offset == errors.statistics().last_offset == len(good)


def test_cli_read_committed_fails_with_one_line_or_skips_with_a_count(broker, tainted):
    base = [sys.executable, "-m", "herald.cli.main", "journals", "read", "-l", f"name={tainted}",
            "--committed", "--broker", broker.url]
    failed = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert f"offset {len(GOOD)}" in failed.stderr and tainted in failed.stderr
    skipped = subprocess.run(base + ["--on-decode-error", "skip"], capture_output=True, text=True, timeout=60)
    assert skipped.returncode == 0 and skipped.stdout == (GOOD * 2).decode()
    assert "skipped 1 undecodable" in skipped.stderr
