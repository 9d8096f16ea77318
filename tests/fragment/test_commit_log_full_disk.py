"""The commit log on a nearly full disk: zeros it makes ahead of need never keep the
last bytes that an append still fits in (a broker answered 503 to a small append
that fitted, when the log's growth ahead won the race for the free space).

A real 2 MiB tmpfs (`herald.testing.small_disk`), filled by a ballast file."""

from __future__ import annotations

import errno
import os

import pytest

from herald.fragment.commit_log import CommitLog
from herald.fragment.commit_log_worker import room_for, write_zeros
from herald.testing.small_disk import fill_disk


def _free(path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def test_zeros_cut_short_by_a_full_disk_are_given_back(small_disk):
    fill_disk(small_disk, leave=64 << 10)
    free = _free(small_disk)
    path = small_disk / "segment"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        with pytest.raises(OSError) as failed:
            write_zeros(fd, 0, 1 << 20, 256 << 10)  # more than the disk has
        assert failed.value.errno == errno.ENOSPC
        assert os.fstat(fd).st_size == 0
    finally:
        os.close(fd)
    assert _free(small_disk) == free


def test_growth_ahead_leaves_a_nearly_full_disk_to_the_appends(small_disk):
    log = CommitLog.open(small_disk / "data")
    try:
        fill_disk(small_disk, leave=64 << 10)
        free = _free(small_disk)
        assert not room_for(log.directory, 64 << 10)
        assert not log.takes_lone(100)  # the first segment has no room yet: growth is asked
        log.drain()  # the helper thread has done whatever it was asked
        assert _free(small_disk) == free
        assert os.stat(log.segment).st_size == 0
    finally:
        log.close()


def test_growth_ahead_still_runs_where_there_is_room(tmp_path):
    log = CommitLog.open(tmp_path / "data")
    try:
        assert room_for(log.directory, 1 << 20)
        assert not log.takes_lone(100)
        log.drain()
        assert os.stat(log.segment).st_size > 0
        assert log.takes_lone(100)  # grown: a lone round is logged now
    finally:
        log.close()
