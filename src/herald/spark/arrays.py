"""Arrow arrays and scalars built from their buffers, never through ``pa.array``.

pyarrow's conversion of Python or numpy values (``pa.array``, ``pa.scalar``, and a
compute function given a Python literal) first checks whether the value is a
pandas object, which imports pandas when it is installed: 0.3 s of CPU and up to
1 s of wall in each fresh Spark Python worker's first batch (issue 15), though
nothing here uses pandas. ``pa.Array.from_buffers`` over numpy-made offsets,
values and validity bitmaps builds the same arrays without that check.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

__all__ = ["binaries", "binary_scalar", "numbers", "strings", "validity"]

_INT32_MAX = (1 << 31) - 1


def validity(valid: np.ndarray) -> pa.Buffer | None:
    """Arrow's validity bitmap of a boolean array (LSB first), None when all are valid."""
    return None if bool(valid.all()) else pa.py_buffer(np.packbits(valid, bitorder="little"))


def numbers(values: np.ndarray | Sequence[int], kind: pa.DataType, dtype: type | np.dtype,
            valid: np.ndarray | None = None) -> pa.Array:
    """A fixed-width array of ``kind`` over ``values`` as ``dtype`` (zero copy when
    already so), null where ``valid`` is False."""
    data = np.ascontiguousarray(values, dtype=dtype)
    bitmap = None if valid is None else validity(valid)
    nulls = 0 if bitmap is None or valid is None else int(len(valid) - np.count_nonzero(valid))
    return pa.Array.from_buffers(kind, len(data), [bitmap, pa.py_buffer(data)], null_count=nulls)


def binaries(values: Sequence[bytes], kind: pa.DataType = pa.binary(), valid: np.ndarray | None = None) -> pa.Array:
    """A binary (or, for ``kind`` string, UTF-8 string) array of ``values``, null
    where ``valid`` is False (those values must be empty)."""
    n = len(values)
    data = b"".join(values)
    if len(data) > _INT32_MAX:  # beyond 32-bit offsets: as pa.array would fail or chunk, let it
        return pa.array(values if valid is None else [v if ok else None for v, ok in zip(values, valid, strict=True)],
                        kind)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.fromiter(map(len, values), dtype=np.int32, count=n), out=offsets[1:])
    bitmap = None if valid is None else validity(valid)
    nulls = 0 if bitmap is None or valid is None else int(n - np.count_nonzero(valid))
    return pa.Array.from_buffers(kind, n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)


def strings(values: Sequence[str | None]) -> pa.Array:
    """A string array of ``values`` (None: null), as ``pa.array(values, pa.string())``."""
    valid = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    encoded = [b"" if v is None else v.encode() for v in values]
    return binaries(encoded, pa.string(), valid)


def binary_scalar(value: bytes, kind: pa.DataType = pa.binary()) -> pa.Scalar:
    """``pa.scalar(value, kind)``, for compute functions' literal arguments."""
    return binaries([value], kind)[0]
