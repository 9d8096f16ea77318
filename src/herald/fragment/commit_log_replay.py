"""Replaying the commit log into the spools at start, before they recover.

Every intact record (`herald.fragment.commit_log`) is written back where the round
that logged it wrote it: the group's bytes into the spool file, the commit line into
the commits file. Segments are replayed oldest first, so a later record wins where
two wrote the same place (a group that failed and was written over). A spool whose
files are gone was persisted and removed after the round: its records are skipped.
Every file written is made durable (one syncfs where `herald.fragment.syncfs`
trusts it, else an fsync each) before the caller deletes the segments, so a crash
during replay leaves the segments to replay again: the same bytes at the same places.

    replayed = replay_segments(data_dir, segment_paths)

Then `herald.fragment.spool_recovery` verifies each spool against its commit lines,
as after any restart [I-FRAG-2]. Blocking.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from herald.durable import fsync_directory
from herald.fragment.commit_log_records import LogRecord, decode_records
from herald.fragment.commit_log_worker import syncfs_of
from herald.fragment.spool import COMMITS_SUFFIX, SPOOL_SUFFIX
from herald.fragment.syncfs import syncs_whole_file_system

__all__ = ["replay_segments"]

log = logging.getLogger(__name__)


def replay_segments(data_dir: Path, segments: list[Path]) -> int:
    """Write every intact record of ``segments`` (oldest first) into its spool and
    fsync what was written; how many records were replayed."""
    # One syncfs where it is trusted: a restart after 10,000 journals' appends
    # touches 20,000 files, and an fsync each took longer than a broker may take to start.
    whole = bool(segments) and syncs_whole_file_system(data_dir)
    files = _OpenFiles(sync_each=not whole)
    replayed = 0
    try:
        for segment in segments:
            for record in decode_records(segment.read_bytes()):
                replayed += _replay(data_dir, record, files)
        files.sync()
        if whole:
            syncfs_of(data_dir)
        else:
            for directory in {path.parent for path in files.written}:
                fsync_directory(directory)
    finally:
        files.close()
    if replayed:
        log.info("replayed %d commit log records into %d files", replayed, len(files.written))
    return replayed



def _replay(data_dir: Path, record: LogRecord, files: _OpenFiles) -> int:
    stem = data_dir / record.directory / f"{record.begin:016x}"
    data_fd = files.get(stem.with_name(stem.name + SPOOL_SUFFIX))
    commits_fd = files.get(stem.with_name(stem.name + COMMITS_SUFFIX))
    if data_fd < 0 or commits_fd < 0:
        return 0  # persisted and removed: the store holds the fragment
    if record.data:
        os.pwrite(data_fd, record.data, record.data_at)
    os.pwrite(commits_fd, record.line, record.line_at)
    return 1


#: Files held open at once by a replay: past this, those written are synced and closed.
MAX_OPEN_FILES = 256


class _OpenFiles:
    """The spool files replay writes, opened once each while few (-1: gone), and
    fsync'd before they are closed unless one syncfs follows (``sync_each``)."""

    def __init__(self, sync_each: bool) -> None:
        self.fds: dict[Path, int] = {}
        self.written: list[Path] = []
        self.sync_each = sync_each

    def get(self, path: Path) -> int:
        fd = self.fds.get(path)
        if fd is None:
            if len(self.fds) >= MAX_OPEN_FILES:  # thousands of journals: stay far below the limit
                self.sync()
                self.close()
            try:
                fd = os.open(path, os.O_WRONLY)
            except FileNotFoundError:
                fd = -1
            self.fds[path] = fd
        return fd

    def sync(self) -> None:
        for path, fd in self.fds.items():
            if fd >= 0:
                if self.sync_each:
                    os.fsync(fd)
                self.written.append(path)

    def close(self) -> None:
        fds, self.fds = self.fds, {}
        for fd in fds.values():
            if fd >= 0:
                os.close(fd)
