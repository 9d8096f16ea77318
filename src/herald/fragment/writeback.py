"""Starting the write-back of spool bytes that only the commit log has made durable.

A round logged in `herald.fragment.commit_log` leaves its spool's bytes dirty in the
page cache; they reach the disk when the kernel gets to them (after some 30 s) or
when the log's checkpoint syncs them, tens of MiB at once. Either way the device
then has a burst to write, and the log fdatasyncs queued behind it wait for it:
measured, a checkpoint's fsync of 20 MiB of dirty spool took 14-24 ms, against
1.5-2 ms when the write-back had been started as the bytes came. So each time a
spool or commits file fills another `WRITEBACK_BYTES`, its write-back is started
with ``sync_file_range(SYNC_FILE_RANGE_WRITE)``: asynchronous, it waits for
nothing and makes nothing durable. Durability is unchanged: the log's record
stays the only proof until the checkpoint's own sync [I-APPEND-3].

    if (span := chunks_completed(offset_written, size_written)) is not None:
        write_back_range(fd, *span)

Linux only (a no-op elsewhere). Called on the commit log's helper thread
(`herald.fragment.commit_log_worker`), since the call may block while the file
system allocates the blocks.
"""

from __future__ import annotations

import ctypes
import ctypes.util

__all__ = ["WRITEBACK_BYTES", "chunks_completed", "write_back_range", "written_back"]

#: Write-back starts once per this many bytes of a file: often enough that a
#: checkpoint finds little dirty, rarely enough that the call costs nothing per round.
WRITEBACK_BYTES = 1 << 20
_SYNC_FILE_RANGE_WRITE = 2
_SYNC_FILE_RANGE_WAIT_BEFORE, _SYNC_FILE_RANGE_WAIT_AFTER = 1, 4

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_sync_file_range = getattr(_libc, "sync_file_range", None)
if _sync_file_range is not None:
    _sync_file_range.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    _sync_file_range.restype = ctypes.c_int


def chunks_completed(at: int, size: int, chunk: int = WRITEBACK_BYTES) -> tuple[int, int] | None:
    """Bytes ``[at, at + size)`` were just written to a file: the span ``(lo, hi)`` of
    the whole chunks of ``chunk`` bytes (`WRITEBACK_BYTES` unless a caller tunes it)
    they complete, whose write-back may start; or None (no chunk was completed)."""
    lo = at // chunk * chunk
    hi = (at + size) // chunk * chunk
    return (lo, hi) if hi > lo else None


def write_back_range(fd: int, lo: int, hi: int) -> None:
    """Start writing ``[lo, hi)`` of ``fd`` back to the disk, without waiting. Errors
    are ignored: a write-back that fails is reported by the sync that the
    checkpoint makes later, as for any write-back."""
    if _sync_file_range is not None:
        _sync_file_range(fd, lo, hi - lo, _SYNC_FILE_RANGE_WRITE)


def written_back(fd: int, lo: int, hi: int) -> None:
    """Write ``[lo, hi)`` of ``fd`` back and wait until the device has it (not
    durably: no cache flush, no metadata), so that a large write reaches the device
    in pieces of the caller's size rather than as one burst that every fdatasync
    issued meanwhile queues behind. Errors are ignored, as in `write_back_range`."""
    if _sync_file_range is not None:
        flags = _SYNC_FILE_RANGE_WAIT_BEFORE | _SYNC_FILE_RANGE_WRITE | _SYNC_FILE_RANGE_WAIT_AFTER
        _sync_file_range(fd, lo, hi - lo, flags)
