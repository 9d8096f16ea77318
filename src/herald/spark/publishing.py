"""Arrow rows → NDJSON messages for the sink, with no Python object per row.

The sink's per-row path (`Publisher.publish_uncommitted_batch`) frames each body
with `NDJSONFraming.encode`: ~3 µs a message. Here a whole `pa.RecordBatch` is
mapped to journals (``random``: a contiguous run of rows per journal,
`random_runs`; ``modulo`` / ``rendezvous``: FNV-1a of the ``key`` column with
numpy, as `herald.message.mapping` does one key at a time) and framed with Arrow
kernels: ``{"UUID":"<text>",`` + the body after its ``{`` + ``\\n``, each
journal's rows stamped in one append-slot hold, and the framed buffers handed to
the append service uncopied (`AppendSlot.write_owned`). A batch holding
anything the fast path does not frame exactly as ``encode`` would (a null, a body
that is not an object or is empty, a newline, a leading UUID field it cannot
strip) returns None, and the caller takes the per-row path, which frames or
rejects it with the usual error. Runs in executors.
"""

from __future__ import annotations

import binascii
import functools
from concurrent.futures import Future
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from herald.client import Publisher
from herald.message.columnar import fnv1a32_many, uuid_text
from herald.message.framing import NDJSONFraming
from herald.message.mapping import fnv1a32

__all__ = ["publish_bulk"]

_STOP = (1 << 31) - 1  # binary_slice needs an explicit stop (pyarrow 26)
#: Separators of `ndjson_lines`, as byte strings: building Arrow scalars here, at
#: import, would import pandas (pyarrow checks for it, ~0.16 s) into every process
#: that merely unpickles the sink — the driver's planner and commit workers.
_NEWLINE, _NOTHING = b"\n", b""
#: Bytes that may not follow a body's opening brace on the fast path: JSON
#: whitespace and ``}`` (an empty object: ``encode`` writes it differently). A
#: 256-entry table, so the check is one gather (`np.isin` sorted per batch).
_NOT_AFTER_BRACE = np.zeros(256, dtype=bool)
_NOT_AFTER_BRACE[[0x20, 0x09, 0x0D, 0x0A, 0x0B, 0x0C, 0x7D]] = True
#: The UUID text's characters that hold its first 8 bytes (hex, dashes skipped), and all 36.
_SHARED_COLUMNS = np.r_[0:8, 9:13, 14:18]
_ALL_COLUMNS = np.arange(36)


def _buffers(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (n + 1, int64) and data (uint8) of a binary array, zero copy."""
    n = len(array)
    offsets = np.frombuffer(array.buffers()[1], np.int32, n + 1, array.offset * 4).astype(np.int64)
    data_buf = array.buffers()[2]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return offsets, data


def _as_binary(column: pa.Array) -> pa.Array:
    """``column`` as ``binary``: a ``string`` column (what ``format_string`` or a
    cast gives the sink) is reinterpreted in place — same buffers — rather than cast,
    which copies and re-validates every byte (≈0.1 µs a row, a sixth of the framing)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.type == pa.binary():
        return column
    if column.type == pa.string():
        return column.view(pa.binary())
    return column.cast(pa.binary())


def ndjson_tails(values: pa.Array, prefix: bytes) -> pa.Array | None:
    """Each body after its opening brace — and after a leading ``prefix`` UUID
    field it already carries (a journal → journal copy; the sink's `_strip_uuid`)
    — or None if any row is off the fast path."""
    vals = _as_binary(values)
    copied = copied_rows(vals, prefix)
    if copied is None:
        return None
    width = len(prefix) + 38
    tails = pc.binary_slice(vals, 1, _STOP)
    if copied.any():
        bits = pa.py_buffer(np.packbits(copied, bitorder="little"))
        mask = pa.Array.from_buffers(pa.bool_(), len(copied), [None, bits])
        tails = pc.if_else(mask, pc.binary_slice(vals, width, _STOP), tails)
    return tails


def copied_rows(vals: pa.Array, prefix: bytes) -> np.ndarray | None:
    """Which bodies of ``vals`` (binary) begin with a ``prefix`` UUID field to
    strip (a bool each), or None if any row is off the fast path."""
    if vals.null_count or not len(vals):
        return None
    offsets, data = _buffers(vals)
    starts, lengths = offsets[:-1], np.diff(offsets)
    if (lengths < 2).any() or (data[offsets[0]:offsets[-1]] == 0x0A).any() or (data[starts] != 0x7B).any():
        return None
    plen, width = len(prefix), len(prefix) + 38
    leads = np.zeros(len(vals), dtype=bool)  # Begins with the UUID field.
    leads[_starting_with(data, starts, np.flatnonzero(lengths >= plen), prefix)] = True
    copied = leads & (lengths > width)
    at = starts[copied]
    copied[copied] = (data[at + plen + 36] == 0x22) & (data[at + plen + 37] == 0x2C)
    if (leads & ~copied).any():
        return None
    skip = np.where(copied, width, 1)
    if _NOT_AFTER_BRACE[data[starts + skip]].any():
        return None
    return copied


def _starting_with(data: np.ndarray, starts: np.ndarray, rows: np.ndarray, prefix: bytes) -> np.ndarray:
    """Those of ``rows`` whose bytes at ``starts`` begin with ``prefix``: one byte
    position at a time over the rows still matching (a gather each), not an
    n × len(prefix) window copy — most bodies part from the prefix at its second byte."""
    for k, byte in enumerate(prefix):
        if not len(rows):
            break
        rows = rows[data[starts[rows] + k] == byte]
    return rows


def ndjson_framed(prefix: bytes, uuids: np.ndarray, values: pa.Array) -> tuple[memoryview, bytes]:
    """``prefix`` + UUID text + ``",`` + body after its ``{`` + ``\\n`` for every
    row of ``values`` (binary, on the fast path, none carrying a UUID field:
    `copied_rows` all False), joined, as two buffers handed to the append slot.

    One Arrow kernel copies the bodies: each ``{`` replaced by ``\\n`` + the
    first UUID's head, so the result is the lines with their newline in front;
    the rows' UUID text is then put in place (`_uuid_columns`), and the buffer
    sent from its second byte, with a ``\\n`` after. The joining path
    (`ndjson_lines`) copied each body twice (a slice, the join) and built every
    head apart: ≈ 170 → 75 ns a row (issue 15)."""
    n, plen = len(values), len(prefix)
    template = prefix + uuid_text(uuids[:1]).tobytes() + b'",'
    lines = pc.binary_replace_slice(values, 0, 1, b"\n" + template)
    offsets = np.frombuffer(lines.buffers()[1], np.int32, n + 1, lines.offset * 4)
    data = np.frombuffer(memoryview(lines.buffers()[2]), np.uint8)  # a fresh result: writable
    if not data.flags.writeable:  # not so in any pyarrow seen (26): then a copy, never a shared buffer
        data = data.copy()
    columns, text = _uuid_columns(uuids)
    data[(offsets[:-1, None] + (1 + plen + columns)).ravel()] = text.ravel()
    return memoryview(data)[int(offsets[0]) + 1:int(offsets[-1])], _NEWLINE  # type: ignore[arg-type]


def _uuid_columns(uuids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each row's UUID text differs from the first's, and that text (n × k
    uint8): the first 8 bytes' 16 hex digits when the rows share their last 8
    bytes (one producer's, one clock counter: `_heads`), else all 36 characters."""
    if bool((uuids[:, 8:] == uuids[0, 8:]).all()):
        hexed = np.frombuffer(binascii.hexlify(np.ascontiguousarray(uuids[:, :8]).tobytes()), np.uint8)
        return _SHARED_COLUMNS, hexed.reshape(len(uuids), 16)
    return _ALL_COLUMNS, uuid_text(uuids)


def ndjson_lines(prefix: bytes, uuids: np.ndarray, tails: pa.Array) -> memoryview:
    """``prefix`` + UUID text + ``",`` + tail + ``\\n`` for every row, as one
    buffer (a view of the Arrow result: the append slot copies it once)."""
    n, plen = len(tails), len(prefix)
    heads = _heads(prefix, uuids)
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(plen + 38)
    head_array = pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(heads)])
    lines = pc.binary_join_element_wise(head_array, tails, pa.scalar(_NEWLINE, pa.binary()),
                                        pa.scalar(_NOTHING, pa.binary()))
    line_offsets, _ = _buffers(lines)
    return memoryview(lines.buffers()[2]).cast("B")[line_offsets[0]:line_offsets[-1]]  # Arrow's format is "b"


def _heads(prefix: bytes, uuids: np.ndarray) -> np.ndarray:
    """``prefix`` + UUID text + ``",`` of every row (n × (len(prefix) + 38) uint8).
    One call's UUIDs are one producer's with the clock's counter unchanged
    (`PublisherCore.next_uuids` ticks by 160): their last 8 bytes, and so the
    text's last 18 characters, are shared. The rows are then that one head with
    the first 8 bytes' 16 hex digits put in: half the hex work, and no n × 36
    text array (issue 15: ≈ 50 → 25 ns a row). Any other UUIDs take the whole text."""
    n, plen = len(uuids), len(prefix)
    heads = np.empty((n, plen + 38), dtype=np.uint8)
    if n and bool((uuids[:, 8:] == uuids[0, 8:]).all()):
        heads[:] = np.frombuffer(prefix + uuid_text(uuids[:1]).tobytes() + b'",', np.uint8)
        hexed = np.frombuffer(binascii.hexlify(np.ascontiguousarray(uuids[:, :8]).tobytes()), np.uint8)
        hexed = hexed.reshape(n, 16)
        heads[:, plen:plen + 8] = hexed[:, :8]
        heads[:, plen + 9:plen + 13] = hexed[:, 8:12]
        heads[:, plen + 14:plen + 18] = hexed[:, 12:16]
        return heads
    heads[:, :plen] = np.frombuffer(prefix, np.uint8)
    heads[:, plen:plen + 36] = uuid_text(uuids)
    heads[:, plen + 36], heads[:, plen + 37] = 0x22, 0x2C
    return heads


def map_rows(mapping: str, names: list[str], keys: pa.Array | None, n: int,
             rng: np.random.Generator) -> np.ndarray:
    """The index into ``names`` of every row's journal: ``random`` (or no key, or
    a null key) draws from ``rng``; ``modulo`` / ``rendezvous`` hash the key."""
    drawn = rng.integers(0, len(names), n)
    if keys is None or mapping == "random":
        return drawn
    keys = _as_binary(keys)
    offsets, data = _buffers(keys)
    hashes = fnv1a32_many(data, offsets)
    if mapping == "modulo":
        index = (hashes % np.uint32(len(names))).astype(np.int64)
    else:  # rendezvous: the largest hash XOR name hash; the first wins ties.
        name_hashes = np.array([fnv1a32(name.encode()) for name in names], dtype=np.uint32)
        index = np.argmax(hashes[:, None] ^ name_hashes[None, :], axis=1)
    if keys.null_count:
        nulls = np.asarray(keys.is_null())
        index[nulls] = drawn[nulls]
    return index


def publish_bulk(publisher: Publisher, batch: pa.RecordBatch, uuid_field: str, mapping: str,
                 rng: np.random.Generator) -> set[Future[Any]] | None:
    """Publish ``batch`` (``value``, optional ``key``) as CONTINUE_TXN messages,
    one slot hold per journal; None (nothing published) if the per-row path must
    take it: a journal that is not NDJSON with ``uuid_field``, or a row off the
    fast path."""
    names, framings = publisher.partitions()
    if not names or not all(isinstance(f, NDJSONFraming) and f.uuid_field == uuid_field
                            for f in framings.values()):
        return None
    prefix = NDJSONFraming(uuid_field)._prefix
    columns = batch.schema.names
    values = _as_binary(batch.column(columns.index("value")))
    copied = copied_rows(values, prefix)
    if copied is None:
        return None
    keys = batch.column(columns.index("key")) if "key" in columns else None
    if copied.any():  # journal → journal copies: their UUID fields stripped (`ndjson_tails`)
        values, frame = ndjson_tails(values, prefix), _joined
    else:
        frame = ndjson_framed
    if keys is None or mapping == "random":
        groups = random_runs(values, len(names), rng)
    else:
        groups = _by_journal(values, map_rows(mapping, names, keys, len(values), rng), len(names))
    futures: set[Future[Any]] = set()
    for j, rows in groups:
        futures.add(publisher.publish_uncommitted_framed(names[j], len(rows), functools.partial(frame, prefix,
                                                                                                values=rows)))
    return futures


def _joined(prefix: bytes, uuids: np.ndarray, values: pa.Array) -> tuple[memoryview, bytes]:
    """`ndjson_lines` of tails (`ndjson_tails`) in `ndjson_framed`'s shape."""
    return ndjson_lines(prefix, uuids, values), _NOTHING


def random_runs(values: pa.Array, journals: int, rng: np.random.Generator) -> list[tuple[int, pa.Array]]:
    """``mapping=random`` (or no key): the batch cut into one contiguous run of
    rows per journal, as even as they split, the journals in a random order —
    as Kafka's sticky partitioner sends a batch to one random partition. Each
    row still lands on a journal no key decides, and each journal's rows keep
    their order; and the runs are zero-copy slices, where a random journal per
    row cost a sort and a ``take`` copying every body (issue 15)."""
    n = len(values)
    order = rng.permutation(journals)[:min(journals, n)].tolist()
    cuts = np.linspace(0, n, len(order) + 1).astype(np.int64).tolist()
    return [(j, values.slice(cuts[k], cuts[k + 1] - cuts[k])) for k, j in enumerate(order)
            if cuts[k + 1] > cuts[k]]


def _by_journal(tails: pa.Array, index: np.ndarray, journals: int) -> list[tuple[int, pa.Array]]:
    """``tails`` grouped by journal index, each group in row order: one stable
    sort and one ``take``, then zero-copy slices (not a scan and a take per journal)."""
    if journals == 1 or not len(index) or (index == index[0]).all():
        return [(int(index[0]), tails)] if len(index) else []
    order = np.argsort(index, kind="stable").astype(np.int64, copy=False)
    counts = np.bincount(index, minlength=journals)
    grouped, groups, at = tails.take(_int64_array(order)), [], 0
    for j in np.flatnonzero(counts).tolist():
        groups.append((j, grouped.slice(at, int(counts[j]))))
        at += int(counts[j])
    return groups


def _int64_array(values: np.ndarray) -> pa.Array:
    """An int64 numpy array as Arrow, zero copy (masks are built likewise) — not ``pa.array``, whose first
    call in a process imports pandas (pyarrow probes for it): ≈ 0.3 s of a sink
    task's first write in a fresh Python worker, on the job's critical path."""
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])
