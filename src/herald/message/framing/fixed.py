"""``application/x-protobuf-fixed``: Gazette's fixed framing — magic, little-endian length, payload."""

from __future__ import annotations

import struct

from herald.message.framing.base import Frame, FramingError, _Buffered
from herald.protocol.errors import ValidationError

__all__ = ["FIXED_MAGIC", "FixedFraming"]

FIXED_MAGIC = b"\x66\x33\x93\x36"


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
