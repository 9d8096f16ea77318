"""The bulk NDJSON scanner gives exactly the per-line decoder's frames, as columns."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from herald.message import Frame, build_uuid
from herald.message.columnar import scan_ndjson
from herald.message.framing import FramingError, NDJSONFraming

FRAMING = NDJSONFraming()

lines = st.one_of(
    st.builds(lambda c, b: FRAMING.encode(orjson.dumps({"n": b}), build_uuid(b"\x01" * 6, c, 0)),
              st.integers(1, 1 << 60), st.text(max_size=20)),
    st.builds(lambda t: orjson.dumps({"other": t, "UUID": "not-a-uuid"}) + b"\n", st.text(max_size=10)),
    st.builds(lambda t: orjson.dumps({"x": t}) + b"\n", st.text(max_size=10)),
    st.just(b"not json at all\n"),
    # Torn lines that still begin with a well-formed UUID field (the fast path's shape).
    st.builds(lambda c, cut: FRAMING.encode(b'{"n":[1,2]}', build_uuid(b"\x02" * 6, c, 0))[:cut] + b"\n",
              st.integers(1, 1 << 60), st.integers(40, 60)),
    st.builds(lambda c: b'{"n": 1, "UUID": "%s"}\n' % str(__import__("uuid").UUID(
        bytes=build_uuid(b"\x03" * 6, c, 2))).encode(), st.integers(1, 1 << 60)),
)


def reference(buf: bytes, base: int):
    decoder = FRAMING.decoder()
    events = decoder.feed(buf, base)
    return [e for e in events if isinstance(e, Frame)], [e for e in events if isinstance(e, FramingError)]


@settings(max_examples=300, deadline=None)
@given(st.lists(lines, max_size=30), st.binary(max_size=20).filter(lambda b: b"\n" not in b),
       st.integers(0, 1 << 40))
def test_scan_equals_the_per_line_decoder(body, tail, base):
    buf = b"".join(body) + tail
    cols, consumed = scan_ndjson(buf, base, FRAMING)
    frames, errors = reference(buf, base)
    assert consumed == len(buf) - len(tail)
    assert len(cols) == len(frames)
    assert len(cols.errors) == len(errors)
    assert len(cols.values) == int(cols.offsets[-1])  # the torn tail is no value's bytes
    for i, frame in enumerate(frames):
        assert (int(cols.begins[i]), int(cols.ends[i])) == (frame.begin, frame.end)
        value = cols.values[cols.offsets[i]:cols.offsets[i + 1]].tobytes()
        assert value == frame.value
        assert (cols.uuids[i].tobytes() if cols.has_uuid[i] else None) == frame.uuid


@settings(max_examples=100, deadline=None)
@given(st.lists(lines, max_size=30), st.integers(0, 1 << 40))
def test_a_scan_without_values_keeps_positions_uuids_and_errors(body, base):
    """What a state-only pass (herald.spark.slices) sequences by is unchanged."""
    buf = b"".join(body)
    full, consumed = scan_ndjson(buf, base, FRAMING)
    bare, bare_consumed = scan_ndjson(buf, base, FRAMING, values=False)
    assert bare_consumed == consumed and len(bare) == len(full) and len(bare.errors) == len(full.errors)
    assert (bare.begins == full.begins).all() and (bare.ends == full.ends).all()
    assert (bare.uuids == full.uuids).all() and (bare.has_uuid == full.has_uuid).all()
    assert len(bare.values) == 0 and not bare.offsets.any()
