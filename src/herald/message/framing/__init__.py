"""Framings: how messages and their UUIDs are laid out in a journal's bytes.

A journal's ``content-type`` label picks its framing (gazette-facts §1.5). Each
framing encodes a body plus a UUID into one framed message, and gives a
feed-style decoder in the manner of h11: bytes in, events out, no I/O::

    dec = framing.decoder()
    for event in dec.feed(chunk, offset):      # offset = journal offset of chunk[0]
        if isinstance(event, FramingError): ...  # skipped bytes, named by offset
        else: event.begin, event.end, event.uuid, event.value
    dec.end()                                  # raises if a partial message is left

Incomplete tails stay buffered until the next ``feed``. A message without a
UUID decodes with ``uuid=None``; the Sequencer treats it like the zero UUID, as
committed (gazette-facts §2.2). Bytes that are not a message at all — an NDJSON
line that is not a JSON object, a CSV record whose field count differs from the
journal's — are a `FramingError`, never a message (`decode_errors` says what a
reader does with them).
"""

from __future__ import annotations

from herald.message.framing.base import Decoder, Frame, Framing, FramingError
from herald.message.framing.csv import CSVFraming
from herald.message.framing.fixed import FIXED_MAGIC, FixedFraming
from herald.message.framing.ndjson import NDJSONFraming
from herald.protocol.errors import ValidationError
from herald.protocol.labels import CONTENT_TYPE, LabelSet

__all__ = [
    "CSVFraming",
    "Decoder",
    "FIXED_MAGIC",
    "FixedFraming",
    "Frame",
    "Framing",
    "FramingError",
    "NDJSONFraming",
    "content_type_of",
    "framing_for",
    "framing_for_labels",
]


def framing_for(content_type: str, uuid_field: str = "UUID", uuid_column: int = 0) -> Framing:
    """The framing for a journal's ``content-type`` label (parameters ignored).
    Raises ValueError naming an unknown content type."""
    base = content_type.split(";", 1)[0].strip().lower()
    if base == NDJSONFraming.content_type:
        return NDJSONFraming(uuid_field)
    if base == CSVFraming.content_type:
        return CSVFraming(uuid_column)
    if base == FixedFraming.content_type:
        return FixedFraming()
    raise ValidationError("content-type", f"no framing for {content_type!r}")


def content_type_of(labels: LabelSet) -> str:
    """A journal's message content type: its ``content-type`` label, NDJSON if none."""
    return labels.value_of(CONTENT_TYPE) or NDJSONFraming.content_type


def framing_for_labels(labels: LabelSet, uuid_field: str = "UUID") -> Framing:
    """The framing a journal's labels ask for (`content_type_of`)."""
    return framing_for(content_type_of(labels), uuid_field)
