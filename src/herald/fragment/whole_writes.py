"""Writes that never stop short: `pwrite_all`.

``pwritev`` may write less than asked (a signal, a disk running out part-way) and
still succeed; a caller that took it for a whole write would acknowledge bytes never
written [I-APPEND-3]. Every spool, commits file and commit log write goes through
here. Its own module because the round, the spool and the commit log's helper all
need it, and each imports the others' users.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["pwrite_all", "pwrite_each"]

IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024

try:  # the optional C extension (see its source): every write with the GIL dropped once
    from herald.fragment._spool_native import pwrite_each as _pwrite_each
except ImportError:
    _pwrite_each = None


def pwrite_all(fd: int, buffers: Sequence[bytes], offset: int) -> None:
    """Write ``buffers`` back to back at ``offset``, with as few syscalls as the
    kernel allows (no join: a group may be 64 MiB). Finishes a short write: one that
    runs out of disk part-way returns a short count rather than failing, and taken
    for a whole one it would acknowledge bytes never written."""
    for i in range(0, len(buffers), IOV_MAX):
        batch = buffers[i:i + IOV_MAX] if len(buffers) > IOV_MAX else buffers  # nearly always one call
        size = sum(map(len, batch))
        done = os.pwritev(fd, batch, offset)
        if done < size:  # rare (a signal, a nearly full disk): the rest one call at a time
            rest = memoryview(b"".join(batch))[done:]
            while rest:
                n = os.pwrite(fd, rest, offset + size - len(rest))
                rest = rest[n:]
        offset += size


def pwrite_each(jobs: Sequence[tuple[int, Sequence[bytes], int]]) -> list[int]:
    """`pwrite_all` of each ``(fd, buffers, offset)`` of ``jobs``; each one's errno
    (0: written in full). A failed write does not stop the others. One call into
    the C extension where it is built (a round of 16 journals writes 16 spools
    while its log syncs: one GIL hand-off instead of one per write), else a loop."""
    if _pwrite_each is not None:
        return _pwrite_each(jobs)
    errors = []
    for fd, buffers, offset in jobs:
        try:
            pwrite_all(fd, buffers, offset)
        except OSError as err:
            errors.append(err.errno or 0)
        else:
            errors.append(0)
    return errors
