"""A logged round of several groups on a contended disk: its log fdatasync'd twice at
once (`herald.fragment.fdatasyncs.fdatasync_twice`), once on a quick one; either way
every group is durable in the log when the round answers [I-APPEND-3]."""

from __future__ import annotations

import hashlib

from herald.fragment.commit_log import CommitLog
from herald.fragment.group_write import GroupWrite
from herald.fragment.rounds import logged_to, write_round
from herald.protocol.labels import LabelSet
from tests.fragment.logged_spools import forget_unsynced, logged_spools


def test_a_round_of_several_groups_syncs_its_log_twice_only_while_syncs_average_slow(data_dir):
    root, opened = data_dir
    counted: list[int] = []
    log = CommitLog.open(root, lambda kind, n: counted.append(n))
    opened.append(log)
    spools = logged_spools(log, 3)

    def round_of(body: bytes) -> int:
        """The round's fdatasyncs (the log's helper idle before and after)."""
        writes = [GroupWrite(spool, [body], LabelSet(), 1.0) for spool in spools]
        assert logged_to(writes) is log
        log.drain()
        counted.clear()
        assert write_round(writes) == [[hashlib.sha1(body).hexdigest()]] * 3
        log.drain()
        return sum(counted)

    round_of(b"first\n")  # the new segment's first growth, synced
    assert round_of(b"quick\n") == 1
    for _ in range(200):  # as after many slow syncs: a contended disk
        log.sync_average.add(0.01)
    assert log.sync_average.slow
    assert round_of(b"slow\n") == 2
    for _ in range(400):
        log.sync_average.add(0.0001)
    assert not log.sync_average.slow
    assert round_of(b"quick again\n") == 1
    log.close()  # a power cut: the spools lose all the log synced; a start replays it
    for spool in spools:
        forget_unsynced(spool)
    opened.append(CommitLog.open(root))
    for spool in spools:
        assert spool.path.read_bytes() == b"first\nquick\nslow\nquick again\n"
