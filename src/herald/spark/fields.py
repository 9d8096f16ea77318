"""Top-level NDJSON fields as string columns of reads (option ``jsonFields``).

A job that needs one or two fields of each event (the dedupe's ``messageId`` and
event time) would otherwise parse every value again in the JVM with
``from_json``: a second full JSON parse per row, ≈ as costly as the whole Herald
read (docs/dedupe.md, "the query cut into stages"). Here the Python worker, which
holds the values as one Arrow buffer anyway, extracts them for a whole batch with
``pyarrow.json`` (C++, an explicit schema of just those fields) and adds a
nullable string column ``json_<field>`` per field.

The columns are what ``from_json(value, schema of those fields as strings)``
gives, row for row: a string is itself (escapes decoded); a missing field,
``null``, a value that is not a JSON object or a line that does not parse is
null; any other value is its JSON text as Spark writes it (``17``, ``true``,
``1000.0`` for ``1e3``, ``{"a":[1,2]}``). Where a batch does not parse in bulk
(any of those odd lines, a duplicated field…), that batch is read line by line
with ``orjson``, so the rows always line up. Known differences, on input that is
not JSON by RFC 8259 (Spark's parser is lenient there, orjson is not; such a line
is null here): single-quoted strings, ``NaN``/``Infinity``, trailing text after
the object, integers beyond 64 bits, lone UTF-16 surrogates; and a float nested
inside an object or array keeps Python's spelling (``1e-05``, Spark ``1.0E-5``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from decimal import Decimal

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from herald.spark.options import parse_json_fields
from herald.spark.projection import COLUMN_PREFIX, DEDUPE_KEY

__all__ = ["COLUMN_PREFIX", "field_columns", "field_text", "fields_schema", "line_columns", "parse_json_fields",
           "position_keys", "with_dedupe_key", "with_fields"]

_OPEN_BRACE = ord("{")
# No pyarrow scalars or arrays built at import: pyarrow's first conversion of a Python
# value imports pandas (0.17-0.33 s), and every stream query's fresh source runner
# imports this module (through `herald.spark.keys`) without reading a row.
_READ_ERRORS = (pa.ArrowInvalid, UnicodeDecodeError, ValueError)


def fields_schema(fields: Sequence[str]) -> str:
    """The DDL of the added columns (``""`` for none)."""
    return ", ".join(f"`{COLUMN_PREFIX}{name}` string" for name in fields)


def with_fields(batches: Iterator[pa.RecordBatch], fields: Sequence[str]) -> Iterator[pa.RecordBatch]:
    """``batches`` with a ``json_<field>`` column per field appended (unchanged without fields)."""
    if not fields:
        yield from batches
        return
    for batch in batches:
        columns = field_columns(batch.column(batch.schema.get_field_index("value")), fields)
        schema = batch.schema
        for name in fields:
            schema = schema.append(pa.field(COLUMN_PREFIX + name, pa.string()))
        yield pa.RecordBatch.from_arrays([*batch.columns, *columns], schema=schema)


def with_dedupe_key(batches: Iterator[pa.RecordBatch], field: str) -> Iterator[pa.RecordBatch]:
    """``batches`` with a ``dedupe_key`` column appended (unchanged without a field,
    option ``dedupeKey``): the field as its ``json_<field>`` column gives it, or
    ``<journal>:<begin>`` where that is null — a message without a key is unique.

    It is what the dedupe job keyed by in the JVM as ``coalesce(json_<field>,
    concat(journal, ':', cast(begin as string)))``, built here so that ``journal``
    and ``begin`` need not be sent to the JVM (issue 15: its cost per row of a
    Python source grows with the columns and bytes it is sent)."""
    if not field:
        yield from batches
        return
    for batch in batches:
        names = batch.schema.names
        if COLUMN_PREFIX + field in names:  # jsonFields names it too: parsed once
            parsed = batch.column(names.index(COLUMN_PREFIX + field))
        else:
            [parsed] = field_columns(batch.column(names.index("value")), [field])
        keys = position_keys(parsed, batch.column(names.index("journal")), batch.column(names.index("begin")))
        yield pa.RecordBatch.from_arrays([*batch.columns, keys], schema=batch.schema.append(
            pa.field(DEDUPE_KEY, pa.string())))


def position_keys(keys: pa.Array, journals: pa.Array, begins: pa.Array) -> pa.Array:
    """``keys`` with each null replaced by ``<journal>:<begin>`` (decimal, as Spark
    casts a long to a string); ``keys`` itself when none is null (the common case)."""
    if not keys.null_count:
        return keys
    positions = pc.binary_join_element_wise(journals, pc.cast(begins, pa.string()), ":")
    return pc.coalesce(keys, positions)


def field_columns(values: pa.Array, fields: Sequence[str]) -> list[pa.Array]:
    """One string array per field, a row per value: in bulk when the batch parses
    as such, else `line_columns` (identical output, slower)."""
    bulk = _bulk_columns(values, fields)
    return bulk if bulk is not None else line_columns(values.to_pylist(), fields)


def _bulk_columns(values: pa.Array, fields: Sequence[str]) -> list[pa.Array] | None:
    """``pyarrow.json`` over the values joined by newlines, or None where a row
    could be lost or split: then the caller reads line by line. Every value must
    be non-empty and start with ``{`` (so it yields at least one row: none is
    skipped as blank), and the parse must yield exactly one row per value."""
    n = len(values)
    if n == 0 or values.null_count:
        return None if n else [pa.array([], pa.string()) for _ in fields]
    _, offsets_buf, data_buf = values.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[values.offset:values.offset + n + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    if bool((offsets[1:] <= offsets[:-1]).any()) or bool((data[offsets[:-1]] != _OPEN_BRACE).any()):
        return None
    joined = pc.binary_join_element_wise(values, b"", b"\n")  # each value + "\n": NDJSON
    bounds = np.frombuffer(joined.buffers()[1], dtype=np.int32)[joined.offset:joined.offset + n + 1]
    body = joined.buffers()[2][int(bounds[0]):int(bounds[-1])]
    schema = pa.schema([(name, pa.string()) for name in fields])
    try:
        table = pj.read_json(pa.BufferReader(body),
                             read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, body.size)),
                             parse_options=pj.ParseOptions(explicit_schema=schema,
                                                           unexpected_field_behavior="ignore"))
    except _READ_ERRORS:
        return None
    if table.num_rows != n:
        return None
    return [table.column(name).combine_chunks() for name in fields]


def line_columns(values: Sequence[bytes | None], fields: Sequence[str]) -> list[pa.Array]:
    """The fields of each value, one ``orjson`` parse per line (the fallback, and
    the definition the bulk path is tested against)."""
    out: list[list[str | None]] = [[] for _ in fields]
    for value in values:
        doc = _document(value)
        for column, name in zip(out, fields, strict=True):
            column.append(field_text(doc.get(name)) if doc is not None else None)
    return [pa.array(column, pa.string()) for column in out]


def _document(value: bytes | None) -> dict | None:
    if value is None:
        return None
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) else None


def field_text(found: object) -> str | None:
    """A field's value as Spark's ``from_json`` reads it into a string column."""
    if found is None or isinstance(found, str):
        return found
    if found is True or found is False:
        return "true" if found else "false"
    if isinstance(found, float):
        return _java_double(found)
    if isinstance(found, int):
        return str(found)
    return orjson.dumps(found).decode()


def _java_double(x: float) -> str:
    """Java's ``Double.toString`` (what Jackson writes): plain between 1e-3 and
    1e7, else ``d.dddE±n``; shortest round-trip digits (JDK 19+)."""
    if math.isinf(x):
        return '"Infinity"' if x > 0 else '"-Infinity"'
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        return repr(x)
    sign, digits, exponent = Decimal(repr(x)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) - 1 + int(exponent)
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"
