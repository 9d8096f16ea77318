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
    newlines = np.flatnonzero(data == 0x0A)
    n = len(newlines)
    consumed = int(newlines[-1]) + 1 if n else 0
    starts = np.empty(n, dtype=np.int64)
    starts[:1] = 0
    starts[1:] = newlines[:-1] + 1
    uuids, has_uuid = _fast_uuids(data, starts, newlines, framing._prefix)
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
    return Columns(starts + base, newlines + 1 + base, uuids, has_uuid, kept, offsets, errors), consumed


def _fast_uuids(data: np.ndarray, starts: np.ndarray, newlines: np.ndarray,
                prefix: bytes) -> tuple[np.ndarray, np.ndarray]:
    """UUIDs of lines that begin ``{"UUID":"<36 chars>"`` followed by ``,`` or ``}``
    and end with ``}`` (all lines at once): the per-line decoder's fast path."""
    n, plen = len(starts), len(prefix)
    uuids = np.zeros((n, 16), dtype=np.uint8)
    fits = (newlines - starts) > plen + 37
    rows = np.flatnonzero(fits)
    if not len(rows):
        return uuids, np.zeros(n, dtype=bool)
    # One gather of each line's head (prefix, 36 characters, quote, separator)
    # through a sliding-window view: a row copy per line, no index per byte.
    heads = np.lib.stride_tricks.sliding_window_view(data, plen + 38)[starts[rows]]
    ok = (heads[:, :plen] == np.frombuffer(prefix, np.uint8)).all(axis=1)
    text = heads[:, plen:plen + 36]
    ok &= heads[:, plen + 36] == 0x22
    sep = heads[:, plen + 37]
    ok &= (sep == 0x2C) | (sep == 0x7D)
    ok &= data[newlines[rows] - 1] == 0x7D
    ok &= (text[:, _DASH_AT] == 0x2D).all(axis=1)
    rows, text = rows[ok], text[ok]
    digits = np.concatenate([text[:, a:b] for a, b in _HEX_RUNS], axis=1)
    try:  # binascii in C; a non-hex digit anywhere sends the block to the table
        uuids[rows] = np.frombuffer(binascii.unhexlify(digits.tobytes()), np.uint8).reshape(-1, 16)
    except binascii.Error:
        nibbles = _HEX[digits]
        hexed = (nibbles != 255).all(axis=1)
        rows, nibbles = rows[hexed], nibbles[hexed]
        uuids[rows] = (nibbles[:, 0::2] << 4) | nibbles[:, 1::2]
    has_uuid = np.zeros(n, dtype=bool)
    has_uuid[rows] = True
    return uuids, has_uuid


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
    (uint32), one numpy pass per byte position of the longest key."""
    begins, lengths = offsets[:-1].astype(np.int64), np.diff(offsets).astype(np.int64)
    h = np.full(len(lengths), _FNV_OFFSET, dtype=np.uint32)
    for k in range(int(lengths.max()) if len(lengths) else 0):
        live = np.flatnonzero(lengths > k)
        h[live] = (h[live] ^ data[begins[live] + k]) * _FNV_PRIME
    return h
