"""A journal's append queue (herald.broker.append_task.AppendQueue): groups in order,
bounded in bytes, pokes taken with them, and ``join`` only once every group ran."""

from __future__ import annotations

import asyncio

from herald.broker.append_task import AppendQueue
from herald.broker.group import Pending


def _append(content: bytes) -> Pending:
    return Pending(content, None, None, None)


def test_groups_come_in_order_bounded_in_bytes_with_their_pokes():
    async def main() -> None:
        queue = AppendQueue(asyncio.get_running_loop())
        waiting = asyncio.ensure_future(queue.wait())
        await asyncio.sleep(0)  # wait-ok: one loop turn, in which the waiter starts waiting
        assert not waiting.done()
        a, b, c = _append(b"aaaa"), _append(b"bbbb"), _append(b"c")
        for item in (None, a, b, None, c):
            queue.put(item)
        await asyncio.wait_for(waiting, 30)
        assert queue.has_append()
        assert queue.take(8) == ([a, b], 3)  # the poke first, then up to 8 bytes
        assert queue.has_append()  # a poke, then c
        assert queue.take(8) == ([c], 2)
        assert not queue.has_append()

        joined = asyncio.ensure_future(queue.join())
        queue.task_done(3)
        await asyncio.sleep(0)  # wait-ok: one loop turn; join must still wait for the last group
        assert not joined.done()
        queue.task_done(2)
        await asyncio.wait_for(joined, 30)
        queue.put(None)
        assert not queue.has_append()  # pokes only
        assert queue.take(8) == ([], 1)  # a poke alone: an empty group
        queue.put(_append(b"d"))
        assert queue.has_append()

    asyncio.run(main())



def test_wait_for_wakes_once_when_the_count_is_queued_and_never_waits_past_its_bound():
    # A replicating primary's gather (herald.broker.primary_pipeline._gather): the
    # task sleeps until as many appends are queued as it waits for, not woken by each.
    async def main() -> None:
        queue = AppendQueue(asyncio.get_running_loop())
        a, b, c = _append(b"a"), _append(b"b"), _append(b"c")
        queue.put(a)
        waiting = asyncio.ensure_future(queue.wait_for(3, 30))
        await asyncio.sleep(0)  # wait-ok: one loop turn, in which the waiter starts waiting
        queue.put(b)
        await asyncio.sleep(0)  # wait-ok: one loop turn; two of three are queued
        assert not waiting.done()
        queue.put(None)  # a poke counts: it is taken with the group
        await asyncio.wait_for(waiting, 30)
        assert len(queue) == 3
        await asyncio.wait_for(queue.wait_for(2, 30), 30)  # already queued: no wait at all
        # Writers that never come back: the wait ends at its bound.
        await asyncio.wait_for(queue.wait_for(10, 0.01), 30)
        assert queue.take(8) == ([a, b], 3)
        # And the task is woken by one item again.
        waiting = asyncio.ensure_future(queue.wait())
        await asyncio.sleep(0)  # wait-ok: one loop turn, in which the waiter starts waiting
        queue.put(c)
        await asyncio.wait_for(waiting, 30)
        assert queue.take(8) == ([c], 1)

    asyncio.run(main())
