"""The commit log's record format: how one group is framed in a segment and read back.

Each record is a frame (payload length, CRC32C of the payload) around a head (spool
begin, data and line offsets, directory and line lengths), the spool's directory,
the commit line and, for a group under `herald.fragment.commit_log.INLINE_BYTES`,
its bytes. A zero, short or CRC-failing frame ends a segment's intact records: a
crash tore it, and none of its groups was acknowledged.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import crc32c

__all__ = ["LogRecord", "decode_records", "frame"]

_FRAME = struct.Struct("<II")  # payload length, CRC32C of the payload
_HEAD = struct.Struct("<QQQHH")  # spool begin, data offset, line offset, directory and line lengths


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One group as the log keeps it (see the module doc)."""

    directory: str  # the spool's directory, relative to the data dir
    begin: int      # the spool's begin offset (its file name)
    data_at: int    # where ``data`` goes in the spool file
    line_at: int    # where ``line`` goes in the commits file
    line: bytes
    data: bytes     # empty when the group's bytes were synced in the spool itself


def frame(directory: bytes, begin: int, data_at: int, line_at: int, line: bytes,
          data: Sequence[bytes]) -> list[bytes]:
    """A record's buffers, ready for one ``pwritev`` (the bodies are not copied)."""
    head = _HEAD.pack(begin, data_at, line_at, len(directory), len(line)) + directory + line
    crc = crc32c.crc32c(head)
    size = len(head)
    for part in data:
        crc = crc32c.crc32c(part, crc)
        size += len(part)
    return [_FRAME.pack(size, crc), head, *data]


def decode_records(buffer: bytes) -> Iterator[LogRecord]:
    """The intact records at the start of ``buffer``; stops at the first frame that is
    zeros (never written), short or fails its CRC (torn by a crash)."""
    view, pos = memoryview(buffer), 0
    while pos + _FRAME.size <= len(view):
        size, crc = _FRAME.unpack_from(view, pos)
        payload = view[pos + _FRAME.size:pos + _FRAME.size + size]
        if size < _HEAD.size or len(payload) < size or crc32c.crc32c(payload) != crc:
            return
        begin, data_at, line_at, dir_len, line_len = _HEAD.unpack_from(payload)
        at = _HEAD.size
        directory = bytes(payload[at:at + dir_len]).decode()
        line = bytes(payload[at + dir_len:at + dir_len + line_len])
        yield LogRecord(directory, begin, data_at, line_at, line, bytes(payload[at + dir_len + line_len:]))
        pos += _FRAME.size + size
