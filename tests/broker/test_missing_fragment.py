"""A persisted fragment that vanished from its store: the broker answers 410
FRAGMENT_MISSING naming the fragment (never an empty 206 a reader would reopen
forever), warns at a bounded rate, and every reader — the retrying client,
`herald journals read`, `read_committed` — surfaces the error after a bounded
number of back-offs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from herald.client import BrokerClient, RetryReader
from herald.client.committed import read_committed
from herald.protocol.errors import HeraldError, Status
from herald.testing import BrokerProcess, apply_specs, journal_spec
from tests.broker.s3_helpers import fragments, persisted_through

JOURNAL = "vanish/journal"
LINE = b'{"n": %d, "pad": "' + b"x" * 400 + b'"}\n'


@pytest.fixture
def vanished(tmp_path):
    """A broker whose first persisted fragment was deleted from the file store.
    Yields (broker, the deleted fragment's dict)."""
    proc = BrokerProcess(tmp_path / "data").start()
    apply_specs(proc.url, journal_spec(JOURNAL, length=1024))
    with proc.client() as http:
        for i in range(8):
            http.put(f"/{JOURNAL}", content=LINE % i).raise_for_status()
        items = persisted_through(http, JOURNAL, 4 * len(LINE % 0))
    first = min((i.fragment.to_dict() for i in items if i.fragment.is_persisted), key=lambda f: f["begin"])
    [path] = [p for p in proc.file_root.rglob("*") if p.is_file() and p.name.startswith(f"{first['begin']:016x}")]
    path.unlink()
    yield proc, first
    proc.kill()


def test_read_over_a_vanished_fragment_is_a_410_naming_it(vanished):
    proc, first = vanished
    with proc.client() as http:
        resp = http.get(f"/{JOURNAL}", params={"offset": first["begin"]})
        later = http.get(f"/{JOURNAL}", params={"offset": first["end"]})
    assert resp.status_code == 410, resp.text
    body = resp.json()
    assert body["status"] == "FRAGMENT_MISSING" and body["field"] == "offset"
    assert "missing from its store" in body["message"] and "Traceback" not in resp.text
    assert later.status_code == 206 and later.content.startswith(b'{"n"')  # the rest still reads


def test_retry_reader_raises_after_bounded_back_offs(vanished):
    proc, first = vanished
    with BrokerClient(proc.url) as client, pytest.raises(HeraldError) as raised:
        with RetryReader(client, JOURNAL, first["begin"]) as reader:
            for _ in reader:
                pass
    assert raised.value.status is Status.FRAGMENT_MISSING


def test_read_committed_surfaces_the_error_rather_than_hanging(vanished):
    proc, _first = vanished
    with BrokerClient(proc.url) as client, pytest.raises(HeraldError) as raised:
        list(read_committed(client, JOURNAL))
    assert raised.value.status is Status.FRAGMENT_MISSING


def test_cli_read_exits_non_zero_and_the_broker_warns_a_bounded_number_of_times(vanished):
    proc, first = vanished
    before = len(proc.stderr_lines)
    done = subprocess.run([sys.executable, "-m", "herald.cli.main", "journals", "read",
                           "-l", f"name={JOURNAL}", "--broker", proc.url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "missing from its store" in done.stderr and "Traceback" not in done.stderr
    warnings = [line for line in proc.stderr_lines[before:] if "fragment store error" in line]
    assert 1 <= len(warnings) <= 3, warnings
    with proc.client() as http:  # the broker still lists the fragment; nothing else changed
        assert any(i["fragment"]["begin"] == first["begin"] for i in fragments(http, JOURNAL))
