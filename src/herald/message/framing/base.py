"""What every framing shares: `Frame`, `FramingError`, the `Framing` and `Decoder`
protocols, and `_Buffered`, which keeps an incomplete tail between feeds."""

from __future__ import annotations

import binascii
from typing import Any, NamedTuple, Protocol

from herald.protocol.errors import HeraldError, Status

__all__ = ["Decoder", "Frame", "Framing", "FramingError"]


class Frame(NamedTuple):
    """One decoded message at journal bytes ``[begin, end)``.

    A NamedTuple rather than a dataclass: decoders build millions of these.
    """

    begin: int
    end: int
    uuid: bytes | None
    value: bytes


class FramingError(HeraldError, ValueError):
    """Bytes ``[offset, offset + skipped)`` could not be decoded as a message.

    Decoders return these as events (and carry on after them) rather than raise,
    so one bad message does not lose the rest of a chunk; the caller decides
    whether to stop. ``Decoder.end()`` and offset mismatches raise them.
    A HeraldError (MESSAGE_DECODE_ERROR) so the CLI and Spark render it like any
    other; still a ValueError for callers of the pure layer.
    """

    def __init__(self, offset: int, message: str, skipped: int = 0) -> None:
        super().__init__(Status.MESSAGE_DECODE_ERROR, f"offset {offset}: {message}")
        self.offset = self.begin = offset
        self.skipped = skipped
        self.end = offset + skipped
        self._reason = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.offset, self._reason, self.skipped))


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
