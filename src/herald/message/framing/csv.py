"""``text/csv``: one record per message, the UUID in a column."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from herald.message.framing.base import Frame, FramingError, _Buffered, _uuid_ascii
from herald.message.uuid import uuid_from_str
from herald.protocol.errors import ValidationError

__all__ = ["CSVFraming"]


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
