"""The C block scan (`herald.spark._scan_native`, through `herald.spark.blocks`)
gives exactly the numpy scan's columns (`herald.message.columnar.scan_ndjson`),
and its UUID columns exactly `herald.spark.rows.numpy_uuid_columns`: on any mix of
lines, a block split into parts anywhere (a line, even its UUID, across parts),
with and without values; and a fresh interpreter without the extension reads the
same batches through the numpy code."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herald.message.columnar import Columns, scan_ndjson
from herald.message.decode_errors import DecodeErrors, OnDecodeError
from herald.message.framing import NDJSONFraming
from herald.spark.blocks import BlockScanner, scan_parts
from herald.spark.rows import columns_batch, native_uuid_columns, numpy_uuid_columns
from tests.spark.test_rows_bulk import _encoded, lines

native = pytest.importorskip("herald.spark._scan_native", reason="the C extension is not built here")

FRAMING = NDJSONFraming()
NAMES = ["uuid", "producer", "clock", "flags", "timestamp"]


def _split(buf: bytes, cuts: list[int]) -> list[bytes]:
    """``buf`` in parts at ``cuts`` (positions, any order; repeats give empty parts)."""
    at = sorted(min(c, len(buf)) for c in cuts)
    return [buf[a:b] for a, b in zip([0, *at], [*at, len(buf)], strict=True)]


def _same(got: Columns, want: Columns) -> None:
    assert got.begins.tolist() == want.begins.tolist()
    assert got.ends.tolist() == want.ends.tolist()
    assert got.has_uuid.tolist() == want.has_uuid.tolist()
    assert got.uuids.tobytes() == want.uuids.tobytes()
    assert got.offsets.tolist() == want.offsets.tolist()
    assert got.values.tobytes() == want.values.tobytes()
    assert [(e.offset, str(e)) for e in got.errors] == [(e.offset, str(e)) for e in want.errors]


@settings(max_examples=300, deadline=None)
@given(st.lists(lines, max_size=40), st.binary(max_size=60).filter(lambda b: b"\n" not in b),
       st.lists(st.integers(0, 4000), max_size=6), st.integers(0, 1 << 40), st.booleans())
def test_the_c_scan_of_parts_equals_the_numpy_scan_of_their_join(body, tail, cuts, base, values):
    buf = b"".join(body) + tail
    got, consumed = scan_parts(_split(buf, cuts), base, FRAMING, values)
    want, want_consumed = scan_ndjson(buf, base, FRAMING, values)
    assert consumed == want_consumed
    _same(got, want)
    assert columns_batch("a/j", got).equals(columns_batch("a/j", want))


@pytest.mark.parametrize("field", ["id", "UUID", "a_longer_uuid_field"])
def test_other_uuid_fields_and_lines_cut_inside_their_uuid(field):
    framing = NDJSONFraming(uuid_field=field)
    line = framing.encode({"v": "é"}, b"\x12" * 16)
    buf = line * 3 + b"{}\n" + line[:-2] + b"\n" + line
    for cut in range(len(line) + 3):  # every cut of the first two lines, the UUID's included
        got, consumed = scan_parts([buf[:cut], buf[cut:cut + len(line)], buf[cut + len(line):]], 5, framing)
        want, want_consumed = scan_ndjson(buf, 5, framing)
        assert consumed == want_consumed
        _same(got, want)


def test_a_block_without_a_newline_or_without_parts():
    for parts in ([], [b""], [b"", b"{\"a\":1}"], [b"no newline"]):
        cols, consumed = scan_parts(parts, 0, FRAMING)
        assert (len(cols), consumed) == (0, 0)


@settings(max_examples=100, deadline=None)
@given(st.lists(lines, max_size=60), st.lists(st.integers(1, 300), min_size=1, max_size=30),
       st.integers(64, 1024))
def test_a_block_scanner_fed_chunks_anywhere_gives_the_one_shot_scan(body, sizes, block_bytes):
    buf = b"".join(body)
    errors = DecodeErrors("a/j", OnDecodeError.SKIP)
    scanner, chunks, at, i = BlockScanner(FRAMING, errors, block_bytes), [], 0, 0
    while at < len(buf):
        chunks.append((100 + at, buf[at:at + sizes[i % len(sizes)]]))
        at, i = at + sizes[i % len(sizes)], i + 1
    blocks = list(scanner.scan(chunks))
    want, _ = scan_ndjson(buf, 100, FRAMING)
    assert [b for c in blocks for b in c.begins.tolist()] == want.begins.tolist()
    assert b"".join(c.values.tobytes() for c in blocks) == want.values.tobytes()
    assert b"".join(c.uuids.tobytes() for c in blocks) == want.uuids.tobytes()
    assert errors.skipped == len(want.errors) and scanner.buffered == 0


uuids16 = st.binary(min_size=16, max_size=16)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(uuids16, st.booleans()), max_size=50),
       st.lists(st.sampled_from(NAMES), unique=True, min_size=1))
def test_the_c_uuid_columns_equal_numpys(rows, names):
    packed = b"".join(u if ok else bytes(16) for u, ok in rows)
    valid = np.array([ok for _, ok in rows], dtype=bool)
    got, want = native_uuid_columns(packed, valid, names), numpy_uuid_columns(packed, valid, None, names)
    assert set(names) <= got.keys() & want.keys()  # numpy's builds the three numbers together
    for name in names:
        assert got[name].type == want[name].type
        assert got[name].equals(want[name]), name


def test_timestamps_before_1970_floor_as_numpy_does():
    """A clock of 0..9 ticks (1582, before the Unix epoch): the division rounds down."""
    from herald.message import build_uuid

    packed = b"".join(build_uuid(b"\x01" * 6, clock, 0) for clock in range(0, 200, 7))
    valid = np.ones(len(packed) // 16, dtype=bool)
    got, want = native_uuid_columns(packed, valid, NAMES), numpy_uuid_columns(packed, valid, None, NAMES)
    assert all(got[n].equals(want[n]) for n in NAMES)


_WITHOUT = """
import sys
sys.modules["herald.spark._scan_native"] = None  # as if never built: importing it raises ImportError
import pyarrow as pa
from herald.message.decode_errors import DecodeErrors, OnDecodeError
from herald.message.framing import NDJSONFraming
from herald.spark import blocks
from herald.spark.reading import scan_batches
assert blocks.NATIVE is None
buf = sys.stdin.buffer.read()
chunks = [(7 + i, buf[i:i + 1000]) for i in range(0, len(buf), 1000)]
batches = scan_batches(chunks, "a/j", NDJSONFraming(), DecodeErrors("a/j", OnDecodeError.SKIP), block_bytes=4096)
table = pa.Table.from_batches(list(batches))
sink = pa.BufferOutputStream()
with pa.ipc.new_stream(sink, table.schema) as writer:
    writer.write_table(table)
sys.stdout.buffer.write(sink.getvalue().to_pybytes())
"""


def test_a_fresh_interpreter_without_the_extension_reads_the_same_batches():
    from herald.spark.reading import scan_batches

    rng = np.random.default_rng(3)
    body = [_encoded(bytes(rng.integers(0, 256, 6, dtype=np.uint8)), int(c), int(c % 4), f"v{c}" * int(c % 9))
            for c in rng.integers(1, 1 << 59, 300)]
    body[7:7] = [b'{"x":1}\n', b"not json\n", b'{"a":[]}\n']  # no UUID; an error (skipped); no UUID
    buf = b"".join(body)
    done = subprocess.run([sys.executable, "-c", _WITHOUT], input=buf, capture_output=True, check=True)
    without = pa.ipc.open_stream(done.stdout).read_all()
    chunks = [(7 + i, buf[i:i + 1000]) for i in range(0, len(buf), 1000)]
    batches = scan_batches(chunks, "a/j", FRAMING, DecodeErrors("a/j", OnDecodeError.SKIP), block_bytes=4096)
    assert native is not None
    assert pa.Table.from_batches(list(batches)).equals(without)
    assert without.num_rows == 302
