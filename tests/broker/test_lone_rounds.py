"""Where a lone writer's sync rounds run (herald.broker.lone_rounds): on the loop once
the same writer's lone append comes twice in a row on a quick log; back on the
thread for a while once the rounds run there are slow (a busy CPU), the wait
doubling each time the next try is slow too."""

from __future__ import annotations

from herald.broker.lone_rounds import HERE_BACKOFF_ROUNDS, HERE_MAX_ROUND_S, LoneRounds
from herald.fragment.commit_log import CommitLog
from herald.fragment.fdpool import DescriptorPool
from herald.fragment.group_write import GroupWrite
from herald.fragment.rounds import write_round
from herald.fragment.spool import Spool
from herald.protocol.journal import CompressionCodec
from herald.protocol.labels import LabelSet


def test_slow_rounds_on_the_loop_send_a_lone_writer_back_to_the_thread_for_a_doubling_while(tmp_path):
    log = CommitLog.open(tmp_path / "data")
    try:
        spool = Spool(log.data_dir / "j", "j", 0, CompressionCodec.NONE, LabelSet(),
                      pool=DescriptorPool(budget_fds=8), commit_log=log)
        write_round([GroupWrite(spool, [b"grow\n"], LabelSet(), 1.0)])  # a segment with room
        log.drain()
        log.sync_average.seconds = 0.0  # a quick disk, whatever the test machine's
        writes = [GroupWrite(spool, [b"x\n"], LabelSet(), 1.0)]
        lone = LoneRounds()
        assert not lone.runs_here(1, writes, "a")  # a writer seen once: not yet
        assert lone.runs_here(2, writes, "a")
        assert not lone.runs_here(3, writes, "b") and not lone.runs_here(4, writes, None)
        assert not lone.runs_here(5, writes + writes, "b")  # two groups: never
        lone.runs_here(6, writes, "a")
        number = 7
        for wait in (HERE_BACKOFF_ROUNDS, 2 * HERE_BACKOFF_ROUNDS):
            while lone.runs_here(number, writes, "a"):  # slow rounds, until the average tells
                lone.ran_here(number, HERE_MAX_ROUND_S * 4)
                number += 1
            slow_at = number - 1  # the round that took the average over
            assert not lone.runs_here(slow_at + wait - 1, writes, "a")
            number = slow_at + wait
            assert lone.runs_here(number, writes, "a")
        for _ in range(4 * HERE_BACKOFF_ROUNDS):  # quick again for as long as the next wait would be
            lone.ran_here(number, HERE_MAX_ROUND_S / 4)
            number += 1
        while lone.runs_here(number, writes, "a"):
            lone.ran_here(number, HERE_MAX_ROUND_S * 4)
            number += 1
        assert not lone.runs_here(number - 1 + HERE_BACKOFF_ROUNDS - 1, writes, "a")
        assert lone.runs_here(number - 1 + HERE_BACKOFF_ROUNDS, writes, "a")  # the first wait again
        assert lone.rounds_here > 4 * HERE_BACKOFF_ROUNDS
        spool.close()
    finally:
        log.close()
