"""The broker process's heap: keep freed memory for the next large append body.

Process-wide C-library tuning, set once when a broker starts to serve.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util

__all__ = ["keep_freed_body_memory"]

#: glibc's ``mallopt`` parameters (malloc.h) and what `keep_freed_body_memory` sets.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: Free memory the heap keeps rather than hands back: a few MiB bodies in flight.
TRIM_THRESHOLD_BYTES = 32 << 20
#: Allocations from this size get their own mapping (returned to the system when freed).
MMAP_THRESHOLD_BYTES = 4 << 20


def keep_freed_body_memory() -> bool:
    """Have glibc's malloc keep freed memory for the next large body (process-wide;
    True if set). By default it hands the top of the heap back to the kernel once
    2 MiB of it are free (and before that maps anything over 128 KiB on its own),
    so with 1 MiB bodies every body's buffer was fresh memory: `perf` put 23 % of
    the event loop's CPU under 4 writers of 1 MiB in page faults and 8 % in ``brk``.
    Here the heap keeps up to `TRIM_THRESHOLD_BYTES` free, and only allocations of
    `MMAP_THRESHOLD_BYTES` or more are mapped apart. Other C libraries: a no-op."""
    with contextlib.suppress(AttributeError, OSError, TypeError):
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
        return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
                    and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
    return False
