"""The bulk path (`scan_ndjson` → `columns_batch`) gives exactly the Arrow batch
the exact path builds (the per-line decoder's frames → `RowBuffer`): every column,
type and value, on fast-path lines, odd UUIDs and lines off the fast path."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herald.message import Frame, build_uuid
from herald.message.columnar import newline_positions, scan_ndjson
from herald.message.framing import NDJSONFraming
from herald.spark.rows import ARROW_SCHEMA, RowBuffer, columns_batch

FRAMING = NDJSONFraming()
JOURNAL = "a/journal"
producers = st.binary(min_size=6, max_size=6)
clocks = st.integers(1, (1 << 60) - 1)
flags = st.sampled_from([0, 1, 2, 3, 0x3FF])


def _encoded(producer: bytes, clock: int, flag: int, body: object) -> bytes:
    return FRAMING.encode(orjson.dumps({"v": body}), build_uuid(producer, clock, flag))


def _recased(line: bytes, upper: bool) -> bytes:
    """The line with its UUID's hex digits in upper case (or mixed)."""
    text = line[9:45]
    return line[:9] + (text.upper() if upper else text[:18].upper() + text[18:]) + line[45:]


ints = st.integers(-(1 << 63), (1 << 63) - 1)
bodies = st.one_of(st.text(max_size=12), ints, st.dictionaries(st.text(max_size=4), ints, max_size=2))
fast = st.builds(_encoded, producers, clocks, flags, bodies)
lines = st.one_of(
    fast,
    st.builds(_recased, fast, st.booleans()),
    # All-digit UUIDs (no letter to tell their case), and the zero UUID.
    st.sampled_from([b'{"UUID":"12345678-1234-1234-1234-123456789012","n":1}\n',
                     b'{"UUID":"00000000-0000-0000-0000-000000000000"}\n']),
    st.builds(lambda t: orjson.dumps({"x": t, "UUID": "not-a-uuid"}) + b"\n", st.text(max_size=10)),
    st.builds(lambda t: orjson.dumps({"x": t}) + b"\n", st.text(max_size=10)),  # unicode, no UUID
    st.builds(lambda line: line[:-1] + b"\r\n", fast),  # CRLF
    st.builds(lambda c: b'{"n": 1, "UUID": "%s"}\n' % str(__import__("uuid").UUID(
        bytes=build_uuid(b"\x03" * 6, c, 2))).encode(), clocks),  # the UUID not first
    st.sampled_from([b"\n", b"{}\n", b"x\n", b"not json at all\n"]),  # empty and short lines
)


def exact(buf: bytes, base: int, framing: NDJSONFraming = FRAMING):
    """The batch the per-message path builds, and its decode error count."""
    rows, frames, errors = RowBuffer(JOURNAL, batch_rows=1 << 30), [], 0
    for event in framing.decoder().feed(buf, base):
        if isinstance(event, Frame):
            frames.append(event)
            rows.add(event.begin, event.end, event.uuid, event.value)
        else:
            errors += 1
    return rows.flush(), errors


def check(buf: bytes, base: int, framing: NDJSONFraming = FRAMING) -> None:
    cols, _ = scan_ndjson(buf, base, framing)
    want, errors = exact(buf, base, framing)
    assert len(cols.errors) == errors
    if want is None:
        assert len(cols) == 0
        return
    got = columns_batch(JOURNAL, cols)
    assert got.schema == ARROW_SCHEMA == want.schema
    for name in ARROW_SCHEMA.names:
        assert got.column(name).to_pylist() == want.column(name).to_pylist(), name
    assert got.equals(want)


@settings(max_examples=300, deadline=None)
@given(st.lists(lines, max_size=40), st.integers(0, 1 << 40))
def test_bulk_batch_equals_the_exact_path_on_mixed_lines(body, base):
    check(b"".join(body), base)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(fast, st.builds(_recased, fast, st.booleans())), min_size=1, max_size=40),
       st.integers(0, 1 << 40))
def test_bulk_batch_equals_the_exact_path_when_every_line_is_fast(body, base):
    """The case where the UUID text is taken from the lines, not re-encoded."""
    check(b"".join(body), base)


def test_a_short_last_line_near_the_end_of_the_block():
    """A UUID-only line is 47 bytes: its head's last word runs past the block's end."""
    bare = b'{"UUID":"%s"}\n' % str(__import__("uuid").UUID(bytes=build_uuid(b"\x01" * 6, 7, 0))).encode()
    line = _encoded(b"\x01" * 6, 7, 0, 1)
    for body in (bare, line + bare, bare.upper() + bare, line, line * 3, b"\n" * 5 + line, line + b"x\n"):
        check(body, 0)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 7))
def test_newline_positions_are_every_newline(data, skip):
    arr = np.frombuffer(data, np.uint8)[skip:]
    assert newline_positions(arr).tolist() == np.flatnonzero(arr == 0x0A).tolist()


@given(st.lists(st.integers(1, 40), max_size=30))
def test_newline_positions_on_lines_of_any_length(lengths):
    data = b"".join(b"a" * (n - 1) + b"\n" for n in lengths)
    arr = np.frombuffer(data, np.uint8)
    assert newline_positions(arr).tolist() == np.flatnonzero(arr == 0x0A).tolist()


@pytest.mark.parametrize("field", ["id", "UUID", "uuid_v1", "a_longer_uuid_field"])
def test_uuid_fields_whose_head_is_not_whole_words(field):
    """Heads are checked in 8-byte words: a short last line is read past the block's
    end (as zeros) for prefixes whose head does not fill its last word."""
    framing = NDJSONFraming(uuid_field=field)
    text = str(__import__("uuid").UUID(bytes=build_uuid(b"\x05" * 6, 9, 1))).encode()
    bare = framing._prefix + text + b'"}\n'
    line = framing.encode({"v": "é"}, build_uuid(b"\x05" * 6, 10, 0))
    for body in (bare, line + bare, bare * 3, line, bare + b"{}\n", bare[:-2] + b"\n"):
        check(body, 7, framing)
