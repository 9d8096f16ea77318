"""Where a lone writer's sync rounds run (herald.broker.lone_rounds): on the loop once
the same writer's lone append comes twice in a row on a quick log; then whichever
way, loop or thread, its rounds average quicker, one round in `PROBE_ROUNDS` going
the other way to time it again."""

from __future__ import annotations

from herald.broker.lone_rounds import HERE, HERE_MAX_SYNC_S, PROBE_ROUNDS, THERE, LoneRounds
from herald.fragment.commit_log import CommitLog
from herald.fragment.fdpool import DescriptorPool
from herald.fragment.group_write import GroupWrite
from herald.fragment.rounds import write_round
from herald.fragment.spool import Spool
from herald.protocol.journal import CompressionCodec
from herald.protocol.labels import LabelSet


def _quick_log_spool(tmp_path) -> tuple[CommitLog, Spool]:
    log = CommitLog.open(tmp_path / "data")
    spool = Spool(log.data_dir / "j", "j", 0, CompressionCodec.NONE, LabelSet(),
                  pool=DescriptorPool(budget_fds=8), commit_log=log)
    write_round([GroupWrite(spool, [b"grow\n"], LabelSet(), 1.0)])  # a segment with room
    log.drain()
    log.sync_average.seconds = 0.0  # a quick disk, whatever the test machine's
    return log, spool


def _ways(lone: LoneRounds, writes: list[GroupWrite], rounds: int, here_s: float, there_s: float) -> list:
    ways = []
    for _ in range(rounds):
        way = lone.way(writes, "a")
        ways.append(way)
        lone.ran(way, here_s if way is HERE else there_s)
    return ways


def test_only_the_same_writers_lone_appends_on_a_quick_log_are_a_lone_writers_rounds(tmp_path):
    log, spool = _quick_log_spool(tmp_path)
    try:
        writes = [GroupWrite(spool, [b"x\n"], LabelSet(), 1.0)]
        lone = LoneRounds()
        assert lone.way(writes, "a") is None  # a writer seen once: not yet
        assert lone.way(writes, "a") is HERE  # nothing timed yet: the loop
        assert lone.way(writes, "b") is None and lone.way(writes, None) is None
        assert lone.way(writes + writes, "b") is None  # two groups: never
        lone.way(writes, "a")
        assert lone.way(writes, "a") is HERE
        log.sync_average.seconds = HERE_MAX_SYNC_S  # a slow log: every other connection would wait
        assert lone.way(writes, "a") is None
        spool.close()
    finally:
        log.close()


def test_a_lone_writers_rounds_go_the_way_that_averages_quicker_and_time_the_other_now_and_then(tmp_path):
    log, spool = _quick_log_spool(tmp_path)
    try:
        writes = [GroupWrite(spool, [b"x\n"], LabelSet(), 1.0)]
        lone = LoneRounds()
        lone.way(writes, "a")
        quiet = _ways(lone, writes, 2 * PROBE_ROUNDS - 1, here_s=0.0001, there_s=0.0002)  # a quiet machine
        assert quiet.count(THERE) == 1 and quiet[PROBE_ROUNDS - 1] is THERE  # timed once, then left
        assert lone.statistics()["there_us"] > lone.statistics()["here_us"] > 0
        busy = _ways(lone, writes, 4 * PROBE_ROUNDS, here_s=0.003, there_s=0.0004)  # a busy one
        assert busy[-PROBE_ROUNDS:].count(THERE) >= PROBE_ROUNDS - 1  # the loop's went over: timed now and then
        again = _ways(lone, writes, 10 * PROBE_ROUNDS, here_s=0.0001, there_s=0.0004)  # quiet again
        assert again[-PROBE_ROUNDS:].count(HERE) >= PROBE_ROUNDS - 1  # the probes brought the loop's back
        assert lone.rounds_here == (quiet + busy + again).count(HERE)
        spool.close()
    finally:
        log.close()
