"""The power-cut file system drops exactly what was never made durable (herald.testing.powercut)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from herald.durable import fsync_directory


def write(path: Path, content: bytes, *, fsync: bool) -> None:
    with open(path, "wb") as f:
        f.write(content)
        f.flush()
        if fsync:
            os.fsync(f.fileno())


def test_unsynced_write_is_lost_on_cut_and_synced_write_survives(powercut):
    mnt = powercut.mount
    write(mnt / "log", b"durable\n", fsync=True)
    fsync_directory(mnt)
    with open(mnt / "log", "ab") as f:
        f.write(b"in the page cache only\n")
    assert (mnt / "log").read_bytes() == b"durable\nin the page cache only\n"  # served before the cut
    report = powercut.cut()
    assert (report.unsynced_bytes, report.unsynced_files, report.unsynced_entries) == (23, 1, 0)
    powercut.start()
    assert (mnt / "log").read_bytes() == b"durable\n"


def test_fdatasync_makes_writes_and_preallocation_durable(powercut):
    mnt = powercut.mount
    write(mnt / "commits", b"", fsync=True)
    fsync_directory(mnt)
    fd = os.open(mnt / "commits", os.O_RDWR)
    os.posix_fallocate(fd, 0, 1 << 16)
    os.pwrite(fd, b"synced\n", 0)
    os.fdatasync(fd)
    os.pwrite(fd, b"lost\n", 7)
    os.close(fd)
    powercut.cut()
    powercut.start()
    data = (mnt / "commits").read_bytes()
    assert len(data) == 1 << 16 and data.rstrip(b"\0") == b"synced\n"


def test_created_file_vanishes_on_cut_unless_its_directory_was_fsynced(powercut):
    mnt = powercut.mount
    write(mnt / "named", b"x", fsync=True)
    fsync_directory(mnt)
    write(mnt / "unnamed", b"y", fsync=True)  # its bytes are durable, its name is not
    assert sorted(os.listdir(mnt)) == ["named", "unnamed"]
    assert powercut.cut().unsynced_entries == 1
    powercut.start()
    assert os.listdir(mnt) == ["named"]
    assert (mnt / "named").read_bytes() == b"x"


def test_rename_and_unlink_are_undone_unless_the_directory_was_fsynced(powercut):
    mnt = powercut.mount
    for name in ("keep", "old"):
        write(mnt / name, name.encode(), fsync=True)
    fsync_directory(mnt)
    os.replace(mnt / "old", mnt / "new")
    os.unlink(mnt / "keep")
    assert powercut.cut().unsynced_entries == 3  # old gone, new added, keep gone
    powercut.start()
    assert sorted(os.listdir(mnt)) == ["keep", "old"]
    os.replace(mnt / "old", mnt / "new")
    fsync_directory(mnt)
    powercut.cut()
    powercut.start()
    assert sorted(os.listdir(mnt)) == ["keep", "new"]
    assert (mnt / "new").read_bytes() == b"old"


def test_new_directory_survives_only_once_its_parent_is_fsynced(powercut):
    mnt = powercut.mount
    (mnt / "a").mkdir()
    write(mnt / "a" / "f", b"content", fsync=True)
    fsync_directory(mnt / "a")  # a's entries are durable; a itself is not yet
    powercut.cut()
    powercut.start()
    assert os.listdir(mnt) == []
    (mnt / "a").mkdir()
    write(mnt / "a" / "f", b"content", fsync=True)
    fsync_directory(mnt / "a")
    fsync_directory(mnt)
    assert powercut.cut().unsynced_entries == 0
    powercut.start()
    assert (mnt / "a" / "f").read_bytes() == b"content"


def test_a_failing_disk_fails_one_sync_with_eio_and_makes_nothing_of_it_durable(powercut):
    mnt = powercut.mount
    write(mnt / "log", b"durable\n", fsync=True)
    fsync_directory(mnt)
    fd = os.open(mnt / "log", os.O_RDWR | os.O_APPEND)
    os.write(fd, b"failed\n")
    powercut.fail_next_sync(mnt / "log")
    with pytest.raises(OSError) as failed:
        os.fdatasync(fd)
    assert failed.value.errno == errno.EIO
    os.close(fd)
    assert powercut.cut().unsynced_bytes == len(b"failed\n")
    powercut.start()
    assert (mnt / "log").read_bytes() == b"durable\n"
    write(mnt / "log", b"synced\n", fsync=True)  # one sync failed, not every later one
    powercut.cut()
    powercut.start()
    assert (mnt / "log").read_bytes() == b"synced\n"


def test_a_sync_fault_on_a_missing_file_is_refused_loudly(powercut):
    with pytest.raises(RuntimeError, match="refused"):
        powercut.fail_next_sync(powercut.mount / "absent")
