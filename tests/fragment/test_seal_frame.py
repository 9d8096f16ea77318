"""A small logged group's seal, commit line and log record in one C call
(`herald.fragment.spool_sums.seal_framed`): the very bytes the Python steps give
(`seal_inline`, `encode_record`, `frame`), whatever the group, its registers and its
place; and a logged round's segment is byte for byte the same with the call and
without it (a fresh interpreter whose extension lacks it)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herald.fragment.commit_log_records import decode_records, frame
from herald.fragment.commits import encode_record, record_affixes, registers_json
from herald.protocol.labels import Label, LabelSet

native = pytest.importorskip("herald.fragment._spool_native", reason="the C extension is not built here")
if not hasattr(native, "seal_frame"):
    pytest.skip("the C extension here has no seal_frame (a CPU without SSE4.2)", allow_module_level=True)

from herald.fragment.spool_sums import seal_framed, seal_inline  # noqa: E402  (after the skips)

# Any text (quotes, escapes, non-ASCII): the line is JSON whatever the registers hold.
label_sets = st.lists(st.tuples(st.text(max_size=10), st.text(max_size=12)), max_size=3).map(
    lambda pairs: LabelSet(tuple(Label(name, value) for name, value in pairs)))
firsts = st.none() | st.floats(0, 4e9, allow_nan=False) | st.integers(0, 2**40).map(float)


@settings(deadline=None)  # a loaded machine is slow, not wrong
@given(st.integers(0, 2**63), label_sets, firsts)
def test_the_line_split_around_its_sum_is_encode_records_line(end, registers, first):
    prefix, suffix = record_affixes(end, registers_json(registers), first)
    sha1_hex = hashlib.sha1(prefix).hexdigest()
    assert prefix + sha1_hex.encode() + suffix == encode_record(end, registers, sha1_hex, first)


@settings(deadline=None)
@given(st.lists(st.binary(max_size=3000), max_size=4), st.binary(max_size=100),
       st.text(max_size=30).map(str.encode),
       st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), label_sets, firsts)
def test_seal_framed_gives_the_python_steps_bytes(contents, earlier, directory, begin, data_at, line_at,
                                                   registers, first):
    running, reference = native.sha1(earlier), native.sha1(earlier)
    prefix, suffix = record_affixes(len(earlier) + sum(map(len, contents)), registers_json(registers), first)
    framed = seal_framed(running, contents, directory, begin, data_at, line_at, prefix, suffix)
    assert framed is not None
    sums, running_hex, line, head = framed
    assert (sums, running_hex) == seal_inline(reference, contents)
    assert running_hex == hashlib.sha1(earlier + b"".join(contents)).hexdigest()
    assert line == encode_record(len(earlier) + sum(map(len, contents)), registers, running_hex, first)
    record = frame(directory, begin, data_at, line_at, line, contents)
    assert head + b"".join(contents) == b"".join(record)
    decoded = list(decode_records(head + b"".join(contents)))
    assert [(r.begin, r.data_at, r.line_at, r.line, r.data) for r in decoded] == [
        (begin, data_at, line_at, line, b"".join(contents))]


def test_seal_framed_refuses_what_it_cannot_frame():
    running = native.sha1()
    assert seal_framed(hashlib.sha1(), [b"x"], b"d", 0, 0, 0, b"{", b"}") is None  # not its own SHA1: Python
    with pytest.raises(TypeError, match="encoded"):
        native.seal_frame(running, [b"fine", "text"], b"d", 0, 0, 0, b"{", b"}")
    with pytest.raises(ValueError, match="65535"):
        native.seal_frame(running, [b"x"], b"d" * 70_000, 0, 0, 0, b"{", b"}")
    with pytest.raises(OverflowError):
        native.seal_frame(running, [b"x"], b"d", -1, 0, 0, b"{", b"}")
    assert running.hexdigest() == hashlib.sha1().hexdigest()  # a refused group hashes nothing


def test_a_logged_rounds_segment_is_the_same_without_the_c_seal(tmp_path):
    """The same rounds (registers, first appends, several groups) logged with the C
    call and, in a fresh interpreter, with an extension that lacks it: identical
    segments, spools and commit lines."""
    with_c, without = tmp_path / "with", tmp_path / "without"
    _log_rounds(with_c, "")
    _log_rounds(without, "import herald.fragment._spool_native as built\ndel built.seal_frame\n")
    for name in ("commitlog", "spools"):
        files = sorted(p.relative_to(with_c) for p in (with_c / name).rglob("*") if p.is_file())
        assert files and files == sorted(p.relative_to(without) for p in (without / name).rglob("*") if p.is_file())
        for path in files:
            assert (with_c / path).read_bytes() == (without / path).read_bytes(), path


ROUNDS = """
import sys
from pathlib import Path
{setup}
from herald.fragment import group_write
from herald.fragment.commit_log import CommitLog
from herald.fragment.group_write import GroupWrite
from herald.fragment.rounds import write_round
from herald.fragment.spool import Spool
from herald.protocol.journal import CompressionCodec
from herald.protocol.labels import Label, LabelSet
assert group_write.FRAMED is {framed}
root = Path(sys.argv[1])
log = CommitLog.open(root)
spools = [Spool(root / "spools" / f"j{{i}}", f"j{{i}}", 0, CompressionCodec.NONE, LabelSet(), commit_log=log)
          for i in range(3)]
registers = [LabelSet(), LabelSet.of("owner", "a"), LabelSet.of("owner", "b", "zone", "x")]
for n in range(4):
    writes = [GroupWrite(s, [b"body %d of %d\\n" % (n, i)] * (i + 1), registers[(n + i) % 3], 1000.5 + n)
              for i, s in enumerate(spools)]
    assert all(isinstance(outcome, list) for outcome in write_round(writes))
log.flush_lines()
log.close()
for spool in spools:
    spool.close()
"""


def _log_rounds(root, setup: str) -> None:
    root.mkdir()
    script = ROUNDS.format(setup=setup, framed="False" if setup else "True")
    out = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True, text=True, check=False,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr


def test_large_bodies_are_framed_alike():
    """Bodies from 32 KiB up are CRC'd without the GIL (as the crc32c package does):
    the same record all the same."""
    contents = [os.urandom(32 << 10), os.urandom(100_003), b"tail"]
    prefix, suffix = record_affixes(sum(map(len, contents)), registers_json(LabelSet()), 5.5)
    sums, running_hex, line, head = seal_framed(native.sha1(), contents, b"spools/j", 0, 0, 0, prefix, suffix)
    assert sums == [hashlib.sha1(c).hexdigest() for c in contents]
    assert head + b"".join(contents) == b"".join(frame(b"spools/j", 0, 0, 0, line, contents))
