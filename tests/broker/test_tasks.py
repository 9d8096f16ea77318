"""TaskSet: a journal's loops as one TaskGroup's children — stopped together, and a
crash logged rather than lost."""

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

        tasks = await TaskSet("j").start()
        tasks.start_soon(loop("a"), "a")
        tasks.start_soon(loop("b"), "b")
        await asyncio.sleep(0)  # let both tasks start
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

        tasks = await TaskSet("j").start()
        tasks.start_soon(sibling(), "sibling")
        tasks.start_soon(crash(), "crash")
        await asyncio.wait_for(sibling_cancelled.wait(), 5)
        await tasks.stop()
        return sibling_cancelled.is_set()

    with caplog.at_level(logging.ERROR, logger="herald.broker.tasks"):
        assert asyncio.run(main())
    assert any("tasks of j stopped" in r.message for r in caplog.records)
