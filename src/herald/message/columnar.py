"""NDJSON bytes → message columns with numpy: the bulk decoder for batch reads.

``NDJSONDecoder`` builds one ``Frame`` per line (~0.6 M lines/s here). Batch
readers (Spark) need columns, not objects, so ``scan_ndjson`` finds every line
and reads the UUID at its fixed place (the first key, as Herald's encoder
writes it) for all lines at once; only lines off that fast path go through the
per-line decoder's rules. Values come out as one contiguous buffer with the
newlines removed plus int32 offsets — the layout of an Arrow binary array.
Pure: bytes in, arrays out.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass

import numpy as np

from herald.message.framing import FramingError, NDJSONFraming
from herald.message.sequencer import Envelope

__all__ = ["Columns", "fnv1a32_many", "scan_ndjson", "uuid_text", "uuid_fields"]

_HEX = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _i
# Positions of the 32 hex digits within the 36-character UUID text.
_HEX_RUNS = ((0, 8), (9, 13), (14, 18), (19, 23), (24, 36))
_DASH_AT = np.array([8, 13, 18, 23], dtype=np.int64)
_LOWER = np.uint64(0x2020202020202020)
_HEX_COLS = np.concatenate([np.arange(a, b) for a, b in _HEX_RUNS])


@dataclass(frozen=True, slots=True)
class Columns:
    """Messages of one scanned block: ``n`` lines, each ``[begins[i], ends[i])`` in the
    journal (``ends`` past the newline), its UUID (``uuids[i]``, valid where
    ``has_uuid[i]``) and its value ``values[offsets[i]:offsets[i+1]]`` (no newline)."""

    begins: np.ndarray
    ends: np.ndarray
    uuids: np.ndarray  # (n, 16) uint8
    has_uuid: np.ndarray  # (n,) bool
    values: np.ndarray  # uint8, newlines removed
    offsets: np.ndarray  # (n + 1,) int32
    errors: tuple[FramingError, ...] = ()
    #: The UUIDs' text as ``uuid_text`` would give it (n × 36 uint8), when the lines
    #: held exactly that (every line on the fast path, lowercase): no re-encoding.
    text: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.begins)

    def envelope(self, journal: str, i: int) -> Envelope:
        """Row ``i`` as an `Envelope` (for the per-message Sequencer)."""
        uuid = self.uuids[i].tobytes() if self.has_uuid[i] else None
        value = self.values[self.offsets[i]:self.offsets[i + 1]].tobytes()
        return Envelope(journal, int(self.begins[i]), int(self.ends[i]), uuid, value)


def uuid_text(uuids: np.ndarray) -> np.ndarray:
    """The 36-character lowercase text of ``n`` packed UUIDs, as n × 36 uint8."""
    n = len(uuids)
    hexed = np.frombuffer(binascii.hexlify(np.ascontiguousarray(uuids).tobytes()), dtype=np.uint8).reshape(n, 32)
    text = np.full((n, 36), ord("-"), dtype=np.uint8)
    text[:, 0:8], text[:, 9:13], text[:, 14:18] = hexed[:, 0:8], hexed[:, 8:12], hexed[:, 12:16]
    text[:, 19:23], text[:, 24:36] = hexed[:, 16:20], hexed[:, 20:32]
    return text


_UUID_FIELDS = np.dtype([("low", ">u4"), ("mid", ">u2"), ("hi", ">u2"), ("seq", ">u2"), ("producer", "V6")])


def uuid_fields(uuids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(producer, clock, flags)`` of ``n`` packed UUIDs (``uuids``: n × 16 uint8):
    the ProducerID as a big-endian int64, the Clock as uint64 (`parse_uuid`'s)."""
    f = np.ascontiguousarray(uuids).view(_UUID_FIELDS).reshape(-1)
    clock = (f["low"].astype(np.uint64) << np.uint64(4)) | (f["mid"].astype(np.uint64) << np.uint64(36)) \
        | ((f["hi"].astype(np.uint64) & np.uint64(0x0FFF)) << np.uint64(52)) \
        | ((f["seq"].astype(np.uint64) >> np.uint64(10)) & np.uint64(0xF))
    padded = np.zeros((len(f), 8), dtype=np.uint8)
    padded[:, 2:] = uuids[:, 10:16]
    producer = padded.view(">i8").reshape(-1).astype(np.int64)
    return producer, clock, (f["seq"] & 0x3FF).astype(np.int64)


def scan_ndjson(buf: bytes, base: int, framing: NDJSONFraming, values: bool = True) -> tuple[Columns, int]:
    """Scan the complete lines of ``buf`` (journal offset ``base``).

    Returns the columns and how many bytes were consumed (through the last newline);
    the caller keeps the rest for the next call. Lines whose UUID field is malformed
    are dropped and reported in ``errors`` (as the per-line decoder does). With
    ``values`` False the values are left out (every value empty): a pass that only
    sequences needs positions and UUIDs, and copying the values is ≈ 1/4 of a scan.
    """
    data = np.frombuffer(buf, dtype=np.uint8)
    newlines = newline_positions(data)
    n = len(newlines)
    consumed = int(newlines[-1]) + 1 if n else 0
    starts = np.empty(n, dtype=np.int64)
    starts[:1] = 0
    starts[1:] = newlines[:-1] + 1
    uuids, has_uuid, text = _fast_uuids(data, starts, newlines, framing._prefix)
    keep, errors = _slow_uuids(buf, base, starts, newlines, uuids, has_uuid, framing)
    lengths = newlines - starts
    if not values:
        kept = np.zeros(0, dtype=np.uint8)
    elif keep is not None:
        kept = _drop_lines(data, starts, newlines, keep)
    else:
        # memchr speed; the torn tail past ``consumed`` has no newline, so it ends the
        # result and ``count`` leaves it out without slicing (a copy of the block) first.
        kept = np.frombuffer(buf.replace(b"\n", b""), dtype=np.uint8, count=consumed - n)
    if keep is not None:
        starts, newlines, lengths = starts[keep], newlines[keep], lengths[keep]
        uuids, has_uuid = uuids[keep], has_uuid[keep]
    offsets = np.zeros(len(starts) + 1, dtype=np.int32)
    if values:
        np.cumsum(lengths, out=offsets[1:])
    return Columns(starts + base, newlines + 1 + base, uuids, has_uuid, kept, offsets, errors,
                   text if keep is None else None), consumed


def newline_positions(data: np.ndarray) -> np.ndarray:
    """Indices of every ``\\n`` in ``data`` (int64, ascending). Lines are long, so
    few 8-byte words hold a newline: ``flatnonzero`` runs over the words (8× fewer
    than the bytes) and a word's newline is its lowest set byte. A block with a
    word holding two (lines under 8 bytes) takes the per-byte ``flatnonzero``."""
    eq = data == 0x0A
    whole = len(eq) & ~7
    words = eq[:whole].view("<u8")  # little-endian: a word's lowest byte comes first
    at = np.flatnonzero(words != 0)
    held = words[at]
    low = held & (~held + np.uint64(1))
    if (held != low).any():
        return np.flatnonzero(eq)
    # ``low`` is 2**(8·byte): its float exponent names the byte.
    head = at * 8 + (np.frexp(low.astype(np.float64))[1] - 1) // 8
    tail = np.flatnonzero(eq[whole:])
    return np.concatenate([head, tail + whole]) if len(tail) else head


def _template(prefix: bytes, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The fixed bytes of a fast-path line head (prefix, four dashes, closing quote)
    as ``(mask, want)`` uint64 words: a head fits where ``words & mask == want``."""
    plen = len(prefix)
    want, mask = np.zeros(width, np.uint8), np.zeros(width, np.uint8)
    want[:plen], mask[:plen] = np.frombuffer(prefix, np.uint8), 0xFF
    want[plen + _DASH_AT], mask[plen + _DASH_AT] = 0x2D, 0xFF
    want[plen + 36], mask[plen + 36] = 0x22, 0xFF
    return mask.view(np.uint64), want.view(np.uint64)


def _fast_uuids(data: np.ndarray, starts: np.ndarray, newlines: np.ndarray,
                prefix: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """UUIDs of lines that begin ``{"UUID":"<36 chars>"`` followed by ``,`` or ``}``
    and end with ``}`` (all lines at once): the per-line decoder's fast path.
    Lines off it are left to the per-line rules (`_slow_uuids`). The third result is
    the UUIDs' text, taken from the lines when all are on the path and lowercase."""
    n, plen = len(starts), len(prefix)
    width = -(-(plen + 38) // 8) * 8  # the head, in whole 8-byte words
    rows = np.flatnonzero((newlines - starts) > plen + 37)
    if not len(rows):
        return np.zeros((n, 16), dtype=np.uint8), np.zeros(n, dtype=bool), None
    # One gather of each line's head through a sliding-window view (a row copy per
    # line), checked a word at a time against the fixed bytes (those past the head
    # are not looked at: zeros where a short last line ends the block).
    at = starts[rows]
    padded = data if at[-1] + width <= len(data) else np.concatenate([data, np.zeros(width, np.uint8)])
    heads = np.lib.stride_tricks.sliding_window_view(padded, width)[at]
    words = heads.view(np.uint64)
    mask, want = _template(prefix, width)
    off = (words[:, 0] & mask[0]) ^ want[0]
    for k in range(1, len(mask)):
        off |= (words[:, k] & mask[k]) ^ want[k]
    sep = heads[:, plen + 37]
    ok = (off == 0) & ((sep == 0x2C) | (sep == 0x7D)) & (data[newlines[rows] - 1] == 0x7D)
    digits = heads.take(_HEX_COLS + plen, axis=1)
    if not ok.all():
        rows, digits = rows[ok], digits[ok]
    try:  # binascii in C; a non-hex digit anywhere sends the block to the table
        packed = np.frombuffer(binascii.unhexlify(digits.tobytes()), np.uint8).reshape(-1, 16)
    except binascii.Error:
        nibbles = _HEX[digits]
        hexed = (nibbles != 255).all(axis=1)
        rows, nibbles = rows[hexed], nibbles[hexed]
        packed = (nibbles[:, 0::2] << 4) | nibbles[:, 1::2]
    has_uuid = np.zeros(n, dtype=bool)
    has_uuid[rows] = True
    if len(rows) == n:  # every line on the fast path: the parsed UUIDs are the column
        return packed, has_uuid, _lower_text(heads[:, plen:plen + 36], digits)
    uuids = np.zeros((n, 16), dtype=np.uint8)
    uuids[rows] = packed
    return uuids, has_uuid, None


def _lower_text(text: np.ndarray, digits: np.ndarray) -> np.ndarray | None:
    """``text`` (n × 36) as a contiguous copy if its ``digits`` (n × 32 hex, checked) are
    all lowercase — bit 0x20 is set in ``0-9a-f`` and clear in ``A-F`` — else None."""
    if not len(digits) or np.bitwise_and.reduce(digits.view(np.uint64), axis=None) & _LOWER != _LOWER:
        return None
    return np.ascontiguousarray(text)


def _slow_uuids(buf: bytes, base: int, starts: np.ndarray, newlines: np.ndarray, uuids: np.ndarray,
                has_uuid: np.ndarray, framing: NDJSONFraming) -> tuple[np.ndarray | None, tuple[FramingError, ...]]:
    """Apply the per-line rules to lines off the fast path; None or a keep-mask."""
    slow = np.flatnonzero(~has_uuid)
    if not len(slow):
        return None, ()
    decoder, keep, errors = framing.decoder(), None, []
    for i in slow.tolist():
        begin, end = int(starts[i]), int(newlines[i]) + 1
        found = decoder._slow_uuid(buf[begin:end - 1], base + begin, base + end)
        if isinstance(found, FramingError):
            keep = np.ones(len(starts), dtype=bool) if keep is None else keep
            keep[i] = False
            errors.append(found)
        elif found is not None:
            uuids[i] = np.frombuffer(found, np.uint8)
            has_uuid[i] = True
    return keep, tuple(errors)


def _drop_lines(data: np.ndarray, starts: np.ndarray, newlines: np.ndarray, keep: np.ndarray) -> np.ndarray:
    return np.concatenate([data[s:e] for s, e in zip(starts[keep].tolist(), newlines[keep].tolist())]
                          or [np.zeros(0, np.uint8)])


_FNV_OFFSET, _FNV_PRIME = np.uint32(0x811C9DC5), np.uint32(0x01000193)


def fnv1a32_many(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """`herald.message.mapping.fnv1a32` of every ``data[offsets[i]:offsets[i+1]]``
    (uint32), one numpy pass per byte position of the longest key. Up to the
    shortest key's length every key takes part, so those passes skip the search
    for keys still going; keys all of one length (message ids: the sink's usual
    case) are the rows of one matrix, whose columns need no gather (6.5× faster
    for 36-byte keys)."""
    begins, lengths = offsets[:-1].astype(np.int64), np.diff(offsets).astype(np.int64)
    h = np.full(len(lengths), _FNV_OFFSET, dtype=np.uint32)
    if not len(lengths):
        return h
    shortest, longest = int(lengths.min()), int(lengths.max())
    if shortest == longest:
        keys = data[begins[0]:begins[0] + shortest * len(lengths)].reshape(len(lengths), shortest)
        for k in range(shortest):
            h ^= keys[:, k]
            h *= _FNV_PRIME
        return h
    for k in range(shortest):
        h ^= data[begins + k]
        h *= _FNV_PRIME
    for k in range(shortest, longest):
        live = np.flatnonzero(lengths > k)
        h[live] = (h[live] ^ data[begins[live] + k]) * _FNV_PRIME
    return h
