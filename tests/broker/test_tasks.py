"""TaskSet: a journal's loops as one group with TaskGroup's rules — stopped together,
a crash logged rather than lost — holding nothing while it has no task."""

from __future__ import annotations

import asyncio
import logging

from herald.broker.tasks import TaskSet


def test_stop_cancels_every_task_and_waits_for_them():
    async def main() -> list[str]:
        finished: list[str] = []

        async def loop(name: str) -> None:
            try:
                await asyncio.Event().wait()
            finally:
                finished.append(name)

        tasks = TaskSet("j")
        tasks.start_soon(loop("a"), "a")
        tasks.start_soon(loop("b"), "b")
        await asyncio.sleep(0)  # wait-ok: one loop iteration, so both tasks start
        await tasks.stop()
        await tasks.stop()  # idempotent
        return finished

    assert sorted(asyncio.run(main())) == ["a", "b"]


def test_a_crashing_task_is_logged_and_stops_its_siblings(caplog):
    async def main() -> bool:
        sibling_cancelled = asyncio.Event()

        async def sibling() -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                sibling_cancelled.set()
                raise

        async def crash() -> None:
            raise RuntimeError("boom")

        tasks = TaskSet("j")
        tasks.start_soon(sibling(), "sibling")
        tasks.start_soon(crash(), "crash")
        await asyncio.wait_for(sibling_cancelled.wait(), 5)
        await tasks.stop()
        return sibling_cancelled.is_set()

    with caplog.at_level(logging.ERROR, logger="herald.broker.tasks"):
        assert asyncio.run(main())
    assert any("tasks of j stopped" in r.message for r in caplog.records)


def test_a_task_that_returns_leaves_the_set_and_a_stopped_set_runs_nothing():
    async def main() -> tuple[int, int, bool]:
        tasks = TaskSet("j")
        done = asyncio.Event()

        async def once() -> None:
            done.set()

        tasks.start_soon(once(), "once")
        await done.wait()
        await asyncio.sleep(0)  # wait-ok: the done callback runs on the next loop iteration
        after_return = tasks.running
        await tasks.stop()
        ran = False

        async def late() -> None:
            nonlocal ran
            ran = True

        tasks.start_soon(late(), "late")  # closed unrun, no "never awaited" warning
        await asyncio.sleep(0)  # wait-ok: one loop iteration, in which the late task would run
        return after_return, tasks.running, ran

    assert asyncio.run(main()) == (0, 0, False)
