"""One ``syncfs(2)`` for a sync round of many journals, where it is as durable as fdatasyncs.

A round of N journals' groups needs 2N fdatasyncs (each spool's data and commit
line), each a thread hand-off and a device cache flush. ``syncfs`` makes every
file of the file system durable in one call: it writes back and waits for all
dirty data and metadata, commits the file system's journal and flushes the device
— what the 2N fdatasyncs did, once. It is used only where that is known to hold:
Linux 5.8 or later (before, ``syncfs`` did not report write-back errors) and a
local journalling file system (ext4, xfs, btrfs). On FUSE, NFS and the like,
``syncfs`` may not reach the server's disk, so fdatasyncs stay.

    if syncs_whole_file_system(spool_directory):
        syncfs(fd)  # raises OSError like fdatasync would

Blocking; called from `herald.fragment.rounds`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import struct
from pathlib import Path

__all__ = ["syncfs", "syncs_whole_file_system"]

#: statfs(2) f_type of the file systems whose syncfs is a full, error-reporting sync.
TRUSTED_FILE_SYSTEMS = {0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs"}
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _kernel_reports_errors() -> bool:
    if platform.system() != "Linux":
        return False
    try:
        major, minor = (int(part) for part in platform.release().split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 8)


def _file_system_type(path: Path) -> int | None:
    buffer = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux
    if _libc.statfs(os.fsencode(path), buffer) != 0:
        return None
    return struct.unpack_from("l", buffer.raw)[0]


_TRUSTED: dict[Path, bool] = {}


def syncs_whole_file_system(directory: Path) -> bool:
    """Whether one ``syncfs`` on a file under ``directory`` is as durable as an
    fdatasync of every file there. Cached per directory once known (mounts do not
    move under a running broker); a directory not yet created is asked again."""
    known = _TRUSTED.get(directory)
    if known is not None:
        return known
    if not hasattr(_libc, "syncfs") or not _kernel_reports_errors():
        _TRUSTED[directory] = False
        return False
    kind = _file_system_type(directory)
    if kind is None:
        return False
    _TRUSTED[directory] = trusted = kind in TRUSTED_FILE_SYSTEMS
    return trusted


def syncfs(fd: int) -> None:
    """Make the whole file system of ``fd`` durable; OSError if any write-back failed."""
    if _libc.syncfs(fd) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
