"""The ``key`` column of reads: each message's mapping key, taken from its value.

A journal records no key: Gazette's mapping key is a function of the message the
publisher applies before appending. Readers that want Kafka's ``key`` column name
where it lives with ``keyField``: a JSON field of NDJSON messages (``messageId``),
or a 0-based column number of CSV records (``11``). The column is what Herald's
sink maps by, so ``read → transform → write`` keeps each key's journal under the
same ``mapping``. A message without the field, or that does not parse, has a null
key (the read never fails for a key).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping, Sequence

import orjson
import pyarrow as pa

from herald.spark.fields import fields_schema, parse_json_fields, with_dedupe_key, with_fields
from herald.spark.projection import DEDUPE_KEY

__all__ = ["KEY_COLUMN", "key_of", "schema_with_key", "with_keys"]

KEY_COLUMN = "key string"


def schema_with_key(schema: str, options: Mapping[str, str]) -> str:
    """The read schema: with a trailing ``key`` column when ``keyField`` is set,
    then a ``json_<field>`` column per ``jsonFields`` name (`herald.spark.fields`),
    then ``dedupe_key`` when ``dedupeKey`` is set."""
    def option(name: str) -> str:
        return next((v for k, v in options.items() if k.lower() == name), "") or ""

    fields = fields_schema(parse_json_fields(option("jsonfields")))
    dedupe = f"{DEDUPE_KEY} string" if option("dedupekey").strip() else ""
    return ", ".join(part for part in (schema, KEY_COLUMN if option("keyfield") else "", fields, dedupe) if part)


def with_keys(batches: Iterator[pa.RecordBatch], key_field: str, json_fields: Sequence[str] = (),
              dedupe_key: str = "") -> Iterator[pa.RecordBatch]:
    """``batches`` with a ``key`` column appended (unchanged without ``keyField``),
    then the ``jsonFields`` columns (`herald.spark.fields.with_fields`), then
    ``dedupe_key`` (`herald.spark.fields.with_dedupe_key`)."""
    yield from with_dedupe_key(with_fields(_keyed(batches, key_field), json_fields), dedupe_key)


def _keyed(batches: Iterator[pa.RecordBatch], key_field: str) -> Iterator[pa.RecordBatch]:
    if not key_field:
        yield from batches
        return
    for batch in batches:
        values = batch.column(batch.schema.get_field_index("value")).to_pylist()
        keys = pa.array([None if v is None else key_of(v, key_field) for v in values], pa.string())
        schema = batch.schema.append(pa.field("key", pa.string()))
        yield pa.RecordBatch.from_arrays([*batch.columns, keys], schema=schema)


def key_of(value: bytes, key_field: str) -> str | None:
    """The key of one message value: a CSV column by number, else a JSON field."""
    if key_field.isdigit():
        row = next(csv.reader([value.decode("utf-8", "replace").rstrip("\r\n")]), [])
        column = int(key_field)
        return row[column] if column < len(row) else None
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    found = doc.get(key_field) if isinstance(doc, dict) else None
    if found is None or isinstance(found, str):
        return found
    return orjson.dumps(found).decode()
