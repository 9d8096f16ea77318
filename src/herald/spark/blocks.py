"""NDJSON bytes → `Columns` a block at a time: the scan of Spark's reads.

A task feeds a `BlockScanner` the ``(offset, bytes)`` chunks it reads (decoded
fragment content, or the broker's) and gets back the complete lines of each
block of about `SCAN_BLOCK_BYTES` as `herald.message.columnar.Columns`: journal
offsets, UUIDs and values in Arrow's layouts, no Python object per message.

`scan_parts` does the scan in C where the optional extension
`herald.spark._scan_native` is built (one pass per line, the GIL dropped, the
block's chunks scanned where they lie instead of joined first) and with numpy
(`herald.message.columnar.scan_ndjson`) where it is not; the two give the same
columns (tests/spark/test_blocks.py). Lines off the fast path (no UUID first, a
malformed one, odd spacing) go through the per-line decoder's rules either way.

    scanner = BlockScanner(NDJSONFraming(), errors)
    for cols in scanner.scan(chunks):
        ...
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from types import ModuleType

import numpy as np

from herald.message.columnar import Columns, scan_ndjson
from herald.message.decode_errors import DecodeErrors
from herald.message.framing import FramingError, NDJSONFraming

__all__ = ["NATIVE", "SCAN_BLOCK_BYTES", "BlockScanner", "on_decode_error", "scan_parts"]

log = logging.getLogger(__name__)
Part = bytes | bytearray | memoryview
#: The C extension `herald.spark._scan_native`, or None where it is not built.
NATIVE: ModuleType | None
try:
    from herald.spark import _scan_native as _built

    NATIVE = _built
except ImportError:  # not built (setup.py's extensions are optional): numpy
    NATIVE = None

#: Decoded bytes per scanned block (and so per Arrow batch, ~8 k rows of ~250 B).
#: Small enough that the block, its newline scan and its values copy stay in the
#: CPU's cache: 8 MiB blocks cost ~35 % more per row in the scan and Arrow build
#: (issue 15; with `herald.client.offload`'s 256 KiB stored reads).
SCAN_BLOCK_BYTES = 2 << 20


def on_decode_error(errors: DecodeErrors, error: FramingError) -> None:
    """Raise (option ``onDecodeError=fail``, the default) or log and count the skip."""
    errors.handle(error)
    log.warning("journal=%s offset=%d skipped an undecodable message (%d in this task): %s",
                errors.journal, error.offset, errors.skipped, error)


def scan_parts(parts: Sequence[Part], base: int, framing: NDJSONFraming,
               values: bool = True) -> tuple[Columns, int]:
    """`scan_ndjson` over the concatenation of ``parts`` (journal offset ``base``),
    without making it: the columns of its complete lines and the bytes they take.
    With ``values`` False the values are left out (a pass that only sequences)."""
    if NATIVE is None:
        return scan_ndjson(b"".join(parts), base, framing, values)
    consumed, n, begins, ends, uuids, fast, vals, offsets = NATIVE.scan_lines(parts, framing._prefix, base, values)
    cols = Columns(np.frombuffer(begins, np.int64), np.frombuffer(ends, np.int64),
                   np.frombuffer(uuids, np.uint8).reshape(n, 16), np.frombuffer(fast, np.bool_),
                   np.frombuffer(vals, np.uint8), np.frombuffer(offsets, np.int32))
    if not cols.has_uuid.all():  # lines off the fast path: their bytes are in the values, even without values
        cols = _slow_lines(cols, framing)
    return (cols if values else _without_values(cols)), consumed


def _slow_lines(cols: Columns, framing: NDJSONFraming) -> Columns:
    """``cols`` with the per-line rules applied to the lines off the fast path (their
    bytes are in ``cols.values``): a UUID found the slow way, or none, or the line
    dropped and its `FramingError` kept (`herald.message.columnar._slow_uuids`)."""
    decoder, errors = framing.decoder(), []
    keep = np.ones(len(cols), dtype=bool)
    uuids, has_uuid, offsets = cols.uuids, cols.has_uuid.copy(), cols.offsets
    for i in np.flatnonzero(~cols.has_uuid).tolist():
        line = cols.values[offsets[i]:offsets[i + 1]].tobytes()
        found = decoder._slow_uuid(line, int(cols.begins[i]), int(cols.ends[i]))
        if isinstance(found, FramingError):
            keep[i] = False
            errors.append(found)
        elif found is not None:
            uuids[i] = np.frombuffer(found, np.uint8)
            has_uuid[i] = True
    if not errors:
        return Columns(cols.begins, cols.ends, uuids, has_uuid, cols.values, offsets)
    lengths = np.diff(offsets)[keep]
    kept = np.concatenate([cols.values[offsets[i]:offsets[i + 1]] for i in np.flatnonzero(keep).tolist()]
                          or [np.zeros(0, np.uint8)])
    new_offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=new_offsets[1:])
    return Columns(cols.begins[keep], cols.ends[keep], uuids[keep], has_uuid[keep], kept, new_offsets,
                   tuple(errors))


def _without_values(cols: Columns) -> Columns:
    return Columns(cols.begins, cols.ends, cols.uuids, cols.has_uuid, np.zeros(0, dtype=np.uint8),
                   np.zeros(len(cols) + 1, dtype=np.int32), cols.errors)


def _rest(parts: list[Part], used: int) -> list[Part]:
    """What of ``parts`` (in order) lies past their first ``used`` bytes; the part cut
    is copied (a torn line: short), the ones after it kept as they are."""
    for i, part in enumerate(parts):
        size = memoryview(part).nbytes
        if used < size:
            return [bytes(memoryview(part)[used:]), *parts[i + 1:]]
        used -= size
    return []


class BlockScanner:
    """NDJSON bytes → `Columns` a block at a time (`scan_parts`): no Python object
    per message. Fed ``(offset, bytes)`` chunks of contiguous journal bytes
    starting on a message boundary; keeps a torn last line for the next block.
    ``last_end`` is the end of the last complete line scanned. With ``values``
    False, blocks carry no values (a state-only pass)."""

    def __init__(self, framing: NDJSONFraming, errors: DecodeErrors, block_bytes: int = SCAN_BLOCK_BYTES,
                 values: bool = True) -> None:
        self.framing, self.errors, self.block_bytes, self.values = framing, errors, block_bytes, values
        self._parts: list[Part] = []
        self._size, self._base = 0, -1
        self.last_end = -1

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete last line held back."""
        return self._size

    @property
    def buffered_at(self) -> int:
        """Journal offset of the bytes held back."""
        return self._base

    def feed(self, offset: int, chunk: bytes) -> Columns | None:
        """Buffer ``chunk``; a block of complete lines once ``block_bytes`` are held."""
        if self._base < 0:
            self._base = offset
        self._parts.append(chunk)
        self._size += len(chunk)
        return self.flush() if self._size >= self.block_bytes else None

    def flush(self) -> Columns | None:
        """The complete lines held (None if there are none)."""
        if not self._size:
            return None
        cols, used = scan_parts(self._parts, self._base, self.framing, self.values)
        for error in cols.errors:
            on_decode_error(self.errors, error)
        if used:
            self.last_end = self._base + used
        self._parts, self._size, self._base = _rest(self._parts, used), self._size - used, self._base + used
        return cols if len(cols) else None

    def scan(self, chunks: Iterable[tuple[int, bytes]]) -> Iterator[Columns]:
        """Every complete line of ``chunks``, in blocks; the torn rest stays held."""
        for offset, chunk in chunks:
            if (cols := self.feed(offset, chunk)) is not None:
                yield cols
        if (cols := self.flush()) is not None:
            yield cols
