"""Pure parts of the client: offload slicing, read heads, keyed records (property tests)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herald.cli.journals import keyed_records
from herald.client import slice_chunks
from herald.client.models import ReadHead
from herald.protocol.errors import ValidationError


@given(st.binary(max_size=300), st.lists(st.integers(1, 50), max_size=30), st.data())
def test_slice_of_any_chunking_is_the_offset_range(content, cuts, data):
    begin = data.draw(st.integers(0, 1000))
    offset = data.draw(st.integers(begin, begin + len(content)))
    limit = data.draw(st.integers(offset, begin + len(content)))
    chunks, pos = [], 0
    for cut in cuts:
        chunks.append(content[pos:pos + cut])
        pos += cut
    chunks.append(content[pos:])
    pieces = list(slice_chunks(iter(chunks), begin, offset, limit))
    assert b"".join(p for _, p in pieces) == content[offset - begin:limit - begin]
    at = offset
    for start, piece in pieces:  # offsets are contiguous.
        assert start == at and piece
        at += len(piece)


def test_read_head_takes_the_start_from_content_range():
    head = ReadHead.from_headers({"Content-Range": "bytes 120-9223372036854775807/9223372036854775807",
                                  "X-Write-Head": "300", "X-Fragment-Name": "f"}, 100)
    assert (head.offset, head.write_head, head.fragment_name, head.fragment_location) == (120, 300, "f", None)
    assert ReadHead.from_headers({}, 7).offset == 7


@given(st.lists(st.tuples(st.binary(min_size=1).filter(lambda b: not set(b) & set(b"\r\n")),
                          st.binary().filter(lambda b: b"\n" not in b)), max_size=20))
def test_keyed_records_pair_each_key_line_with_the_next_line(pairs):
    lines = [line for key, record in pairs for line in (key + b"\n", record + b"\n")]
    assert list(keyed_records(iter(lines))) == [(key, record + b"\n") for key, record in pairs]


def test_a_trailing_key_without_record_is_an_error():
    with pytest.raises(ValidationError):
        list(keyed_records(iter([b"k\n"])))
