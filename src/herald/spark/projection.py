"""Column pruning by schema: a read builds and sends only the columns asked for.

PySpark's Python data source API pushes no column pruning down, but it passes
the schema a user gives (``spark.read.format("herald").schema("journal string,
begin long, value binary")``) to ``reader(schema)`` / ``streamReader(schema)``.
Issue 15 measured the JVM side of a Python source at ~0.5–1 µs per row turning
the Arrow batches it receives into rows, about half of it for the columns a
query like dedupe never reads (``end``, ``uuid``, ``producer``, ``clock``,
``flags``): so a schema naming a subset of the read's columns selects the
columns the tasks build (`herald.spark.rows.subset_schema`: no UUID text unless
``uuid`` or ``producer`` is asked for) and send. The reading itself is
unchanged (the read-committed Sequencer still decodes every UUID): only the
output columns are.

A schema must name columns of the read (Herald's nine, ``key`` with
``keyField``, ``json_<field>`` with ``jsonFields``, ``dedupe_key`` with
``dedupeKey``), each at most once, with its
type; anything else is a `ValidationError` naming the column.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from herald.protocol.errors import ValidationError
from herald.spark.options import HeraldOptions

if TYPE_CHECKING:  # no pyarrow at import: a stream's fresh source runner plans with this module
    import pyarrow as pa

__all__ = ["COLUMN_PREFIX", "DEDUPE_KEY", "HERALD_TYPES", "built_columns", "project", "read_columns", "select_columns"]

#: ``json_<field>``: Herald's own columns (``timestamp``, ``value``, ``key``) never collide.
COLUMN_PREFIX = "json_"
#: The ``dedupeKey`` option's column (`herald.spark.fields.with_dedupe_key`).
DEDUPE_KEY = "dedupe_key"

#: Herald's own columns and their Spark types (as `DataType.simpleString` spells them).
HERALD_TYPES = {"journal": "string", "begin": "bigint", "end": "bigint", "uuid": "string", "producer": "string",
                "clock": "bigint", "flags": "int", "timestamp": "timestamp", "value": "binary"}


def read_columns(opts: HeraldOptions) -> dict[str, str]:
    """Every column the read can give, in the default schema's order, with its type."""
    columns = dict(HERALD_TYPES)
    if opts.key_field:
        columns["key"] = "string"
    columns.update({COLUMN_PREFIX + name: "string" for name in opts.json_fields})
    if opts.dedupe_key:
        columns[DEDUPE_KEY] = "string"
    return columns


def select_columns(schema: Any, opts: HeraldOptions) -> HeraldOptions:
    """``opts`` reading the columns of ``schema`` (a `StructType`); unchanged when it is
    the whole default schema. Raises `ValidationError` naming a column the read does
    not have, has with another type, or that is named twice."""
    if schema is None:  # called outside Spark (which always passes one): every column
        return opts
    known = read_columns(opts)
    names: list[str] = []
    for field in getattr(schema, "fields", ()):
        name = field.name  # exact: the batches' column names must be the schema's
        if name not in known:
            raise ValidationError("schema", f"column {field.name!r} is not one of the read's columns "
                                            f"({', '.join(known)})")
        given = field.dataType.simpleString()
        if given != known[name]:
            raise ValidationError("schema", f"column {field.name!r} is {known[name]}, not {given}")
        if name in names:
            raise ValidationError("schema", f"column {field.name!r} is named twice")
        names.append(name)
    if not names:
        raise ValidationError("schema", "names no column")
    if names == list(known):
        return opts
    return replace(opts, columns=tuple(names))


def built_columns(opts: HeraldOptions) -> frozenset[str] | None:
    """Herald's columns the tasks build (None: all): those asked for, ``value``
    when the key or JSON field columns are computed from it, and ``journal`` and
    ``begin`` for ``dedupe_key`` (a message without the field is keyed by them)."""
    if not opts.columns:
        return None
    built = {name for name in opts.columns if name in HERALD_TYPES}
    if opts.key_field or opts.json_fields or opts.dedupe_key:
        built.add("value")
    if opts.dedupe_key:
        built.update(("journal", "begin"))
    return frozenset(built)


def project(batches: Iterator[pa.RecordBatch], opts: HeraldOptions) -> Iterator[pa.RecordBatch]:
    """``batches`` reduced to the schema's columns, in its order (unchanged without one)."""
    if not opts.columns:
        yield from batches
        return
    for batch in batches:
        yield batch.select(list(opts.columns))
