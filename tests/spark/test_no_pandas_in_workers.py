"""Spark's Python workers never import pandas on Herald's read, stream-read and
sink paths (issue 15): pyarrow's ``pa.array``/``pa.scalar`` import it on first
use (≈0.3 s CPU, up to 1 s wall per fresh worker), and Herald does not need it.

Each case plans on the driver side (this process), pickles the reader or writer
and its partitions as Spark does, and runs the executor side in a fresh
interpreter, which reports its rows and whether pandas got imported."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herald.spark import arrays
from herald.spark.datasource import HeraldDataSource
from herald.testing import Producer, make_journals, wait_persisted

pytestmark = pytest.mark.spark

_WORKER = """
import pickle, sys
import pyarrow as pa
kind, thing, parts, ipc = pickle.loads(sys.stdin.buffer.read())
assert "pandas" not in sys.modules
if kind == "read":
    rows = sum(batch.num_rows for part in parts for batch in thing.read(part))
else:
    commit = thing.write(iter(pa.ipc.open_stream(ipc).read_all().to_batches()))
    rows = commit.rows
print(rows, "pandas" in sys.modules)
"""


def _in_fresh_worker(kind: str, thing: object, parts: list, ipc: bytes = b"") -> tuple[int, bool]:
    """(rows, pandas imported?) of the executor side run in a new interpreter."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _WORKER], input=pickle.dumps((kind, thing, parts, ipc)),
                          capture_output=True, env=env, check=True, timeout=120)
    rows, pandas = done.stdout.decode().split()
    return int(rows), pandas == "True"


def _journal_of_events(broker, client, name: str, persisted: bool) -> str:
    [journal] = make_journals(broker, name, labels={"app": name.replace("/", "-")}, length=2048)
    p = Producer(client)
    for i in range(0, 200, 20):
        p.committed(journal, *[{"messageId": f"m{n % 150}" if n % 7 else None, "n": n, "at": 1.5 * n}
                               for n in range(i, i + 20)])
    if persisted:
        wait_persisted(client, journal, 2)
    return journal


_OPTIONS = {"keyField": "messageId", "jsonFields": "messageId,at", "dedupeKey": "messageId"}


@pytest.mark.parametrize("committed", ["true", "false"])
def test_a_batch_reads_worker_does_not_import_pandas(broker, client, committed):
    journal = _journal_of_events(broker, client, f"nopd/batch-{committed}", persisted=True)
    source = HeraldDataSource({"broker": broker.url, "selector": f"app={journal.replace('/', '-')}",
                               "committed": committed, **_OPTIONS})
    reader = source.reader(None)
    assert _in_fresh_worker("read", reader, reader.partitions()) == (200, False)


def test_a_stream_reads_worker_does_not_import_pandas(broker, client, tmp_path):
    journal = _journal_of_events(broker, client, "nopd/stream", persisted=False)
    source = HeraldDataSource({"broker": broker.url, "selector": "app=nopd-stream",
                               "stateLocation": str(tmp_path / "state"), **_OPTIONS})
    reader = source.streamReader(None)
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert _in_fresh_worker("read", reader, reader.partitions(start, end)) == (200, False)
    assert end[journal] > 0


@pytest.mark.parametrize(("stream", "copied"), [(True, False), (True, True), (False, True)])
def test_a_sinks_worker_does_not_import_pandas(broker, client, tmp_path, stream, copied):
    """Fresh values, and values of a journal → journal copy (their UUID field replaced)."""
    name = f"nopd/sink-{stream}-{copied}"
    make_journals(broker, name, labels={"app": name.replace("/", "-")})
    options = {"broker": broker.url, "selector": f"app={name.replace('/', '-')}",
               "checkpointLocation": str(tmp_path / "ck")}
    source = HeraldDataSource(options)
    writer = source.streamWriter(None, False) if stream else source.writer(None, False)
    head = '{"UUID":"' + str(uuid.uuid1()) + '",' if copied else "{"
    batch = pa.RecordBatch.from_pylist([{"value": f'{head}"n":{n}}}', "key": f"k{n % 5}"} for n in range(50)])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as out:
        out.write_batch(batch)
    assert _in_fresh_worker("write", writer, [], sink.getvalue().to_pybytes()) == (50, False)


# -- the buffer-built arrays equal pyarrow's own conversions (herald.spark.arrays) ------------

_NUMBERS = st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=70)


@settings(deadline=None)  # the first pa.array here imports pandas (the point of this module)
@given(_NUMBERS, st.data())
def test_numbers_equal_pa_array_with_its_mask(values, data):
    valid = np.array(data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values))), dtype=bool)
    for mask in (None, valid):
        built = arrays.numbers(values, pa.int64(), np.int64, mask)
        expected = pa.array(np.array(values, dtype=np.int64), pa.int64(), mask=None if mask is None else ~mask)
        built.validate(full=True)
        assert built.equals(expected) and built.null_count == expected.null_count


@settings(deadline=None)  # the first pa.array here imports pandas (the point of this module)
@given(st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=70))
def test_strings_equal_pa_array(values):
    built = arrays.strings(values)
    built.validate(full=True)
    assert built.equals(pa.array(values, pa.string())) and built.to_pylist() == values


@settings(deadline=None)  # the first pa.array here imports pandas (the point of this module)
@given(st.lists(st.binary(max_size=12), max_size=70), st.sampled_from([b"", b"\n", b":"]))
def test_binaries_and_scalars_equal_pa_array_and_pa_scalar(values, literal):
    built = arrays.binaries(values)
    built.validate(full=True)
    assert built.equals(pa.array(values, pa.binary()))
    assert arrays.binary_scalar(literal).equals(pa.scalar(literal, pa.binary()))
