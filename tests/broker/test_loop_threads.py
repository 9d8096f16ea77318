"""Blocking calls on helper threads awaited on the loop (herald.broker.loop_threads),
and one future for every peer's answer (replication.all_answers): both replace
asyncio's heavier machinery on the replicated append path, and must keep its
outcomes exactly (results in order, the failure, the timeout)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from herald.broker.loop_threads import LoopThreads
from herald.broker.replication import all_answers
from herald.protocol.errors import HeraldError, Status


def test_a_call_runs_off_the_loop_and_returns_or_raises_on_it():
    threads = LoopThreads(max_threads=2)

    async def main():
        loop_thread = threading.get_ident()
        assert await threads.call(threading.get_ident) != loop_thread
        assert await threads.call(lambda a, b: a + b, 2, 3) == 5
        with pytest.raises(OSError, match="disk"):
            await threads.call(_raise, OSError("disk"))
        # Many at once, more than the threads: every one answered, each its own.
        assert await asyncio.gather(*(threads.call(lambda i=i: i * i) for i in range(50))) \
            == [i * i for i in range(50)]

    asyncio.run(main())


def _raise(err: BaseException) -> None:
    raise err


def _timeout() -> HeraldError:
    return HeraldError(Status.INSUFFICIENT_JOURNAL_BROKERS, "no answer in time")


def test_all_answers_in_order_or_the_first_failure_or_the_timeout():
    async def main():
        loop = asyncio.get_running_loop()
        one, two = loop.create_future(), loop.create_future()
        every = all_answers([one, two], 10.0, _timeout)
        two.set_result("b")
        await asyncio.sleep(0)  # wait-ok: one loop turn so done-callbacks run; no clock involved
        assert not every.done()  # waits for every peer
        one.set_result("a")
        assert await every == ["a", "b"]  # in the peers' order, not the answers'

        one, two = loop.create_future(), loop.create_future()
        failed = all_answers([one, two], 10.0, _timeout)
        two.set_exception(HeraldError(Status.PROPOSAL_MISMATCH, "peer two"))
        with pytest.raises(HeraldError, match="peer two"):
            await failed  # at once: not after the other peer
        one.set_result("late")  # an answer after the failure changes nothing
        await asyncio.sleep(0)  # wait-ok: one loop turn so done-callbacks run; no clock involved

        cancelled = all_answers([loop.create_future() for _ in range(2)], 10.0, _timeout)
        cancelled_answer = loop.create_future()
        cut = all_answers([cancelled_answer], 10.0, _timeout)
        cancelled_answer.cancel()
        with pytest.raises(HeraldError) as err:
            await cut
        assert err.value.status is Status.INSUFFICIENT_JOURNAL_BROKERS

        silent = all_answers([loop.create_future()], 0.05, _timeout)
        with pytest.raises(HeraldError, match="no answer in time"):
            await silent
        assert not cancelled.done()
        assert await all_answers([], 10.0, _timeout) == []

    asyncio.run(main())
