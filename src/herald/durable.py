"""Making names durable, not just bytes: fsync of directories.

``fdatasync`` makes a file's bytes durable, but a new name (a created file, a
rename, a new directory) is durable only once its *directory* is fsynced — POSIX's
minimum, which PostgreSQL and SQLite assume and which a power cut exposes (a
``kill -9`` never does: the page cache survives it). Every name an acknowledgement
depends on goes through here before the acknowledgement is sent. Blocking.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fsync_directory", "make_durable_dirs"]


def fsync_directory(directory: str | Path) -> None:
    """Make the entries of ``directory`` (creates, renames, unlinks) durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_durable_dirs(directory: Path) -> None:
    """``mkdir -p`` whose every new level survives a power cut: each directory
    created is fsynced in its parent (existing levels cost nothing). A level whose
    parent could not be fsynced (out of descriptors, EIO) is removed again before
    the error is raised, so a retry does not take it for an already durable one."""
    missing = []
    level = directory
    while not level.exists():
        missing.append(level)
        level = level.parent
    for new in reversed(missing):
        new.mkdir(exist_ok=True)
        try:
            fsync_directory(new.parent)
        except OSError:
            new.rmdir()  # still empty: nothing below it was created yet
            raise
