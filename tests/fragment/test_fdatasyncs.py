"""The fdatasync helpers (herald.fragment.fdatasyncs): a sync reports its own
failure, and syncs started together run side by side, not in a queue."""

from __future__ import annotations

import errno
import os
import threading

import pytest

from herald.fragment.fdatasyncs import SLOW_SYNC_S, SyncAverage, SyncHelpers, fdatasync_twice


def test_a_sync_returns_none_once_the_file_is_synced(tmp_path):
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        os.write(fd, b"x")
        assert SyncHelpers().fdatasync(fd).exception() is None
    finally:
        os.close(fd)


def test_a_failed_sync_reports_its_error_and_only_its_own(tmp_path):
    helpers = SyncHelpers()
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    r, w = os.pipe()
    try:
        good, bad = helpers.fdatasync(fd), helpers.fdatasync(r)  # a pipe cannot be synced
        error = bad.exception()
        assert isinstance(error, OSError) and error.errno == errno.EINVAL
        assert good.exception() is None
        assert bad.exception() is error  # asking again does not wait or change it
    finally:
        for each in (fd, r, w):
            os.close(each)


def test_syncs_started_together_each_get_a_thread(tmp_path):
    """Up to the limit, every outstanding sync has a thread (a round of many
    journals must not sync them one after another)."""
    helpers = SyncHelpers(max_threads=4)
    fds = [os.open(tmp_path / f"f{i}", os.O_RDWR | os.O_CREAT) for i in range(6)]
    before = threading.active_count()
    try:
        syncs = [helpers.fdatasync(fd) for fd in fds]
        assert all(sync.exception() is None for sync in syncs)
        assert 1 <= threading.active_count() - before <= 4
    finally:
        for fd in fds:
            os.close(fd)


def test_sync_average_turns_slow_once_slow_syncs_dominate_and_back_only_once_they_are_quick():
    average = SyncAverage()
    assert not average.slow
    for _ in range(16):  # a few slow syncs among quick ones: not yet
        average.add(SLOW_SYNC_S * 2)
    assert not average.slow
    for _ in range(200):
        average.add(SLOW_SYNC_S * 4)
    assert average.slow
    for _ in range(400):  # quicker, but not quick: still slow (no switching back and forth)
        average.add(SLOW_SYNC_S * 0.7)
    assert average.slow
    for _ in range(400):
        average.add(SLOW_SYNC_S / 10)
    assert not average.slow


def test_fdatasync_twice_returns_once_both_synced_and_raises_what_failed(tmp_path):
    """A round of many journals syncs its log twice at once (`fdatasync_twice`): a
    file it wrote is synced; a descriptor that cannot be synced raises, after the
    helper's call returned too (its caller may close the descriptor next)."""
    path = tmp_path / "log"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        os.pwrite(fd, b"record", 0)
        fdatasync_twice(fd)
    finally:
        os.close(fd)
    with pytest.raises(OSError) as raised:
        fdatasync_twice(fd)  # closed: both calls fail
    assert raised.value.errno == errno.EBADF
    assert path.read_bytes() == b"record"


def test_a_native_sync_returns_none_once_synced_and_a_failed_one_its_own_error(tmp_path):
    """The C extension's `start_fdatasync` (a streamed body's data sync, never taking
    the GIL) keeps `PendingSync`'s contract: None, or the OSError it met, asked
    any number of times; one failing does not fail another."""
    native = pytest.importorskip("herald.fragment._spool_native", reason="the C extension is not built here")
    if not hasattr(native, "start_fdatasync"):
        pytest.skip("the C extension was built before start_fdatasync")
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    r, w = os.pipe()
    try:
        os.write(fd, b"x" * 4096)
        good, bad = native.start_fdatasync(fd), native.start_fdatasync(r)  # a pipe cannot be synced
        error = bad.exception()
        assert isinstance(error, OSError) and error.errno == errno.EINVAL
        assert bad.exception().errno == errno.EINVAL
        assert good.exception() is None and good.exception() is None
        dropped = native.start_fdatasync(fd)  # let go of unwaited: its thread frees what it shares
        del dropped
        assert native.start_fdatasync(fd).exception() is None
    finally:
        for each in (fd, r, w):
            os.close(each)


def test_a_native_sync_refuses_what_is_not_a_descriptor():
    native = pytest.importorskip("herald.fragment._spool_native", reason="the C extension is not built here")
    if not hasattr(native, "start_fdatasync"):
        pytest.skip("the C extension was built before start_fdatasync")
    with pytest.raises(ValueError):
        native.start_fdatasync(-1)
    with pytest.raises(TypeError):
        native.start_fdatasync("3")


def test_a_native_write_back_reports_nothing_and_leaves_the_next_sync_whole(tmp_path):
    """`start_writeback` (a streamed body's pages sent to the device as they arrive)
    waits for nothing and raises nothing, even where sync_file_range fails (a pipe,
    a closed descriptor, an empty range); a sync after it returns as any sync, and
    the file holds exactly what was written."""
    native = pytest.importorskip("herald.fragment._spool_native", reason="the C extension is not built here")
    if not hasattr(native, "start_writeback"):
        pytest.skip("the C extension was built before start_writeback")
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    r, w = os.pipe()
    closed = os.open(tmp_path / "g", os.O_RDWR | os.O_CREAT)
    os.close(closed)
    try:
        os.write(fd, b"y" * (256 << 10))
        assert native.start_writeback(fd, 0, 128 << 10) is None
        for args in ((r, 0, 4096), (closed, 0, 4096), (fd, 4096, 4096), (-1, 0, 4096)):
            assert native.start_writeback(*args) is None
        assert native.start_fdatasync(fd).exception() is None
    finally:
        for each in (fd, r, w):
            os.close(each)
    assert (tmp_path / "f").read_bytes() == b"y" * (256 << 10)
    with pytest.raises(TypeError):
        native.start_writeback(fd, "0", 4096)
