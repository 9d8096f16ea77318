"""Framings: encode places the UUID, feed-style decoders find it again (§1.5)."""

import csv
import io

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from herald.message.framing import (
    FIXED_MAGIC,
    CSVFraming,
    FixedFraming,
    Frame,
    FramingError,
    NDJSONFraming,
    framing_for,
)
from herald.message.uuid import ACK_TXN, build_uuid, uuid_str

U1 = build_uuid(bytes.fromhex("0102030405f6"), 0x1234567 << 4, 1)
U2 = build_uuid(bytes.fromhex("0102030405f6"), 0x1234568 << 4, ACK_TXN)


def feed_all(framing, data: bytes, chunk: int, start: int = 0):
    """Feed ``data`` in ``chunk``-byte pieces; return events and the decoder."""
    dec = framing.decoder()
    events = []
    for i in range(0, len(data), chunk):
        events += dec.feed(data[i : i + chunk], start + i)
    return events, dec


# ---------------------------------------------------------------- NDJSON


def test_ndjson_encode_splices_uuid_as_first_field():
    line = NDJSONFraming().encode(b'{"a":1,"b":[2]}', U1)
    assert line == b'{"UUID":"' + uuid_str(U1).encode() + b'","a":1,"b":[2]}\n'
    assert orjson.loads(line) == {"UUID": uuid_str(U1), "a": 1, "b": [2]}


def test_ndjson_encode_of_dict_replaces_existing_uuid_field():
    line = NDJSONFraming().encode({"UUID": "stale", "x": "y"}, U1)
    assert orjson.loads(line) == {"UUID": uuid_str(U1), "x": "y"}


def test_ndjson_ack_is_just_the_uuid_field():
    f = NDJSONFraming()
    assert f.encode(f.ack_body(), U2) == b'{"UUID":"' + uuid_str(U2).encode() + b'"}\n'
    assert orjson.loads(f.encode(b"{ }", U2)) == {"UUID": uuid_str(U2)}


def test_ndjson_custom_field_name_is_json_escaped():
    f = NDJSONFraming(uuid_field='id"x')
    line = f.encode(b'{"n":1}', U1)
    assert orjson.loads(line) == {'id"x': uuid_str(U1), "n": 1}
    [frame] = f.decoder().feed(line, 0)
    assert frame.uuid == U1


@pytest.mark.parametrize("body", [b"[1,2]", b"", b'{"a":\n1}', b"123"])
def test_ndjson_encode_rejects_non_objects_and_embedded_newlines(body):
    with pytest.raises(ValueError, match="body"):
        NDJSONFraming().encode(body, U1)


def test_ndjson_decode_fast_and_slow_paths_and_missing_uuid():
    f = NDJSONFraming()
    data = (
        f.encode(b'{"n":1}', U1)
        + b'{"n":2,"UUID":"' + uuid_str(U2).upper().encode() + b'"}\n'  # Not first: slow path.
        + b'{"n":3}\n'  # No UUID field: committed as is.
        + b"not json\n"  # Not a message: a framing error, as in Gazette.
        + b'{"UUID":null}\n'
    )
    events, dec = feed_all(f, data, len(data))
    assert isinstance(events[3], FramingError) and "not valid JSON" in str(events[3])
    assert [getattr(e, "uuid", "error") for e in events] == [U1, U2, None, "error", None]
    assert events[0] == Frame(0, events[0].end, U1, data[: events[0].end - 1])
    assert all(a.end == b.begin for a, b in zip(events, events[1:]))
    assert events[-1].end == len(data) and dec.buffered == 0
    dec.end()


def test_ndjson_bad_uuid_value_is_an_error_event_naming_the_offset():
    f = NDJSONFraming()
    good = f.encode(b"{}", U1)
    events = f.decoder().feed(good + b'{"UUID":"nope"}\n' + good, 100)
    assert isinstance(events[1], FramingError)
    assert events[1].offset == 100 + len(good) and events[1].skipped == 16
    assert "offset" in str(events[1]) and "UUID" in str(events[1])
    assert [e.uuid for e in (events[0], events[2])] == [U1, U1]


def test_ndjson_encode_of_unserialisable_dict_is_a_value_error():
    with pytest.raises(ValueError, match="body"):
        NDJSONFraming().encode({"n": 2**70}, U1)


def test_ndjson_invalid_utf8_line_has_no_uuid():
    [frame] = NDJSONFraming().decoder().feed(b'{"a":"\xff"}\n', 0)
    assert frame.uuid is None


_ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(st.lists(st.dictionaries(st.text(max_size=5), _ints | st.text(max_size=8), max_size=4), max_size=8),
       st.integers(min_value=1, max_value=50), st.integers(min_value=0, max_value=10**12))
def test_ndjson_chunked_feed_yields_every_message_at_its_offsets(bodies, chunk, start):
    f = NDJSONFraming()
    lines = [f.encode(b, build_uuid(b"\x01" * 6, (i + 1) << 4, 1)) for i, b in enumerate(bodies)]
    events, dec = feed_all(f, b"".join(lines), chunk, start)
    assert [e.value + b"\n" for e in events] == lines
    assert [e.uuid for e in events] == [
        build_uuid(b"\x01" * 6, (i + 1) << 4, 1) for i in range(len(bodies))
    ]
    offset = start
    for e, line in zip(events, lines):
        assert (e.begin, e.end) == (offset, offset + len(line))
        offset += len(line)
    dec.end()


def test_decoder_end_raises_on_partial_tail_and_feed_checks_continuity():
    dec = NDJSONFraming().decoder()
    assert dec.feed(b'{"a":1', 10) == []
    with pytest.raises(FramingError, match="offset 10"):
        dec.end()
    with pytest.raises(FramingError, match="expected offset 16"):
        dec.feed(b"}\n", 99)
    [frame] = dec.feed(b"}\n", 16)
    assert (frame.begin, frame.end, frame.value) == (10, 18, b'{"a":1}')


# ---------------------------------------------------------------- CSV


def test_csv_round_trip_with_quotes_commas_and_newlines():
    f = CSVFraming()
    rows = [["plain", "x"], ['has "quotes"', "a,b"], ["multi\nline", ""]]
    data = b"".join(f.encode(r, U1 if i % 2 == 0 else U2) for i, r in enumerate(rows))
    for chunk in (1, 3, len(data)):
        events, dec = feed_all(f, data, chunk)
        assert [e.uuid for e in events] == [U1, U2, U1]
        parsed = [next(csv.reader(io.StringIO(e.value.decode()))) for e in events]
        assert [p[1:] for p in parsed] == rows
        assert events[-1].end == len(data)
        dec.end()


def test_csv_uuid_column_is_configurable_and_ack_pads_to_it():
    f = CSVFraming(uuid_column=2)
    assert f.encode(["a", "b", "c"], U1) == b"a,b," + uuid_str(U1).encode() + b",c\n"
    ack = f.encode(f.ack_body(), U2)
    assert ack == b",," + uuid_str(U2).encode() + b"\n"
    [frame] = f.decoder().feed(ack, 0)
    assert frame.uuid == U2


def test_csv_header_and_empty_uuid_fields():
    events = CSVFraming().decoder().feed(b"UUID,name\n,anonymous\n", 0)
    assert isinstance(events[0], FramingError) and events[0].offset == 0
    assert events[1] == Frame(10, 21, None, b",anonymous")


def test_framing_for_picks_by_content_type():
    assert isinstance(framing_for("application/x-ndjson; charset=utf-8"), NDJSONFraming)
    assert framing_for("application/x-ndjson", uuid_field="id").uuid_field == "id"
    assert isinstance(framing_for("text/csv"), CSVFraming)
    assert isinstance(framing_for("application/x-protobuf-fixed"), FixedFraming)
    with pytest.raises(ValueError, match="content-type"):
        framing_for("application/json")


# ---------------------------------------------------------------- fixed


def test_fixed_layout_is_magic_length_uuid_payload():
    frame = FixedFraming().encode(b"proto", U1)
    assert frame[:4] == FIXED_MAGIC == bytes([0x66, 0x33, 0x93, 0x36])
    assert int.from_bytes(frame[4:8], "little") == 16 + 5
    assert frame[8:24] == U1 and frame[24:] == b"proto"


@given(st.lists(st.binary(max_size=40), max_size=6), st.integers(min_value=1, max_value=30))
def test_fixed_chunked_feed_round_trips(payloads, chunk):
    f = FixedFraming()
    data = b"".join(f.encode(p, U1) for p in payloads)
    events, dec = feed_all(f, data, chunk)
    assert [(e.uuid, e.value) for e in events] == [(U1, p) for p in payloads]
    dec.end()


def test_fixed_bad_magic_skips_to_next_frame_and_reports_skipped_bytes():
    f = FixedFraming()
    good = f.encode(b"x", U1)
    data = good + b"garbage!" + good + f.encode(f.ack_body(), U2)
    events = f.decoder().feed(data, 1000)
    assert [type(e).__name__ for e in events] == ["Frame", "FramingError", "Frame", "Frame"]
    err = events[1]
    assert (err.offset, err.skipped) == (1000 + len(good), 8)
    assert "de-synchronization" in str(err) and str(1000 + len(good)) in str(err)
    assert events[2].begin == 1000 + len(good) + 8
    assert (events[3].uuid, events[3].value) == (U2, b"")


def test_fixed_desync_without_magic_keeps_a_possible_partial_magic():
    f = FixedFraming()
    dec = f.decoder()
    good = f.encode(b"y", U1)
    events = dec.feed(b"\x00" * 10 + good[:2], 0)
    assert [(e.offset, e.skipped) for e in events] == [(0, 9)]
    events = dec.feed(good[2:], 12)
    assert [type(e).__name__ for e in events] == ["FramingError", "Frame"]
    assert events[1] == Frame(10, 10 + len(good), U1, b"y")


def test_fixed_end_tolerates_one_trailing_newline_only():
    dec = FixedFraming().decoder()
    dec.feed(b"\n", 0)
    dec.end()
    dec.feed(b"\x66\x33", 1)
    with pytest.raises(FramingError):
        dec.end()


@pytest.mark.parametrize("line", [b"not json", b"[1, 2]", b'"a string"', b"", b"{broken"])
def test_an_ndjson_line_that_is_not_a_json_object_is_a_framing_error_never_a_message(line):
    data = NDJSONFraming().encode(b'{"n":1}', U1) + line + b"\n"
    events, _ = feed_all(NDJSONFraming(), data, len(data))
    assert isinstance(events[0], Frame) and isinstance(events[1], FramingError)
    assert (events[1].offset, events[1].end) == (events[0].end, len(data))


@pytest.mark.parametrize("cut, junk", [(-2, b""), (-6, b""), (-1, b","), (-1, b" garbage"), (46, b"x}")])
def test_a_torn_ndjson_line_with_a_sound_uuid_field_is_a_framing_error(cut, junk):
    # The fast path reads the UUID without parsing: it must still refuse a line that
    # does not end the object, or has junk right after the UUID.
    good = NDJSONFraming().encode(b'{"n":1}', U1)
    torn = good[:cut] + junk + b"\n"
    events, _ = feed_all(NDJSONFraming(), good + torn + good, 1 << 10)
    assert [type(e).__name__ for e in events] == ["Frame", "FramingError", "Frame"]
    assert (events[1].offset, events[1].end) == (len(good), len(good) + len(torn))


def test_a_csv_record_with_another_field_count_is_a_framing_error_but_acks_are_not():
    f = CSVFraming()
    data = f.encode(["a", "b"], U1) + f.encode(["c"], U2) + f.encode(f.ack_body(), U1) + f.encode(["d", "e"], U2)
    events, _ = feed_all(f, data, len(data))
    assert [type(e).__name__ for e in events] == ["Frame", "FramingError", "Frame", "Frame"]
    assert "2 fields, want 3" in str(events[1])


def test_decode_errors_fail_with_journal_and_offset_or_skip_and_count():
    from herald.message.decode_errors import DecodeErrors, MessageDecodeError, OnDecodeError

    error = FramingError(42, "not valid JSON", 7)
    with pytest.raises(MessageDecodeError, match="offset 42: journal a/b: not valid JSON") as raised:
        DecodeErrors("a/b").handle(error)
    assert (raised.value.journal, raised.value.offset) == ("a/b", 42)
    counter = DecodeErrors("a/b", OnDecodeError.parse("SKIP"))
    assert counter.statistics().skipped == 0 and counter.statistics().first_offset == -1
    counter.handle(error)
    counter.handle(FramingError(99, "not valid JSON", 3))
    stats = counter.statistics()
    assert counter.skipped == stats.skipped == 2
    assert (stats.journal, stats.policy, stats.first_offset, stats.last_offset) == ("a/b", OnDecodeError.SKIP, 42, 99)
