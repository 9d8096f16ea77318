"""The broker's sync rounds (herald.broker.sync_rounds): a journal that has appends
queued while a round is under way takes its group only when the next round opens;
the next round opens once the appends the last one answered came back, or when they
take too long (a lone writer after many is never left waiting for the others); the
round thread's outcome comes back on the loop, and the thread ends when stopped (a
broker's SyncRounds stops it when collected)."""

from __future__ import annotations

import asyncio
import hashlib
import threading

from herald.broker.sync_rounds import RoundThread, SyncRounds
from herald.fragment.commit_log import CommitLog
from herald.fragment.fdpool import DescriptorPool
from herald.fragment.group_write import GroupWrite
from herald.fragment.rounds import logged_to, write_round
from herald.fragment.spool import Spool
from herald.protocol.journal import CompressionCodec
from herald.protocol.labels import LabelSet


def _spool(directory, pool: DescriptorPool) -> Spool:
    return Spool(directory, directory.name, 0, CompressionCodec.NONE, LabelSet(), pool=pool)


def _no_timed_wait(rounds: SyncRounds) -> None:
    """Only arrivals open the next round from now on (no timed wait rescues it)."""
    rounds.gather_share = rounds.gather_max_s = 1e6


def _bodies(count: int) -> list[bytes]:
    return [b"%d\n" % i for i in range(count)]


def _arrive(rounds: SyncRounds, count: int) -> None:
    """What a journal's `_enqueue` does for each append it queues."""
    for _ in range(count):
        rounds.arrivals += 1
        if rounds.arrivals == rounds.gather_target:
            rounds.arrived()


async def _turns(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)  # wait-ok: loop turns, to show something did NOT happen in them


def test_a_journal_at_the_gate_takes_its_group_once_the_writers_answered_are_back(tmp_path):
    pool = DescriptorPool(budget_fds=16)
    first_spool, second_spool = _spool(tmp_path / "a", pool), _spool(tmp_path / "b", pool)

    async def main() -> SyncRounds:
        rounds = SyncRounds(asyncio.get_running_loop())
        _no_timed_wait(rounds)
        assert rounds.gate() is None  # no round under way: take the group now
        first = asyncio.ensure_future(rounds.commit(GroupWrite(first_spool, _bodies(3), LabelSet(), 1.0)))
        await _turns(1)  # the commit starts its round
        gate = rounds.gate()
        assert gate is not None
        assert await asyncio.wait_for(first, 30) == [hashlib.sha1(b).hexdigest() for b in _bodies(3)]
        _arrive(rounds, 2)  # two of the three writers answered are back
        await _turns(5)
        assert not gate.done()
        _arrive(rounds, 1)  # the third
        await asyncio.wait_for(gate, 30)
        # The group taken at the gate forms the next round.
        assert await rounds.commit(GroupWrite(second_spool, [b"2\n"], LabelSet(), 1.0)) \
            == [hashlib.sha1(b"2\n").hexdigest()]
        return rounds

    rounds = asyncio.run(main())
    assert (rounds.rounds, rounds.groups) == (2, 2)
    assert second_spool.end == 2


def test_a_lone_writer_after_many_waits_once_then_never_for_the_others(tmp_path):
    spool = _spool(tmp_path / "a", DescriptorPool(budget_fds=8))

    async def main() -> None:
        rounds = SyncRounds(asyncio.get_running_loop())
        await rounds.commit(GroupWrite(spool, _bodies(32), LabelSet(), 1.0))  # 32 writers answered
        _arrive(rounds, 1)  # only one comes back
        # Opened by the round thread's timed wait (at most 2 ms: on a loaded machine
        # it may have run out before this line, and then there is no gate at all).
        if (gate := rounds.gate()) is not None:
            await asyncio.wait_for(gate, 30)
        await rounds.commit(GroupWrite(spool, [b"x\n"], LabelSet(), 1.0))
        # Now its round answered one append: the next opens when that one writer is
        # back, never waiting for the 31 gone (no timed wait can rescue it here).
        _no_timed_wait(rounds)
        for _ in range(3):
            gate = rounds.gate()
            assert gate is not None
            _arrive(rounds, 1)
            await asyncio.wait_for(gate, 30)
            await rounds.commit(GroupWrite(spool, [b"y\n"], LabelSet(), 1.0))
        # Its append arrives before its journal comes to the gate: no gate at all.
        _arrive(rounds, 1)
        assert rounds.gate() is None
        await rounds.commit(GroupWrite(spool, [b"z\n"], LabelSet(), 1.0))

    asyncio.run(main())
    assert spool.end == len(b"".join(_bodies(32))) + 2 + 3 * 2 + 2


def test_a_journal_at_the_gate_is_let_through_when_no_round_follows(tmp_path):
    spool = _spool(tmp_path / "a", DescriptorPool(budget_fds=8))

    async def main() -> None:
        rounds = SyncRounds(asyncio.get_running_loop())
        await rounds.commit(GroupWrite(spool, [b"x\n"], LabelSet(), 1.0))
        # Its round just ended and its writer never comes back: a journal at the gate
        # is let through when the wait times out, and the rounds go idle.
        gate = rounds.gate()
        assert gate is not None
        await asyncio.wait_for(gate, 30)
        await asyncio.wait_for(_idle(rounds), 30)

    asyncio.run(main())


def test_a_replicas_group_is_never_held_for_a_journals_writers(tmp_path):
    """A replica's group (`commit_replica_write`) is awaited by its primary, not by writers
    that come back through the gate: it opens a round that waits for writers, and a
    round of replica groups alone waits for nobody."""
    pool = DescriptorPool(budget_fds=16)
    journal_spool, replica_spool = _spool(tmp_path / "a", pool), _spool(tmp_path / "b", pool)

    async def main() -> SyncRounds:
        rounds = SyncRounds(asyncio.get_running_loop())
        _no_timed_wait(rounds)
        await rounds.commit(GroupWrite(journal_spool, _bodies(3), LabelSet(), 1.0))
        gate = rounds.gate()  # waiting for the three writers answered, who never come
        assert gate is not None
        await asyncio.wait_for(rounds.commit(GroupWrite(replica_spool, [b"r\n"], LabelSet(), 1.0),
                                             gathered=False), 30)
        await asyncio.wait_for(gate, 30)  # the journal at the gate went with it
        for _ in range(3):  # rounds of the replica alone wait for nobody
            await asyncio.wait_for(rounds.commit(GroupWrite(replica_spool, [b"s\n"], LabelSet(), 1.0),
                                                 gathered=False), 30)
        return rounds

    rounds = asyncio.run(main())
    assert (rounds.rounds, replica_spool.end) == (5, 8)


def test_a_round_of_replica_groups_alone_asks_for_no_timed_wake_up(tmp_path):
    """After a round of replicas' groups alone the next one opens at once (nobody to
    wait for), so the round thread is not asked to wake the loop later for writers
    who are late: on a peer that was one wake-up of its loop per replicated group,
    for nothing. A round that answers a journal's writers still asks for it."""
    pool = DescriptorPool(budget_fds=16)
    journal_spool, replica_spool = _spool(tmp_path / "a", pool), _spool(tmp_path / "b", pool)

    async def main() -> list[bool]:
        rounds = SyncRounds(asyncio.get_running_loop())
        timed, run = [], rounds._thread.run

        def recording(writes, loop, done, gather=None) -> None:  # the real thread runs each round
            timed.append(gather is not None)
            run(writes, loop, done, gather)

        rounds._thread.run = recording  # type: ignore[method-assign]
        await asyncio.wait_for(rounds.commit(GroupWrite(replica_spool, [b"r\n"], LabelSet(), 1.0),
                                             gathered=False), 30)
        await asyncio.wait_for(rounds.commit(GroupWrite(journal_spool, _bodies(2), LabelSet(), 1.0)), 30)
        return timed

    assert asyncio.run(main()) == [False, True]


async def _idle(rounds: SyncRounds) -> None:
    while rounds.gate() is not None:
        await asyncio.sleep(0)  # wait-ok: loop turns until the gathering ends; bounded by wait_for


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


def test_groups_taken_as_a_round_opens_are_answered_in_its_completion_callback(tmp_path):
    """`SyncRounds.want`: journals' groups taken by the round itself (no task) share
    one round, each answered with its own sums when it ends; their writers coming
    back open the next round, which takes the groups wanted meanwhile; a journal
    whose take declines (its task takes the appends instead) starts no round."""
    pool = DescriptorPool(budget_fds=16)
    spools = [_spool(tmp_path / name, pool) for name in "abc"]

    async def main() -> tuple[SyncRounds, list]:
        rounds = SyncRounds(asyncio.get_running_loop())
        _no_timed_wait(rounds)
        answers: list = []
        done = asyncio.Event()

        def wanting(spool: Spool, bodies: list[bytes]):
            def take():
                return GroupWrite(spool, bodies, LabelSet(), 1.0), lambda outcome: (answers.append(outcome),
                                                                                    done.set()), None
            return take

        rounds.want(wanting(spools[0], _bodies(2)))
        rounds.want(wanting(spools[1], _bodies(1)))
        gate = rounds.gate()  # a round is due: a journal's task waits for it
        assert gate is not None
        await asyncio.wait_for(done.wait(), 30)
        assert (rounds.rounds, rounds.groups) == (1, 2)
        assert answers == [[hashlib.sha1(b).hexdigest() for b in _bodies(2)], [hashlib.sha1(b"0\n").hexdigest()]]
        done.clear()
        rounds.want(wanting(spools[2], [b"c\n"]))
        await _turns(5)
        assert rounds.rounds == 1  # the three writers just answered are not back yet
        _arrive(rounds, 3)
        await asyncio.wait_for(done.wait(), 30)
        assert rounds.rounds == 2 and answers[-1] == [hashlib.sha1(b"c\n").hexdigest()]
        _arrive(rounds, 1)
        rounds.want(lambda: None)  # this journal's task takes its appends
        if (gate := rounds.gate()) is not None:
            await asyncio.wait_for(gate, 30)
        await _turns(5)
        return rounds, answers

    rounds, _ = asyncio.run(main())
    assert (rounds.rounds, rounds.groups) == (2, 3)
    assert [spool.end for spool in spools] == [4, 2, 2]


def test_a_small_lone_group_kept_in_place_by_a_slow_log_reports_its_round_time_to_it(tmp_path):
    """While the commit log's syncs average slow, a lone small group syncs in place
    (`CommitLog.takes_lone`), and its round's time goes into the log's average:
    the only way the log learns that the disk is quick again."""
    log = CommitLog.open(tmp_path / "data")
    try:
        spool = Spool(log.data_dir / "j", "j", 0, CompressionCodec.NONE, LabelSet(),
                      pool=DescriptorPool(budget_fds=8), commit_log=log)
        log.sync_average.slow, log.sync_average.seconds = True, 0.0

        async def main() -> list[str]:
            return await SyncRounds(asyncio.get_running_loop()).commit(GroupWrite(spool, [b"x\n"], LabelSet(), 1.0))

        write = GroupWrite(spool, [b"x\n"], LabelSet(), 1.0)
        assert logged_to([write]) is None
        assert asyncio.run(main()) == [hashlib.sha1(b"x\n").hexdigest()]
        assert log.sync_average.seconds > 0  # the in-place round was timed
        spool.close()
    finally:
        log.close()


def test_a_lone_writers_rounds_run_on_the_loop_and_two_writers_taking_turns_stay_on_the_thread(tmp_path):
    """`herald.broker.lone_rounds`: once the same writer's lone append forms a second
    round in a row, and the commit log takes it on a quick disk, the round runs on
    the loop (no thread hops); two writers whose appends take turns never do, so
    their next round can still gather both; nor does a cluster member's (its loop keeps
    its etcd lease). Every append is answered with its sum."""
    log = CommitLog.open(tmp_path / "data")
    try:
        spool = Spool(log.data_dir / "j", "j", 0, CompressionCodec.NONE, LabelSet(),
                      pool=DescriptorPool(budget_fds=8), commit_log=log)
        rounds_of_writers = {}
        for writers, on_loop in ((["a"] * 4, True), (["a", "b"] * 3, True), (["c"] * 4, False)):
            write_round([GroupWrite(spool, [b"grow\n"], LabelSet(), 1.0)])  # a segment with room
            log.drain()

            async def main(writers: list[str], on_loop: bool) -> SyncRounds:
                rounds = SyncRounds(asyncio.get_running_loop())
                rounds.rounds_on_loop = on_loop  # False: a cluster member's (see Broker._join_cluster)
                _no_timed_wait(rounds)
                for writer in writers:
                    log.sync_average.seconds = 0.0  # a quick disk, whatever the test machine's
                    answered = asyncio.get_running_loop().create_future()
                    write = GroupWrite(spool, [writer.encode() + b"\n"], LabelSet(), 1.0)
                    rounds.want(lambda write=write, answered=answered, writer=writer: (
                        write, answered.set_result, writer))
                    _arrive(rounds, 1)
                    assert await asyncio.wait_for(answered, 30) == [hashlib.sha1(writer.encode() + b"\n").hexdigest()]
                return rounds

            rounds = asyncio.run(main(writers, on_loop))
            rounds_of_writers[writers[0], len(set(writers))] = (rounds.rounds, rounds.statistics()["rounds_here"])
        assert rounds_of_writers == {("a", 1): (4, 3), ("a", 2): (6, 0), ("c", 1): (4, 0)}
        spool.close()
    finally:
        log.close()
