"""The messages of stream-sum: chunks (chunkers → summer) and sums (summer → chunkers).

A chunk is one NDJSON message on a chunks journal, keyed (mapped) by its file
id so that all chunks of a file land, in order, in one journal::

    {"UUID": "…", "id": "c0-5f1e-000017", "seq": 3, "data": "<base64>", "end": false}

The last chunk of a file has ``"end": true`` (and usually no data). The summer
answers on the sums journals with one of::

    {"UUID": "…", "id": "c0-5f1e-000017", "sum": "<hex>", "chunks": 4}
    {"UUID": "…", "rejected": "<reason>", "journal": "stream-sum/chunks/part-001", "offset": 1234, "id": …}

A *rejected* message reports a chunk the summer could not use (not an object,
no string ``id``, a ``data`` that is not base64, …) with its journal and byte
offset; the summer skips it and goes on (see docs/examples/stream-sum.md).
Pure: parsing and building only.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["Chunk", "Reject", "Sum", "chunk_body", "parse_chunk", "parse_output", "reject_body", "sum_body"]


@dataclass(frozen=True, slots=True)
class Chunk:
    file_id: str
    seq: int
    data: bytes
    end: bool


@dataclass(frozen=True, slots=True)
class Sum:
    file_id: str
    sum: str
    chunks: int


@dataclass(frozen=True, slots=True)
class Reject:
    reason: str
    journal: str
    offset: int
    file_id: str | None = None


def chunk_body(file_id: str, seq: int, data: bytes, end: bool) -> bytes:
    """The JSON body of one chunk (the publisher adds the UUID)."""
    return orjson.dumps({"id": file_id, "seq": seq, "data": base64.b64encode(data).decode(), "end": end})


def parse_chunk(value: bytes) -> Chunk | str:
    """A chunk, or the reason (naming the field) why ``value`` is not one."""
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError as err:
        return f"not JSON: {err}"
    if not isinstance(doc, dict):
        return "not a JSON object"
    file_id, seq, data, end = doc.get("id"), doc.get("seq"), doc.get("data", ""), doc.get("end")
    if not isinstance(file_id, str) or not file_id:
        return "id: want a non-empty string"
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        return "seq: want an integer >= 0"
    if not isinstance(end, bool):
        return "end: want true or false"
    if not isinstance(data, str):
        return "data: want a base64 string"
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return "data: not valid base64"
    return Chunk(file_id, seq, raw, end)


def sum_body(file_id: str, hexdigest: str, chunks: int) -> str:
    return orjson.dumps({"id": file_id, "sum": hexdigest, "chunks": chunks}).decode()


def reject_body(reason: str, journal: str, offset: int, file_id: str | None) -> str:
    doc: dict[str, Any] = {"rejected": reason, "journal": journal, "offset": offset}
    if file_id is not None:
        doc["id"] = file_id
    return orjson.dumps(doc).decode()


def parse_output(value: bytes) -> Sum | Reject | None:
    """A message of a sums journal (None: not one the summer writes)."""
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    if "rejected" in doc:
        file_id = doc.get("id")
        return Reject(str(doc["rejected"]), str(doc.get("journal", "")), int(doc.get("offset", -1)),
                      file_id if isinstance(file_id, str) else None)
    if isinstance(doc.get("id"), str) and isinstance(doc.get("sum"), str) and isinstance(doc.get("chunks"), int):
        return Sum(doc["id"], doc["sum"], doc["chunks"])
    return None
