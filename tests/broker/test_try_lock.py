"""TryLock: asyncio.Lock's first-come first-served order, plus a take that never waits."""

from __future__ import annotations

import asyncio

import pytest

from herald.broker.try_lock import TryLock


def test_try_acquire_fails_while_held_or_waited_for() -> None:
    async def main() -> None:
        lock = TryLock()
        assert lock.try_acquire()
        assert not lock.try_acquire()
        order: list[str] = []

        async def waiter(name: str) -> None:
            async with lock:
                order.append(name)

        tasks = [asyncio.create_task(waiter(name)) for name in ("a", "b")]
        await asyncio.sleep(0)  # wait-ok: one loop iteration, so both queue
        lock.release()  # handed to "a", which has not run yet
        assert lock.locked() and not lock.try_acquire()
        await asyncio.gather(*tasks)
        assert order == ["a", "b"]
        assert not lock.locked() and lock.try_acquire()

    asyncio.run(main())


def test_cancelled_waiter_passes_the_lock_on() -> None:
    async def main() -> None:
        lock = TryLock()
        await lock.acquire()
        first = asyncio.create_task(lock.acquire())
        second = asyncio.create_task(lock.acquire())
        await asyncio.sleep(0)  # wait-ok: one loop iteration, so the waiters queue
        lock.release()  # handed to ``first``...
        first.cancel()  # ...cancelled before it ran: ``second`` gets it
        with pytest.raises(asyncio.CancelledError):
            await first
        assert await second
        lock.release()
        assert not lock.locked()

    asyncio.run(main())


def test_cancelled_before_its_turn_leaves_the_queue() -> None:
    async def main() -> None:
        lock = TryLock()
        await lock.acquire()
        waiting = asyncio.create_task(lock.acquire())
        await asyncio.sleep(0)  # wait-ok: one loop iteration, so the waiters queue
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        lock.release()
        assert lock.try_acquire()

    asyncio.run(main())


def test_release_unheld_is_an_error() -> None:
    with pytest.raises(RuntimeError):
        TryLock().release()
