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

import binascii
import csv
import io
import struct
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import orjson

from herald.message.uuid import uuid_from_str
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
    "ack_body",
    "framing_for",
    "framing_for_labels",
]

FIXED_MAGIC = b"\x66\x33\x93\x36"


class Frame(NamedTuple):
    """One decoded message at journal bytes ``[begin, end)``.

    A NamedTuple rather than a dataclass: decoders build millions of these.
    """

    begin: int
    end: int
    uuid: bytes | None
    value: bytes


class FramingError(ValueError):
    """Bytes ``[offset, offset + skipped)`` could not be decoded as a message.

    Decoders return these as events (and carry on after them) rather than raise,
    so one bad message does not lose the rest of a chunk; the caller decides
    whether to stop. ``Decoder.end()`` and offset mismatches raise them.
    """

    def __init__(self, offset: int, message: str, skipped: int = 0) -> None:
        super().__init__(f"offset {offset}: {message}")
        self.offset = self.begin = offset
        self.skipped = skipped
        self.end = offset + skipped


class Decoder(Protocol):
    def feed(self, data: bytes, offset: int) -> list[Frame | FramingError]: ...

    def end(self) -> None: ...


class Framing(Protocol):
    content_type: str

    def encode(self, body: Any, uuid16: bytes) -> bytes: ...

    def decoder(self) -> Decoder: ...

    def ack_body(self) -> Any: ...


def _uuid_ascii(uuid16: bytes) -> bytes:
    h = binascii.hexlify(uuid16)
    return b"-".join((h[:8], h[8:12], h[12:16], h[16:20], h[20:]))


class _Buffered:
    """Keeps the incomplete tail between feeds; subclasses implement ``_scan``.

    While a large message arrives in many chunks, chunks that cannot complete
    it are parked in a list rather than re-joined and re-scanned each time.
    """

    def __init__(self) -> None:
        self._tail = b""
        self._tail_offset = 0
        self._parked: list[bytes] = []
        self._buffered = 0
        self._need = 0  # Bytes needed before a rescan can complete a message.

    def feed(self, data: bytes, offset: int) -> list[Frame | FramingError]:
        """Decode ``data`` (which starts at journal ``offset``) → events.

        Returns a list, not a generator, so buffered state is updated before the
        caller sees anything. Raises FramingError if bytes are buffered and
        ``offset`` does not continue them (call ``reset()`` after an offset jump).
        """
        if type(data) is not bytes:
            data = bytes(data)  # The tail must not alias a caller's buffer.
        if self._buffered:
            expect = self._tail_offset + self._buffered
            if offset != expect:
                raise FramingError(offset, f"feed does not continue buffered bytes (expected offset {expect})")
            if not self._may_complete(data, self._buffered + len(data)):
                self._parked.append(data)
                self._buffered += len(data)
                return []
            data, offset = b"".join((self._tail, *self._parked, data)), self._tail_offset
            self._parked.clear()
        self._need = 0
        events, used = self._scan(data, offset)
        self._tail, self._tail_offset = data[used:], offset + used
        self._buffered = len(self._tail)
        return events

    def _may_complete(self, data: bytes, total: int) -> bool:
        return b"\n" in data  # Line framings: only a newline ends a message.

    @property
    def buffered(self) -> int:
        """Bytes held back as an incomplete message."""
        return self._buffered

    def reset(self) -> None:
        """Drop any buffered tail, e.g. after the reader jumped offsets."""
        self._tail, self._buffered = b"", 0
        self._parked.clear()

    def end(self) -> None:
        """Signal end of input: raises FramingError if a partial message remains."""
        if self._buffered:
            n = self._buffered
            raise FramingError(self._tail_offset, f"unexpected EOF in a {n}-byte partial message", n)

    def _scan(self, buf: bytes, base: int) -> tuple[list[Frame | FramingError], int]:
        raise NotImplementedError


# ---------------------------------------------------------------- NDJSON


class NDJSONFraming:
    """``application/x-ndjson``: one JSON object per ``\\n``-terminated line, the UUID
    as a top-level string field (``UUID`` by default).

    Encoding splices ``"UUID":"…",`` after the opening brace of an already
    serialised body, so the UUID is the first key and decoding usually takes a
    fast path with no JSON parse. Lines that are not JSON, or lack the field,
    decode with ``uuid=None``. Fast path caveat: a line starting with the UUID
    field is not otherwise validated, and with duplicate keys the first wins.
    """

    content_type = "application/x-ndjson"

    def __init__(self, uuid_field: str = "UUID") -> None:
        self.uuid_field = uuid_field
        self._prefix = b"{" + orjson.dumps(uuid_field) + b':"'

    def encode(self, body: bytes | dict[str, Any], uuid16: bytes) -> bytes:
        """``body`` + UUID as one line. ``body`` is a JSON object as bytes (without
        the UUID field) or a dict (any UUID field in it is replaced)."""
        if type(body) is not bytes:
            body = self._dumps(body)
        elif body.endswith(b"\n"):
            body = body[:-1]
        if body[:1] != b"{":
            raise ValidationError("body", "an NDJSON message must be a JSON object")
        if b"\n" in body:
            raise ValidationError("body", "an NDJSON message must not contain a newline")
        h = binascii.hexlify(uuid16)
        if len(h) != 32:
            raise ValidationError("uuid", f"want 16 bytes, got {len(uuid16)}")
        nxt = body[1:2]
        if nxt == b"}" or (nxt.isspace() and body[1:].lstrip()[:1] == b"}"):
            return b"".join((self._prefix, h[:8], b"-", h[8:12], b"-", h[12:16], b"-", h[16:20], b"-", h[20:], b'"}\n'))
        rest = memoryview(body)[1:]  # No copy of the body.
        return b"".join((self._prefix, h[:8], b"-", h[8:12], b"-", h[12:16], b"-", h[16:20], b"-", h[20:],
                         b'",', rest, b"\n"))

    def _dumps(self, body: Any) -> bytes:
        if isinstance(body, dict):
            if self.uuid_field in body:
                body = {k: v for k, v in body.items() if k != self.uuid_field}
            try:
                return orjson.dumps(body)
            except orjson.JSONEncodeError as exc:
                raise ValidationError("body", f"not serialisable as JSON: {exc}") from None
        if isinstance(body, (bytearray, memoryview)):
            return bytes(body)
        raise ValidationError("body", f"want bytes or dict, got {type(body).__name__}")

    def ack_body(self) -> bytes:
        """``{}``: the ACK line is then just ``{"UUID":"…"}``."""
        return b"{}"

    def decoder(self) -> _NDJSONDecoder:
        return _NDJSONDecoder(self)


def _loads(line: bytes) -> Any:
    """JSON as Go decodes it: invalid UTF-8 becomes U+FFFD rather than an error."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return orjson.loads(line.decode("utf-8", "replace"))


class _NDJSONDecoder(_Buffered):
    def __init__(self, framing: NDJSONFraming) -> None:
        super().__init__()
        self._field = framing.uuid_field
        self._prefix = framing._prefix

    def _scan(self, buf: bytes, base: int) -> tuple[list[Frame | FramingError], int]:
        # split() finds every line in C; the fast path then reads the UUID at a
        # fixed place without parsing JSON (hotpath-facts: ~2x bytes.find).
        lines = buf.split(b"\n")
        tail = lines.pop()
        out: list[Frame | FramingError] = []
        append, prefix, plen, quote = out.append, self._prefix, len(self._prefix), len(self._prefix) + 36
        unhex, new_frame = binascii.unhexlify, tuple.__new__
        pos = base
        for line in lines:
            end = pos + len(line) + 1
            uuid = None
            if line.startswith(prefix) and len(line) > quote and line[quote] == 0x22:
                u = line[plen:quote]
                if u[8] == 45 and u[13] == 45 and u[18] == 45 and u[23] == 45:
                    try:
                        uuid = unhex(u.replace(b"-", b""))
                    except binascii.Error:
                        uuid = None
            if uuid is None:
                found = self._slow_uuid(line, pos, end)
                if isinstance(found, FramingError):
                    append(found)
                    pos = end
                    continue
                uuid = found
            append(new_frame(Frame, (pos, end, uuid, line)))
            pos = end
        return out, len(buf) - len(tail)

    def _slow_uuid(self, line: bytes, begin: int, end: int) -> bytes | None | FramingError:
        try:
            doc = _loads(line)
        except orjson.JSONDecodeError as err:
            return FramingError(begin, f"not valid JSON ({err}): {line[:60]!r}", end - begin)
        if not isinstance(doc, dict):
            return FramingError(begin, f"not a JSON object: {line[:60]!r}", end - begin)
        value = doc.get(self._field)
        if value is None:
            return None
        if isinstance(value, str):
            try:
                return uuid_from_str(value)
            except ValueError:
                pass
        return FramingError(begin, f"field {self._field!r} is not a UUID: {value!r:.60}", end - begin)


# ---------------------------------------------------------------- CSV


class CSVFraming:
    """``text/csv``: one record per message, the UUID in column ``uuid_column``
    (default 0, as Gazette's CSVRecord). Quoting is the ``csv`` module's; records
    end with ``\\n`` (Go's encoding/csv default)."""

    content_type = "text/csv"

    def __init__(self, uuid_column: int = 0) -> None:
        if uuid_column < 0:
            raise ValidationError("uuid_column", f"must be >= 0, got {uuid_column}")
        self.uuid_column = uuid_column

    def encode(self, body: Sequence[str] | bytes, uuid16: bytes) -> bytes:
        """Fields of ``body`` (without the UUID column; bytes are parsed as one
        CSV record) with the UUID inserted at ``uuid_column``."""
        if isinstance(body, (bytes, bytearray)):
            text = bytes(body).decode("utf-8").rstrip("\r\n")
            fields = next(csv.reader([text]), []) if text else []
        else:
            fields = [str(f) for f in body]
        fields += [""] * (self.uuid_column - len(fields))
        fields.insert(self.uuid_column, _uuid_ascii(uuid16).decode("ascii"))
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerow(fields)
        return out.getvalue().encode("utf-8")

    def ack_body(self) -> list[str]:
        """No fields: the ACK record holds only the UUID (padded to its column)."""
        return []

    def decoder(self) -> _CSVDecoder:
        return _CSVDecoder(self.uuid_column)


class _CSVDecoder(_Buffered):
    """Records must all have the field count of the first one decoded (Go's
    ``encoding/csv`` with ``FieldsPerRecord = 0``, as Gazette's CSV framing); ACK
    records, which hold only the UUID, are exempt."""

    def __init__(self, uuid_column: int) -> None:
        super().__init__()
        self._column = uuid_column
        self._width = 0

    def _scan(self, buf: bytes, base: int) -> tuple[list[Frame | FramingError], int]:
        out: list[Frame | FramingError] = []
        pos = start = 0
        quotes = 0
        while (nl := buf.find(b"\n", pos)) >= 0:
            quotes += buf.count(b'"', pos, nl)
            pos = nl + 1
            if quotes % 2:
                continue  # The newline is inside a quoted field.
            out.append(self._record(buf[start:nl], base + start, base + pos))
            start, quotes = pos, 0
        return out, start

    def _is_ack_shaped(self, fields: list[str]) -> bool:
        return len(fields) == self._column + 1 and not any(fields[:self._column])

    def _record(self, line: bytes, begin: int, end: int) -> Frame | FramingError:
        if line.endswith(b"\r"):
            line = line[:-1]
        try:
            fields = next(csv.reader([line.decode("utf-8")]), [])
        except (UnicodeDecodeError, csv.Error) as exc:
            return FramingError(begin, f"bad CSV record: {exc}", end - begin)
        text = fields[self._column] if self._column < len(fields) else ""
        if not self._is_ack_shaped(fields):
            self._width = self._width or len(fields)
            if len(fields) != self._width:
                return FramingError(begin, f"record has {len(fields)} fields, want {self._width} "
                                           "(the first record's count)", end - begin)
        if not text:
            return Frame(begin, end, None, line)
        try:
            return Frame(begin, end, uuid_from_str(text), line)
        except ValueError:
            return FramingError(begin, f"column {self._column} is not a UUID: {text!r:.60}", end - begin)


# ---------------------------------------------------------------- fixed


_HEADER = struct.Struct("<4sI")


class FixedFraming:
    """``application/x-protobuf-fixed``: an 8-byte header (magic ``66 33 93 36`` +
    uint32 little-endian payload length), then the payload.

    Herald convention (Gazette leaves the UUID to the protobuf message): the UUID
    is the first 16 bytes of the payload and ``Frame.value`` is the rest. On a bad
    magic the decoder skips to the next magic and reports the skipped bytes as a
    FramingError event ("de-synchronization"), then carries on.
    """

    content_type = "application/x-protobuf-fixed"

    def encode(self, body: bytes, uuid16: bytes) -> bytes:
        if len(uuid16) != 16:
            raise ValidationError("uuid", f"want 16 bytes, got {len(uuid16)}")
        return _HEADER.pack(FIXED_MAGIC, 16 + len(body)) + uuid16 + body

    def ack_body(self) -> bytes:
        return b""

    def decoder(self) -> _FixedDecoder:
        return _FixedDecoder()


class _FixedDecoder(_Buffered):
    def _scan(self, buf: bytes, base: int) -> tuple[list[Frame | FramingError], int]:
        out: list[Frame | FramingError] = []
        pos, n = 0, len(buf)
        while n - pos >= 8:
            magic, size = _HEADER.unpack_from(buf, pos)
            if magic != FIXED_MAGIC:
                nxt = buf.find(FIXED_MAGIC, pos + 1)
                if nxt < 0:
                    nxt = max(pos + 1, n - 3)  # The last 3 bytes may start a magic.
                skipped = nxt - pos
                out.append(FramingError(base + pos, f"detected de-synchronization: skipped {skipped} bytes", skipped))
                pos = nxt
                continue
            stop = pos + 8 + size
            if stop > n:
                self._need = stop - pos
                break
            if size >= 16:
                out.append(Frame(base + pos, base + stop, buf[pos + 8 : pos + 24], buf[pos + 24 : stop]))
            else:
                out.append(Frame(base + pos, base + stop, None, buf[pos + 8 : stop]))
            pos = stop
        return out, pos

    def _may_complete(self, data: bytes, total: int) -> bool:
        return total >= max(self._need, 8)

    def end(self) -> None:
        if self._tail != b"\n" or self._parked:  # Gazette tolerates one trailing newline.
            super().end()


# ---------------------------------------------------------------- registry


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


def framing_for_labels(labels: LabelSet, uuid_field: str = "UUID") -> Framing:
    """The framing a journal's labels ask for: its ``content-type``, NDJSON if none."""
    return framing_for(labels.value_of(CONTENT_TYPE) or NDJSONFraming.content_type, uuid_field)


def ack_body(framing: Framing) -> Any:
    """The body of an ACK message in ``framing`` (NDJSON ``{}``, CSV no fields,
    fixed empty) — Gazette's ``NewAcknowledgement``."""
    return framing.ack_body()
