"""The broker's sync round thread (herald.broker.sync_rounds.RoundThread): a round's
outcome comes back on the loop, and the thread ends when stopped (a broker's
SyncRounds stops it when collected)."""

from __future__ import annotations

import asyncio
import hashlib
import threading

from herald.broker.sync_rounds import RoundThread
from herald.fragment.fdpool import DescriptorPool
from herald.fragment.rounds import GroupWrite
from herald.fragment.spool import Spool
from herald.protocol.journal import CompressionCodec
from herald.protocol.labels import LabelSet


def _spool(directory, pool: DescriptorPool) -> Spool:
    return Spool(directory, directory.name, 0, CompressionCodec.NONE, LabelSet(), pool=pool)


def test_the_round_thread_ends_when_stopped(tmp_path):
    spool = _spool(tmp_path / "a", DescriptorPool(budget_fds=8))
    rounds = RoundThread()
    before = set(threading.enumerate())

    async def main() -> list:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        rounds.run([GroupWrite(spool, [b"x\n"], LabelSet(), 1.0)], loop, done.set_result)
        return await done

    assert asyncio.run(main()) == [[hashlib.sha1(b"x\n").hexdigest()]]
    [thread] = [t for t in threading.enumerate() if t not in before and t.name.startswith("herald-sync-round")]
    rounds.stop()
    thread.join(30)
    assert not thread.is_alive()
