"""Shared set-up for the commit log's tests: logs opened on a data dir, spools that
log to them, and what a power cut leaves of such a spool."""

from __future__ import annotations

from pathlib import Path

import pytest

from herald.fragment.commit_log import CommitLog
from herald.fragment.fdpool import DescriptorPool
from herald.fragment.spool import Spool
from herald.fragment.spool_recovery import recover_spools
from herald.protocol.journal import CompressionCodec
from herald.protocol.labels import LabelSet


@pytest.fixture
def data_dir(tmp_path):
    opened: list[CommitLog] = []
    yield tmp_path, opened
    for log in opened:
        log.close()


def open_log(data_dir: Path, opened: list[CommitLog], **tuning: int) -> CommitLog:
    log = CommitLog.open(data_dir, **tuning)
    opened.append(log)
    return log


def logged_spools(log: CommitLog, n: int) -> list[Spool]:
    """``n`` spools under the log's data dir, given the log as a broker's journals give it."""
    pool = DescriptorPool(budget_fds=64)
    return [Spool(log.data_dir / "spools" / f"j{i}", f"j{i}", 0, CompressionCodec.NONE, LabelSet(), pool=pool,
                  commit_log=log) for i in range(n)]


def forget_unsynced(spool: Spool) -> None:
    """What a power cut does to a spool whose rounds only the log synced: its bytes
    and commit lines never reached the disk."""
    spool.close()
    spool.path.write_bytes(b"")
    spool.commits_path.write_bytes(b"")




def replayed_after_power_cut(root: Path, opened: list[CommitLog], log: CommitLog, spool: Spool,
                             synced_data: bytes, synced_lines: bytes) -> Spool:
    """A power cut that leaves ``spool`` with only what was synced in place (its
    data and commit lines), then a log opened again (it replays): the spool as
    recovery finds it."""
    forget_unsynced(spool)
    spool.path.write_bytes(synced_data)
    spool.commits_path.write_bytes(synced_lines)
    log.close()
    open_log(root, opened)
    (found,), _ = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
    return found
