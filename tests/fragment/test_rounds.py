"""Sync rounds: every journal's pending group made durable by one round; a group that
fails fails alone, and what was acknowledged is exactly what recovery finds."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from herald.broker.sync_rounds import SyncRounds
from herald.fragment.commit_log import CommitLog
from herald.fragment.fdpool import DescriptorPool
from herald.fragment.group_write import GroupWrite
from herald.fragment.rounds import logged_to, uses_syncfs, write_round
from herald.fragment.spool import DATA_PAD_BYTES, Spool
from herald.fragment.spool_recovery import recover_spools
from herald.fragment.syncfs import syncs_whole_file_system
from herald.protocol.journal import CompressionCodec
from herald.protocol.labels import LabelSet


def _spool(directory, pool: DescriptorPool) -> Spool:
    return Spool(directory, directory.name, 0, CompressionCodec.NONE, LabelSet(), pool=pool)


def test_one_round_commits_every_spools_group(tmp_path):
    pool = DescriptorPool(budget_fds=64)
    spools = [_spool(tmp_path / f"j{i}", pool) for i in range(5)]
    outcomes = write_round([GroupWrite(s, [f"{s.journal} a\n".encode(), b"b\n"], LabelSet(), 1.0)
                            for s in spools])
    for spool, sums in zip(spools, outcomes):
        assert sums == [hashlib.sha1(f"{spool.journal} a\n".encode()).hexdigest(), hashlib.sha1(b"b\n").hexdigest()]
        assert spool.end == len(f"{spool.journal} a\nb\n")
        spool.close()
        (found,), _ = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
        assert found.path.read_bytes() == f"{spool.journal} a\nb\n".encode()


def test_a_failing_group_fails_alone(tmp_path):
    pool = DescriptorPool(budget_fds=64)
    good, bad = _spool(tmp_path / "good", pool), _spool(tmp_path / "blocked" / "bad", pool)
    (tmp_path / "blocked").write_text("a file where the spool's directory should be")
    ok, failed = write_round([GroupWrite(good, [b"kept\n"], LabelSet(), 1.0),
                              GroupWrite(bad, [b"refused\n"], LabelSet(), 1.0)])
    assert ok == [hashlib.sha1(b"kept\n").hexdigest()] and good.end == 5
    assert isinstance(failed, OSError) and bad.end == 0


def test_groups_that_arrive_during_a_round_form_the_next_one(tmp_path):
    pool = DescriptorPool(budget_fds=64)
    spools = [_spool(tmp_path / f"j{i}", pool) for i in range(8)]

    async def main() -> SyncRounds:
        rounds = SyncRounds(asyncio.get_running_loop())
        await asyncio.gather(*(rounds.commit(GroupWrite(s, [b"x\n"], LabelSet(), 1.0)) for s in spools))
        return rounds

    rounds = asyncio.run(main())
    assert rounds.groups == 8 and rounds.rounds == 2  # the first alone, then the seven that queued
    assert all(s.end == 2 for s in spools)



def test_a_round_that_fails_by_a_bug_fails_each_waiter_and_the_next_round_runs(tmp_path):
    """The round thread hands back whatever a round raised: each of its waiters
    hears of it, none hangs, and the thread serves the next round."""
    spool = _spool(tmp_path / "j", DescriptorPool(budget_fds=8))
    broken = GroupWrite(None, [b"x\n"], LabelSet(), 1.0)  # type: ignore[arg-type]  # no spool: a bug

    async def main() -> list[str]:
        rounds = SyncRounds(asyncio.get_running_loop())
        with pytest.raises(AttributeError):
            await rounds.commit(broken)
        return await rounds.commit(GroupWrite(spool, [b"after\n"], LabelSet(), 1.0))

    assert asyncio.run(main()) == [hashlib.sha1(b"after\n").hexdigest()]
    assert spool.end == len(b"after\n")


def test_a_round_of_many_groups_on_a_local_file_system_is_one_syncfs(tmp_path):
    """ext4/xfs/btrfs (where tests run): one syncfs covers the round; a file system
    whose syncfs may not reach a disk (procfs here, FUSE or NFS elsewhere) keeps fdatasyncs."""
    pool = DescriptorPool(budget_fds=64)
    spools = [_spool(tmp_path / f"j{i}", pool) for i in range(3)]
    writes = [GroupWrite(s, [b"x\n"], LabelSet(), 1.0) for s in spools]
    if not syncs_whole_file_system(tmp_path):
        pytest.skip("the test directory is not on ext4, xfs or btrfs")
    assert uses_syncfs(writes) and not uses_syncfs(writes[:2])
    assert not syncs_whole_file_system(Path("/proc"))
    assert write_round(writes) == [[hashlib.sha1(b"x\n").hexdigest()]] * 3


def test_a_failing_group_fails_alone_in_a_syncfs_round(tmp_path):
    pool = DescriptorPool(budget_fds=64)
    good = [_spool(tmp_path / f"good{i}", pool) for i in range(3)]
    bad = _spool(tmp_path / "blocked" / "bad", pool)
    (tmp_path / "blocked").write_text("a file where the spool's directory should be")
    *ok, failed = write_round([*(GroupWrite(s, [b"kept\n"], LabelSet(), 1.0) for s in good),
                               GroupWrite(bad, [b"refused\n"], LabelSet(), 1.0)])
    assert ok == [[hashlib.sha1(b"kept\n").hexdigest()]] * 3 and all(s.end == 5 for s in good)
    assert isinstance(failed, OSError) and bad.end == 0


def test_small_groups_pad_the_spool_with_zeros_that_recovery_and_close_cut(tmp_path):
    """The zeros past the committed end never reach a reader, a recovery or a store."""
    pool = DescriptorPool(budget_fds=64)
    spool = _spool(tmp_path / "j", pool)
    write_round([GroupWrite(spool, [b"one\n"], LabelSet(), 1.0)])
    write_round([GroupWrite(spool, [b"two\n"], LabelSet(), 1.0)])
    assert spool.path.stat().st_size == 4096  # grown ahead in zeros, by one block at first
    write_round([GroupWrite(spool, [bytes(5000)], LabelSet(), 1.0)])
    assert spool.path.stat().st_size == 8192  # then by as much as it holds
    write_round([GroupWrite(spool, [b"x" * 60_000] * 9, LabelSet(), 1.0)])
    assert spool.path.stat().st_size == 5008 + 540_000  # a large group: not padded
    write_round([GroupWrite(spool, [b"three\n"], LabelSet(), 1.0)])
    assert spool.path.stat().st_size == 2 * DATA_PAD_BYTES + DATA_PAD_BYTES  # steps of DATA_PAD_BYTES at most
    (found,), _ = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)  # as after kill -9
    assert found.path.read_bytes() == b"one\ntwo\n" + bytes(5000) + b"x" * 540_000 + b"three\n"
    spool = _spool(tmp_path / "k", pool)
    write_round([GroupWrite(spool, [b"three\n"], LabelSet(), 1.0)])
    spool.close()
    assert spool.path.read_bytes() == b"three\n"


@pytest.fixture
def full_disk(tmp_path):
    """A 4 MiB tmpfs (unmounted at the end), and a function that takes all of its
    free space in one preallocated file and returns it; skipped where mounting is
    refused."""
    mount = tmp_path / "disk"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs (needs root): {mounted.stderr.strip()}")

    def fill() -> Path:
        ballast, free = mount / "ballast", os.statvfs(mount)
        with open(ballast, "wb") as f:
            os.posix_fallocate(f.fileno(), 0, free.f_bavail * free.f_frsize)
        return ballast

    yield mount, fill
    subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_logged_round_whose_spool_write_fails_fails_whole_and_the_next_takes_its_place(full_disk):
    """A logged round of small groups writes their spools during the log's fdatasync
    (their records carry the bytes). A spool that cannot take its group then (no
    space left) fails the whole round, as a failed log write does: none of it
    commits [I-APPEND-2], the next round lands where it would have, and after the
    log's replay at a restart the spools hold exactly what was acknowledged."""
    mount, fill = full_disk
    log = CommitLog.open(mount / "data")
    pool = DescriptorPool(budget_fds=16)
    spools = [Spool(log.data_dir / f"j{i}", f"j{i}", 0, CompressionCodec.NONE, LabelSet(), pool=pool,
                    commit_log=log) for i in range(2)]
    assert write_round([GroupWrite(s, [b"one\n"], LabelSet(), 1.0) for s in spools]) == [
        [hashlib.sha1(b"one\n").hexdigest()]] * 2
    marks = [s.mark() for s in spools]
    ballast = fill()
    big = b"big " * (16 << 10)  # 64 KiB, past the spool's zero padding: pages the disk no longer has
    writes = [GroupWrite(spools[0], [b"lost\n"], LabelSet(), 1.0), GroupWrite(spools[1], [big], LabelSet(), 1.0)]
    assert logged_to(writes) is log
    assert all(isinstance(outcome, OSError) for outcome in write_round(writes))
    assert [s.end for s in spools] == [4, 4]
    for spool, mark in zip(spools, marks):
        spool.rollback(mark)  # as the append task does
    ballast.unlink()
    assert write_round([GroupWrite(s, [b"two\n"], LabelSet(), 1.0) for s in spools]) == [
        [hashlib.sha1(b"two\n").hexdigest()]] * 2
    for spool in spools:
        spool.close()
    log.close()
    reopened = CommitLog.open(log.data_dir)  # replays what the log still holds over the spools
    reopened.close()
    for spool in spools:
        (found,), _ = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
        assert found.path.read_bytes()[:found.fragment.end] == b"one\ntwo\n"
        assert found.fragment.end == len(b"one\ntwo\n")
