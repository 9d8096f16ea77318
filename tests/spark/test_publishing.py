"""The sink's bulk framing and mapping equal the per-row path (no Spark needed)."""

from __future__ import annotations

import os

import numpy as np
import orjson
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from herald.message import NDJSONFraming, PublisherCore, build_uuid, modulo_mapping, rendezvous_mapping
from herald.message.columnar import fnv1a32_many
from herald.message.mapping import fnv1a32
from herald.message.uuid import CONTINUE_TXN, Clock
from herald.spark.publishing import (
    _as_binary,
    _buffers,
    _by_journal,
    copied_rows,
    map_rows,
    ndjson_framed,
    ndjson_lines,
    ndjson_tails,
    random_runs,
)
from herald.spark.sink_tasks import _strip_uuid

FRAMING = NDJSONFraming()
PREFIX = FRAMING._prefix
UUID_TEXT = "1f0c8e2a-7b3d-11ef-8000-0102030405a6"

bodies = st.one_of(
    st.dictionaries(st.text(max_size=5), st.one_of(st.integers(-1000, 1000), st.text(max_size=8)), max_size=3).map(orjson.dumps),
    st.builds(lambda d: b'{"UUID":"%s",' % UUID_TEXT.encode() + orjson.dumps(d)[1:],
              st.dictionaries(st.text(max_size=4), st.integers(0, 99), min_size=1, max_size=2)),
    st.sampled_from([b"{}", b"{ }", b'{"UUID":"%s"}' % UUID_TEXT.encode(), b'{"a":1}\n', b'{"a":\n1}',
                     b"[1]", b"", b'{"UUID":"short"}', b'{"UUID":"%s"' % UUID_TEXT.encode()]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(bodies, min_size=1, max_size=12), st.booleans(), st.booleans())
def test_bulk_framing_equals_encode_or_declines(values, as_text, one_producer):
    array = pa.array([v.decode("utf-8", "replace") for v in values]) if as_text else pa.array(values, pa.binary())
    if as_text:
        values = [v.decode("utf-8", "replace").encode() for v in values]
    tails = ndjson_tails(array, PREFIX)
    if tails is None:
        return  # The per-row path takes this batch (and frames or rejects it).
    if one_producer:  # as the sink stamps them: the UUIDs' last 8 bytes shared (their text's tail too)
        uuids = PublisherCore(os.urandom(6), Clock(1 << 60)).next_uuids(len(values), CONTINUE_TXN)
    else:
        uuids = np.frombuffer(b"".join(build_uuid(os.urandom(6), 1 << 60 | i << 4, 1) for i in range(len(values))),
                              np.uint8).reshape(-1, 16)
    want = b"".join(FRAMING.encode(_strip_uuid(PREFIX, v), u.tobytes()) for v, u in zip(values, uuids))
    assert ndjson_lines(PREFIX, uuids, tails) == want
    copied = copied_rows(_as_binary(array), PREFIX)
    assert copied is not None
    if not copied.any():  # bodies without a UUID field: framed in one copy, from a slice too
        assert b"".join(ndjson_framed(PREFIX, uuids, _as_binary(array))) == want
        if len(values) > 1:
            framed = ndjson_framed(PREFIX, uuids[1:], _as_binary(array).slice(1))
            assert b"".join(framed) == want[len(FRAMING.encode(values[0], uuids[0].tobytes())):]


def test_ordinary_objects_and_copies_take_the_bulk_path():
    copy = b'{"UUID":"%s","a":1}' % UUID_TEXT.encode()
    assert ndjson_tails(pa.array([b'{"a":1}', copy], pa.binary()), PREFIX) is not None
    assert ndjson_tails(pa.array([b'{"a":1}', None], pa.binary()), PREFIX) is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=40)), min_size=1, max_size=30), st.integers(1, 7))
def test_bulk_mapping_equals_the_mappings(keys, journals):
    names = [f"out/{i:03d}" for i in range(journals)]
    array = pa.array(keys, pa.binary())
    for mapping, one in (("modulo", modulo_mapping), ("rendezvous", rendezvous_mapping)):
        index = map_rows(mapping, names, array, len(keys), np.random.default_rng(1))
        for key, i in zip(keys, index.tolist()):
            if key is not None:
                assert names[i] == one(key, names)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=30), st.integers(0, 40), st.integers(0, 3))
def test_key_hashes_of_one_length_and_of_mixed_lengths_equal_fnv1a32(keys, width, skip):
    """Keys all of one length take the matrix path; mixed ones the shortest-first
    passes. A slice starts its keys past the buffer's first byte."""
    for batch in ([k[:width].ljust(width, b"x") for k in keys], [k + b"x" * width for k in keys]):
        array = pa.array(batch, pa.binary()).slice(min(skip, len(batch) - 1))
        offsets, data = _buffers(array)
        assert fnv1a32_many(data, offsets).tolist() == [fnv1a32(k) for k in array.to_pylist()]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=40), st.integers(5, 7))
def test_rows_grouped_by_journal_keep_row_order_and_lose_nothing(index, journals):
    rows = pa.array([b"row-%d" % i for i in range(len(index))], pa.binary())
    groups = _by_journal(rows, np.array(index, dtype=np.int64), journals)
    assert [j for j, _ in groups] == sorted(set(index))
    for j, group in groups:
        assert group.to_pylist() == [b"row-%d" % i for i, k in enumerate(index) if k == j]


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 40), st.integers(1, 7), st.integers(0, 2**32))
def test_random_runs_cover_every_row_once_in_order(rows, journals, seed):
    """``mapping=random``: contiguous runs, one per journal at most, all rows in order."""
    values = pa.array([b"row-%d" % i for i in range(rows)], pa.binary())
    runs = random_runs(values, journals, np.random.default_rng(seed))
    assert b"".join(b"".join(run.to_pylist()) for _, run in runs) == b"".join(values.to_pylist())
    assert len({j for j, _ in runs}) == len(runs) == min(rows, journals)
    assert all(0 <= j < journals and len(run) >= rows // journals for j, run in runs)


def test_a_string_column_is_framed_from_its_own_buffers():
    values = pa.array(['{"a":1}', '{"b":"é"}'])  # string, as format_string gives the sink
    tails = ndjson_tails(values, PREFIX)
    assert tails is not None and tails.type == pa.binary()
    assert tails.to_pylist() == [b'"a":1}', '"b":"é"}'.encode()]


def test_the_bulk_path_never_imports_pandas():
    """``pa.array`` imports pandas on its first call (≈ 0.3 s in a sink task's
    fresh Python worker); the bulk path builds its Arrow arrays from buffers."""
    import subprocess
    import sys

    code = """if True:
        import sys, numpy as np, pyarrow as pa
        from herald.spark.publishing import _by_journal, ndjson_tails
        bodies = [b'{"a":1}', b'{"UUID":"%s","b":2}' % b"1f0c8e2a-7b3d-11ef-8000-0102030405a6", b'{"c":3}']
        offsets = np.cumsum([0] + [len(b) for b in bodies]).astype(np.int32)
        values = pa.Array.from_buffers(pa.binary(), 3, [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(bodies))])
        tails = ndjson_tails(values, b'{"UUID":"')
        groups = _by_journal(tails, np.array([1, 0, 1]), 2)
        assert [g.to_pylist() for _, g in groups] == [[b'"b":2}'], [b'"a":1}', b'"c":3}']], groups
        from herald.spark.publishing import ndjson_framed, random_runs
        (_, run), = random_runs(values.slice(2), 2, np.random.default_rng(1))
        framed = b"".join(ndjson_framed(b'{"UUID":"', np.zeros((1, 16), np.uint8), run))
        assert framed == b'{"UUID":"00000000-0000-0000-0000-000000000000","c":3}\\n', framed
        print("pandas" in sys.modules)
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    assert out.stdout.strip() == "False"
