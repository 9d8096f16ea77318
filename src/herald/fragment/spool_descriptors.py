"""A spool's two files and their descriptors (`herald.fragment.spool.Spool`).

The files are created at the spool's first write (their names made durable before
any append to them counts), and their descriptors are opened when used and closed
when idle by the broker-wide `herald.fragment.fdpool`, pinned while a write, sync or
commit uses them: an idle journal holds none (issue 19 §1). A mixin of `Spool`,
kept apart so that the spool's own module is about its bytes and commits.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from herald.durable import fsync_directory, make_durable_dirs
from herald.fragment.fdpool import DescriptorPool, retry_out_of_descriptors
from herald.fragment.spool_recycling import take

__all__ = ["SpoolDescriptors"]


class SpoolDescriptors:
    """The descriptors of a `Spool`'s data and commits files (see the module doc)."""

    directory: Path
    path: Path
    commits_path: Path
    _pool: DescriptorPool
    _created: bool
    _fd: int
    _commits_fd: int
    _data_allocated: int


    @contextlib.contextmanager
    def holding_descriptors(self) -> Iterator[None]:
        """Keep both files open for the block: a write and the fdatasync that makes it
        durable must use one descriptor, never one closed and reopened in between.
        Creates the files on first use. Blocking; raises DescriptorsExhaustedError."""
        self.pin()
        try:
            yield
        finally:
            self.unpin()

    def pin(self) -> None:
        """`holding_descriptors` across calls (a group's round); `unpin` releases."""
        if not self._created:
            self._create_files()
        self._pool.pin(self)

    def pin_if_open(self) -> bool:
        """Pin the descriptors only if the files exist and are open now, so never
        blocking on open(2) (a caller on the event loop); `unpin` releases."""
        return self._created and self._pool.pin_if_open(self)

    def unpin(self) -> None:
        self._pool.unpin(self)

    def _create_files(self) -> None:
        def create() -> int:
            make_durable_dirs(self.directory)
            reused = take(self.directory, self.path)  # appends then overwrite written blocks
            for path in (self.path, self.commits_path):
                os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
            # Both names must survive a power cut before any append to them is acknowledged.
            fsync_directory(self.directory)
            return reused

        self._data_allocated = retry_out_of_descriptors("creating a spool", create, self._pool)
        self._created = True

    def open_descriptors(self) -> int:
        """Open both (existing) files; called by the pool with its lock held."""
        fd = os.open(self.path, os.O_RDWR)
        try:
            commits_fd = os.open(self.commits_path, os.O_WRONLY)
        except OSError:
            os.close(fd)
            raise
        self._fd, self._commits_fd = fd, commits_fd
        return 2

    def close_descriptors(self) -> None:
        """Close both descriptors; idempotent. Closing a number twice could close
        whatever file the kernel handed that number to in between, so the numbers
        are cleared first."""
        fds, self._fd, self._commits_fd = (self._fd, self._commits_fd), -1, -1
        for fd in fds:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
