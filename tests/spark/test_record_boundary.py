"""`record_boundary`: where a read given an offset inside a record really starts
(the next record's first byte), for line framings and Gazette's fixed framing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herald.message.framing import FIXED_MAGIC
from herald.spark.offsets import record_boundary

NDJSON, CSV, FIXED = "application/x-ndjson", "text/csv", "application/x-protobuf-fixed"


def chunked(data: bytes, at: int, cuts: list[int]) -> list[tuple[int, bytes]]:
    """``data`` (journal bytes from offset ``at``) as chunks cut at ``cuts``."""
    edges = [0, *sorted({c for c in cuts if 0 < c < len(data)}), len(data)]
    return [(at + lo, data[lo:hi]) for lo, hi in zip(edges, edges[1:], strict=False)]


LINES = b'{"n":1}\n{"n":22}\n{"n":333}\n'  # records begin at 0, 8, 17


@pytest.mark.parametrize("offset, boundary", [(8, 8), (9, 17), (16, 17), (17, 17), (18, 27)])
@pytest.mark.parametrize("content_type", [NDJSON, CSV + "; charset=utf-8"])
def test_a_line_record_begins_after_a_newline(offset, boundary, content_type):
    chunks = chunked(LINES[offset - 1:], offset - 1, [])
    assert record_boundary(chunks, offset, content_type) == boundary
    assert record_boundary([(offset - 1, b'{"torn":')], offset, content_type) is None  # no newline yet


@given(st.integers(1, len(LINES) - 1), st.lists(st.integers(1, len(LINES)), max_size=6))
def test_chunking_does_not_change_the_boundary(offset, cuts):
    whole = record_boundary([(offset - 1, LINES[offset - 1:])], offset, NDJSON)
    assert record_boundary(chunked(LINES[offset - 1:], offset - 1, cuts), offset, NDJSON) == whole


def test_a_fixed_frame_begins_at_its_magic_even_split_across_chunks():
    data = b"\x01\x02\x03" + FIXED_MAGIC + b"rest"  # journal offsets 100..; the magic at 103
    for cut in range(1, len(data)):
        assert record_boundary(chunked(data, 100, [cut]), 101, FIXED) == 103
    assert record_boundary([(102, data[2:])], 103, FIXED) == 103  # already at the magic


def test_chunks_that_jumped_past_the_offset_leave_it_as_it_is():
    # Bytes before a fragment were pruned: the reader resumed at the fragment's first byte.
    assert record_boundary([(500, b'"tail"}\n{"n":1}\n')], 500, NDJSON) == 500
    assert record_boundary([(520, b'{"n":1}\n')], 500, NDJSON) == 500
