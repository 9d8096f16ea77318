"""Persisting a completed spool to a store (gazette-facts §4.6).

A fragment's content name is derived from its range and SHA1, so the same name
always means the same bytes: if the name already exists in the store (another
replica got there first, or an earlier attempt uploaded it before crashing) there
is nothing to do. Otherwise the spool is compressed and uploaded: straight into the
store's own temp file when it is a local directory (the compressed bytes hit the
disk once, where a scratch file and its copy wrote them twice, beside the appends'
fdatasyncs), else into a temp file beside the spool.

    >>> persisted = persist(store, spool_fragment, spool_path)  # doctest: +SKIP
    >>> persisted.store == store.url and persisted.mod_time > 0  # doctest: +SKIP
    True

Blocking (compression and upload): the broker runs it in an executor. Idempotent:
retry freely after any failure.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from dataclasses import replace
from typing import BinaryIO

from herald.fragment.codecs import compress_file
from herald.fragment.stores import Store
from herald.fragment.writeback import chunks_completed, write_back_range
from herald.protocol.fragment import Fragment
from herald.protocol.journal import CompressionCodec

__all__ = ["lower_thread_priority", "persist"]

log = logging.getLogger(__name__)


def persist(store: Store, fragment: Fragment, local_spool_path: str | os.PathLike,
            codec: CompressionCodec | None = None) -> Fragment:
    """Put the uncompressed spool file ``local_spool_path`` holding ``fragment`` into
    ``store``, compressed with ``codec`` (default: the fragment's own).

    Returns the fragment as the store now lists it: ``store`` set to the store URL
    and ``mod_time`` to the stored file's modification time. Raises whatever the
    store raises; nothing partial is left behind in a ``file://`` store.
    """
    if codec is not None and codec is not fragment.codec:
        fragment = replace(fragment, codec=codec)
    path = fragment.content_path
    if store.exists(path):
        log.debug("store=%s already has %s; skipping upload", store.url, path)
    elif fragment.codec is CompressionCodec.NONE:
        store.put(path, local_spool_path)
    else:
        _put_compressed(store, path, os.fspath(local_spool_path), fragment.codec)
    return replace(fragment, store=store.url, mod_time=store.mod_time(path))


def _put_compressed(store: Store, path: str, spool_path: str, codec: CompressionCodec) -> None:
    """Compress into the store's own temp file where it has one (a ``file://``
    store: the compressed bytes are written once), else next to the spool (same
    disk, already sized for it), then upload and delete."""
    directory = os.path.dirname(os.path.abspath(spool_path))
    store.put_written(path, lambda out: compress_file(spool_path, _WritingBack(out), codec), directory)


class _WritingBack:
    """A file being written whose write-back starts every `WRITEBACK_BYTES`
    (`herald.fragment.writeback`). Without it, a 128 MiB SNAPPY fragment's ~60 MB
    reached the disk in one burst at the store's fsync (30-90 ms, measured), and
    every append's fdatasync queued behind that burst: 13-16 % of one 1 MiB
    writer's appends took over 8 ms, half of its time. Durability is unchanged:
    the store still fsyncs the file before it names it."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._written = 0
        try:
            self._fd: int | None = out.fileno()
        except (AttributeError, OSError, ValueError):  # not a plain file: nothing to start
            self._fd = None

    def write(self, data: bytes) -> int:
        n = self._out.write(data)
        at, self._written = self._written, self._written + len(data)
        if self._fd is not None and (span := chunks_completed(at, len(data))) is not None:
            self._out.flush()  # the buffered bytes must be in the page cache first
            write_back_range(self._fd, *span)
        return n


#: How much lower than the appends a persisting thread runs (a nice increment, as
#: RocksDB lowers its compaction threads): compressing and uploading a rolled
#: spool is work that may wait, an append's sync is what a writer waits on.
PERSIST_NICE = 5


def lower_thread_priority(nice: int = PERSIST_NICE) -> None:
    """Run the calling thread (on Linux, ``setpriority`` of a thread id applies to
    that thread alone) at ``nice`` more than its process: use as the initializer of
    the persisting threads. Best effort: a platform without it leaves them as they are."""
    with contextlib.suppress(AttributeError, OSError):
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
