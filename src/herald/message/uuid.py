"""Gazette's message UUIDs: RFC 4122 v1 with a Clock, Flags and a ProducerID.

Layout (gazette-facts §1.1, big-endian fields, 16 bytes)::

    0..3   time_low    low 32 bits of the 60-bit timestamp (timestamp = clock >> 4)
    4..5   time_mid    timestamp bits 32..47
    6..7   time_hi     timestamp bits 48..59 | 0x1000 (version 1)
    8..9   clock_seq   0x8000 (RFC variant) | counter << 10 (4 bits) | flags (10 bits)
    10..15 node        the ProducerID

A ``Clock`` is the 60-bit timestamp (100 ns ticks since 1582-10-15) shifted left
four bits, plus a 4-bit sequence counter. Ordering clocks of one producer orders
its UUIDs, which is what lets a reader drop duplicates by remembering only the
largest clock it has seen per producer.

Everything here is pure: time and randomness are arguments, never read here.
"""

from __future__ import annotations

import enum
import struct

from herald.protocol.errors import ValidationError

__all__ = [
    "ACK_TXN",
    "CONTINUE_TXN",
    "Clock",
    "Flags",
    "GREGORIAN_OFFSET_100NS",
    "OUTSIDE_TXN",
    "ProducerID",
    "ZERO_UUID",
    "build_uuid",
    "clock_to_unix_ns",
    "duration_to_clock",
    "flags_str",
    "get_clock",
    "get_flags",
    "get_producer",
    "parse_uuid",
    "unix_ns_to_clock",
    "uuid_from_str",
    "uuid_str",
    "uuid_suffix",
]

GREGORIAN_OFFSET_100NS = 122_192_928_000_000_000
"""100 ns ticks between the Gregorian epoch (1582-10-15) and the Unix epoch."""

_U64 = (1 << 64) - 1
_TICK = 160  # 1 µs: 10 ticks of 100 ns, shifted past the 4 counter bits.
_MAX_FLAGS = 0x3FF
ZERO_UUID = bytes(16)
"""The zero UUID: a message that cannot carry a UUID opts out of exactly-once."""

# Plain ints for hot paths; ``Flags`` gives the same values a readable repr.
OUTSIDE_TXN = 0x0
CONTINUE_TXN = 0x1
ACK_TXN = 0x2


class Flags(enum.IntFlag):
    """The 10 low bits of the clock-sequence word (gazette-facts §1.4).

    OUTSIDE_TXN commits itself; CONTINUE_TXN waits for a later ACK_TXN of the
    same producer and journal whose clock is at least its own.
    """

    OUTSIDE_TXN = 0x0
    CONTINUE_TXN = 0x1
    ACK_TXN = 0x2


def flags_str(flags: int) -> str:
    """Gazette's spelling of a flags value: ``ACK_TXN`` or ``Flags(3ff)``."""
    names = {OUTSIDE_TXN: "OUTSIDE_TXN", CONTINUE_TXN: "CONTINUE_TXN", ACK_TXN: "ACK_TXN"}
    return names.get(flags) or f"Flags({flags:x})"


class ProducerID(bytes):
    """Six bytes naming one publisher: the UUID "node" field.

    A bytes subclass, so it can be passed wherever ``producer: bytes`` is taken.
    """

    __slots__ = ()

    def __new__(cls, value: bytes) -> ProducerID:
        if len(value) != 6:
            raise ValidationError("producer", f"want 6 bytes, got {len(value)}")
        return super().__new__(cls, value)

    @classmethod
    def new(cls, random_bytes: bytes) -> ProducerID:
        """A ProducerID from caller-supplied randomness (e.g. ``os.urandom(6)``).

        The multicast bit is set, as Gazette does, so it can never equal a real
        MAC address. Randomness is an argument to keep this module pure.
        """
        if len(random_bytes) < 6:
            raise ValidationError("random_bytes", f"want at least 6 bytes, got {len(random_bytes)}")
        b = bytearray(random_bytes[:6])
        b[0] |= 0x01
        return cls(bytes(b))

    @classmethod
    def from_hex(cls, text: str) -> ProducerID:
        """Parse the 12-hex-digit form written by ``hex()``."""
        try:
            raw = bytes.fromhex(text)
        except ValueError as exc:
            raise ValidationError("producer", f"not hex: {text!r}") from exc
        return cls(raw)

    def __repr__(self) -> str:
        return f"ProducerID({self.hex()!r})"


class Clock:
    """A mutable 64-bit clock: 60-bit timestamp << 4 | 4-bit counter.

    Not thread-safe (Gazette's is atomic): one publisher owns one Clock and uses
    it from one thread or event loop.
    """

    __slots__ = ("value",)

    def __init__(self, value: int = 0) -> None:
        if not 0 <= value <= _U64:
            raise ValidationError("clock", f"{value} is not a uint64")
        self.value = value

    @classmethod
    def from_unix_ns(cls, unix_ns: int) -> Clock:
        """A clock at ``unix_ns`` with a zero counter (Gazette's NewClock)."""
        clock = cls()
        clock.update(unix_ns)
        return clock

    def update(self, unix_ns: int) -> None:
        """Move to wall time ``unix_ns`` if that is later; never move backward.

        Moving forward zeroes the counter bits, as in Gazette.
        """
        nxt = unix_ns_to_clock(unix_ns)
        if nxt > self.value:
            self.value = nxt

    def tick(self) -> int:
        """Advance by 1 µs (+160) and return the new value.

        Gazette changed Tick from +1 to +160 in Sept 2025 (gazette-facts §1.3); a
        producer therefore runs ahead of wall time past ~1M UUIDs/s.
        """
        self.value = (self.value + _TICK) & _U64
        return self.value

    def __repr__(self) -> str:
        return f"Clock({self.value})"


def unix_ns_to_clock(unix_ns: int) -> int:
    """Unix nanoseconds → Clock with a zero counter (truncating to 100 ns, like Go)."""
    ticks = unix_ns // 100 if unix_ns >= 0 else -((-unix_ns) // 100)
    return ((ticks + GREGORIAN_OFFSET_100NS) << 4) & _U64


def clock_to_unix_ns(clock: int) -> int:
    """Clock → Unix nanoseconds (the counter bits are dropped)."""
    return ((clock >> 4) - GREGORIAN_OFFSET_100NS) * 100


def duration_to_clock(duration_ns: int) -> int:
    """A duration in ns expressed in Clock units, e.g. for sequencer pruning."""
    return (duration_ns // 100) << 4


_pack_head = struct.Struct(">IHH").pack
_pack_word = struct.Struct(">H").pack
_unpack = struct.Struct(">IHHH6s").unpack
_suffixes: dict[tuple[bytes, int], bytes] = {}


def uuid_suffix(producer: bytes, seq: int) -> bytes:
    """Bytes 8..15 — variant, counter and flags word + producer — for
    ``seq = counter << 10 | flags``. Cached: Tick() leaves the counter alone, so a
    publisher reuses one suffix per flag value (hotpath-facts: ~3M UUIDs/s)."""
    suffix = _suffixes.get((producer, seq))
    if suffix is None:
        if len(producer) != 6:
            raise ValidationError("producer", f"want 6 bytes, got {len(producer)}")
        if len(_suffixes) > 4096:
            _suffixes.clear()
        suffix = _suffixes[(bytes(producer), seq)] = _pack_word(seq | 0x8000) + bytes(producer)
    return suffix


def build_uuid(producer: bytes, clock: int, flags: int) -> bytes:
    """The 16 UUID bytes for ``(producer, clock, flags)``; raises ValueError on
    flags > 0x3ff (Gazette panics) or a clock outside uint64."""
    if flags > _MAX_FLAGS or flags < 0:
        raise ValidationError("flags", f"only the 10 low bits may be used, got {flags:#x}")
    if clock > _U64 or clock < 0:
        raise ValidationError("clock", f"{clock} is not a uint64")
    t = clock >> 4
    seq = ((clock & 0xF) << 10) | flags
    suffix = _suffixes.get((producer, seq)) or uuid_suffix(producer, seq)
    return _pack_head(t & 0xFFFFFFFF, (t >> 32) & 0xFFFF, (t >> 48) | 0x1000) + suffix


def parse_uuid(uuid16: bytes) -> tuple[bytes, int, int]:
    """``(producer, clock, flags)`` of 16 UUID bytes (any version bits ignored)."""
    try:
        low, mid, hi, seq, producer = _unpack(uuid16)
    except struct.error:
        raise ValidationError("uuid", f"want 16 bytes, got {len(uuid16)}") from None
    clock = (low << 4) | (mid << 36) | ((hi & 0x0FFF) << 52) | ((seq >> 10) & 0xF)
    return producer, clock, seq & _MAX_FLAGS


def get_clock(uuid16: bytes) -> int:
    """The Clock of a UUID: timestamp << 4 | counter."""
    return parse_uuid(uuid16)[1]


def get_producer(uuid16: bytes) -> bytes:
    """The ProducerID bytes of a UUID (bytes 10..15)."""
    if len(uuid16) != 16:
        raise ValidationError("uuid", f"want 16 bytes, got {len(uuid16)}")
    return uuid16[10:16]


def get_flags(uuid16: bytes) -> int:
    """The 10 flag bits of a UUID."""
    if len(uuid16) != 16:
        raise ValidationError("uuid", f"want 16 bytes, got {len(uuid16)}")
    return ((uuid16[8] << 8) | uuid16[9]) & _MAX_FLAGS


def uuid_str(uuid16: bytes) -> str:
    """Canonical lowercase 8-4-4-4-12 text of 16 UUID bytes."""
    h = uuid16.hex()
    if len(h) != 32:
        raise ValidationError("uuid", f"want 16 bytes, got {len(uuid16)}")
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def uuid_from_str(text: str | bytes) -> bytes:
    """Parse UUID text: canonical 36 chars (any case), or 32 hex digits, ``{…}``
    or ``urn:uuid:…`` (the forms Gazette's uuid.Parse accepts). Raises ValueError."""
    s = text.decode("ascii", "replace") if isinstance(text, (bytes, bytearray)) else text
    if len(s) == 45 and s[:9].lower() == "urn:uuid:":
        s = s[9:]
    elif len(s) == 38 and s[0] == "{" and s[-1] == "}":
        s = s[1:-1]
    if len(s) == 36:
        if s[8] != "-" or s[13] != "-" or s[18] != "-" or s[23] != "-":
            raise ValidationError("uuid", f"bad text {text!r}")
        s = s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
    if len(s) != 32:
        raise ValidationError("uuid", f"bad text {text!r}")
    try:
        raw = bytes.fromhex(s)
    except ValueError:
        raw = b""
    if len(raw) != 16:  # fromhex skips whitespace, so check what it produced.
        raise ValidationError("uuid", f"bad text {text!r}")
    return raw
