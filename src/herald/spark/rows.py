"""Messages → Arrow record batches with the ``herald`` schema, vectorised.

Per-message Python work is the cost of a Python data source (spark-facts:
~0.7 M rows/s as tuples, several M/s as Arrow), so a task only collects
``(begin, end, uuid16, value)`` per message; UUID text, producer, clock, flags
and timestamp are computed for the whole batch with numpy over the packed
16-byte UUIDs, and the UUID/producer strings are built straight into Arrow
buffers.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from herald.message.columnar import Columns
from herald.message.uuid import GREGORIAN_OFFSET_100NS
from herald.spark.blocks import NATIVE

__all__ = ["ARROW_SCHEMA", "SPARK_SCHEMA", "RowBuffer", "columns_batch", "select_rows", "subset_schema"]

SPARK_SCHEMA = (
    "journal string, begin long, end long, uuid string, producer string, "
    "clock long, flags int, timestamp timestamp, value binary"
)
ARROW_SCHEMA = pa.schema([
    ("journal", pa.string()),
    ("begin", pa.int64()),
    ("end", pa.int64()),
    ("uuid", pa.string()),
    ("producer", pa.string()),
    ("clock", pa.int64()),
    ("flags", pa.int32()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("value", pa.binary()),
])
_UUID_COLUMNS = ("uuid", "producer", "clock", "flags", "timestamp")
_NUMBERS = frozenset(("clock", "flags", "timestamp"))
_TIMESTAMP = pa.timestamp("us", tz="UTC")
_ZERO = bytes(16)
_UUID_DTYPE = np.dtype([("low", ">u4"), ("mid", ">u2"), ("hi", ">u2"), ("seq", ">u2"), ("producer", "V6")])


def _fixed_strings(chars: np.ndarray, valid: np.ndarray) -> pa.Array:
    """An Arrow string array of equal-width ASCII rows (``chars``: n × width uint8),
    over ``chars``' own memory (made contiguous if it is not)."""
    n, width = chars.shape
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    mask = None if valid.all() else pa.array(valid).buffers()[1]
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(chars)), mask,
                                       null_count=int(n - valid.sum()))


def subset_schema(columns: frozenset[str] | None) -> pa.Schema:
    """`ARROW_SCHEMA`'s fields named in ``columns`` (all of them for None), in its order."""
    return ARROW_SCHEMA if columns is None else pa.schema([f for f in ARROW_SCHEMA if f.name in columns])


def _uuid_columns(uuids: list[bytes | None], schema: pa.Schema) -> dict[str, pa.Array]:
    if not any(name in schema.names for name in _UUID_COLUMNS):
        return {}
    n = len(uuids)
    valid = np.fromiter((u is not None for u in uuids), dtype=bool, count=n)
    return _packed_uuid_columns(b"".join(_ZERO if u is None else u for u in uuids), valid, None, schema)


def _packed_uuid_columns(packed: bytes | np.ndarray, valid: np.ndarray, text: np.ndarray | None,
                         schema: pa.Schema) -> dict[str, pa.Array]:
    """Those of uuid, producer, clock, flags, timestamp that ``schema`` names, from
    ``n`` packed 16-byte UUIDs (``text``, their n × 36 text, if the caller has it
    already). The text is built only for uuid or producer (issue 15: a query that
    asks for neither pays for neither, here or in the JVM). In C where it is built."""
    if NATIVE is not None:
        return native_uuid_columns(packed, valid, schema.names)
    return numpy_uuid_columns(packed, valid, text, schema.names)


def numpy_uuid_columns(packed: bytes | np.ndarray, valid: np.ndarray, text: np.ndarray | None,
                       names: list[str]) -> dict[str, pa.Array]:
    """`_packed_uuid_columns` with numpy (no C extension built; the definition
    `native_uuid_columns` is tested against)."""
    n = len(valid)
    packed = packed if isinstance(packed, bytes) else packed.tobytes()
    out: dict[str, pa.Array] = {}
    if text is None and ("uuid" in names or "producer" in names):
        hexed = np.frombuffer(binascii.hexlify(packed), dtype=np.uint8).reshape(n, 32)
        text = np.full((n, 36), ord("-"), dtype=np.uint8)
        text[:, 0:8], text[:, 9:13], text[:, 14:18] = hexed[:, 0:8], hexed[:, 8:12], hexed[:, 12:16]
        text[:, 19:23], text[:, 24:36] = hexed[:, 16:20], hexed[:, 20:32]
    if "uuid" in names:
        assert text is not None
        out["uuid"] = _fixed_strings(text, valid)
    if "producer" in names:
        assert text is not None
        out["producer"] = _fixed_strings(text[:, 24:36], valid)
    if not _NUMBERS & set(names):
        return out
    f = np.frombuffer(packed, dtype=_UUID_DTYPE)
    ts = f["low"].astype(np.uint64) | (f["mid"].astype(np.uint64) << 32) \
        | ((f["hi"].astype(np.uint64) & 0x0FFF) << 48)
    seq = f["seq"].astype(np.uint64)
    clock = (ts << 4) | ((seq >> 10) & 0xF)
    flags = (seq & 0x3FF).astype(np.int32)
    micros = ((ts.astype(np.int64) - GREGORIAN_OFFSET_100NS) // 10)
    mask = None if valid.all() else ~valid
    out["clock"] = pa.array(clock.view(np.int64), pa.int64(), mask=mask)
    out["flags"] = pa.array(flags, pa.int32(), mask=mask)
    out["timestamp"] = pa.array(micros, pa.timestamp("us", tz="UTC"), mask=mask)
    return out


def native_uuid_columns(packed: bytes | np.ndarray, valid: np.ndarray, names: list[str]) -> dict[str, pa.Array]:
    """`_packed_uuid_columns` in C (`herald.spark._scan_native.uuid_columns`: one pass
    over the UUIDs, each column's Arrow buffer written once)."""
    assert NATIVE is not None
    want_text, want_numbers = "uuid" in names or "producer" in names, bool(_NUMBERS & set(names))
    text, producer, clock, flags, micros = NATIVE.uuid_columns(packed, want_text, want_numbers,
                                                               GREGORIAN_OFFSET_100NS)
    n = len(valid)
    nulls = int(n - np.count_nonzero(valid))
    validity = pa.array(valid).buffers()[1] if nulls else None
    built = {"uuid": (pa.string(), 36, text), "producer": (pa.string(), 12, producer), "clock": (pa.int64(), 0, clock),
             "flags": (pa.int32(), 0, flags), "timestamp": (_TIMESTAMP, 0, micros)}
    out: dict[str, pa.Array] = {}
    for name in names:
        if name not in built:
            continue
        kind, width, data = built[name]
        buffers = [validity, pa.py_buffer(data)]
        if width:
            buffers.insert(1, pa.py_buffer(np.arange(0, (n + 1) * width, width, dtype=np.int32)))
        out[name] = pa.Array.from_buffers(kind, n, buffers, null_count=nulls)
    return out


def _batch(schema: pa.Schema, journal: str, n: int, begins: Callable[[], pa.Array], ends: Callable[[], pa.Array],
           uuids: Callable[[], dict[str, pa.Array]], values: Callable[[], pa.Array]) -> pa.RecordBatch:
    """The batch of ``schema``'s columns, each built only if named."""
    names = schema.names
    columns = {"journal": (lambda: _repeated(journal, n)) if "journal" in names else None,
               "begin": begins if "begin" in names else None, "end": ends if "end" in names else None,
               "value": values if "value" in names else None}
    built = {name: make() for name, make in columns.items() if make is not None}
    built.update(uuids())
    return pa.RecordBatch.from_arrays([built[name] for name in names], schema=schema)


class RowBuffer:
    """Collects messages of one journal and yields `pa.RecordBatch` es of
    ``batch_rows`` rows (`subset_schema` of ``columns``: Herald's columns the read asks for)."""

    __slots__ = ("journal", "batch_rows", "begins", "ends", "uuids", "values", "schema")

    def __init__(self, journal: str, batch_rows: int = 65536, columns: frozenset[str] | None = None) -> None:
        self.journal, self.batch_rows = journal, batch_rows
        self.schema = subset_schema(columns)
        self.begins: list[int] = []
        self.ends: list[int] = []
        self.uuids: list[bytes | None] = []
        self.values: list[bytes] = []

    def add(self, begin: int, end: int, uuid: bytes | None, value: bytes) -> pa.RecordBatch | None:
        """Buffer one message; returns a full batch when one is ready."""
        self.begins.append(begin)
        self.ends.append(end)
        self.uuids.append(uuid)
        self.values.append(value)
        return self.flush() if len(self.begins) >= self.batch_rows else None

    def __len__(self) -> int:
        return len(self.begins)

    def flush(self) -> pa.RecordBatch | None:
        """The buffered rows as one batch (None if empty); clears the buffer."""
        n = len(self.begins)
        if not n:
            return None
        begins, ends, uuids, values = self.begins, self.ends, self.uuids, self.values
        self.begins, self.ends, self.uuids, self.values = [], [], [], []
        return _batch(self.schema, self.journal, n, lambda: pa.array(begins, pa.int64()),
                      lambda: pa.array(ends, pa.int64()), lambda: _uuid_columns(uuids, self.schema),
                      lambda: pa.array(values, pa.binary()))


def _repeated(text: str, n: int) -> pa.Array:
    """``n`` copies of ``text`` as a string array, built from its buffers."""
    data = text.encode()
    offsets = np.arange(n + 1, dtype=np.int64) * len(data)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data * n))


def columns_batch(journal: str, cols: Columns, columns: frozenset[str] | None = None) -> pa.RecordBatch:
    """A record batch straight from `herald.message.columnar.Columns` (no per-row
    work), of Herald's ``columns`` (all for None: `subset_schema`)."""
    n, schema = len(cols), subset_schema(columns)
    has_uuid = any(name in schema.names for name in _UUID_COLUMNS)
    return _batch(schema, journal, n, lambda: pa.array(cols.begins, pa.int64()),
                  lambda: pa.array(cols.ends, pa.int64()),
                  lambda: _packed_uuid_columns(np.ascontiguousarray(cols.uuids), cols.has_uuid, cols.text,
                                               schema) if has_uuid else {},
                  lambda: pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(cols.offsets),
                                                                       pa.py_buffer(cols.values)]))


def select_rows(batch: pa.RecordBatch, rows: np.ndarray) -> pa.RecordBatch:
    """``rows`` of ``batch``, in that order (the batch itself if that is all of it)."""
    if len(rows) == batch.num_rows and bool((np.diff(rows) > 0).all()):
        return batch
    return batch.take(pa.array(rows, pa.int64()))
