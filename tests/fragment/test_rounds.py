"""Sync rounds: every journal's pending group made durable by one round; a group that
fails fails alone, and what was acknowledged is exactly what recovery finds."""

from __future__ import annotations

import asyncio
import hashlib

from herald.broker.sync_rounds import SyncRounds
from herald.fragment.fdpool import DescriptorPool
from herald.fragment.rounds import GroupWrite, write_round
from herald.fragment.spool import Spool, recover_spools
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

