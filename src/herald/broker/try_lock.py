"""An asyncio lock that can also be taken without waiting: `TryLock.try_acquire`.

A journal's spool lock is awaited by its append task and its replica side, and
taken at once by a body that streams into an idle journal
(`herald.broker.append_stream`), which must never wait on the event loop.
`asyncio.Lock` has no such call. This lock is first-come first-served as
asyncio's is: ``release`` hands the lock straight to the oldest waiter, so
``try_acquire`` fails while anyone waits, even between a release and the
waiter's wake-up. Loop only.

    lock = TryLock()
    if lock.try_acquire():      # never awaits
        ...; lock.release()
    async with lock: ...        # waits its turn
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType

__all__ = ["TryLock"]


class TryLock:
    """A FIFO lock: `acquire` (awaited), `try_acquire` (at once or not), `release`."""

    __slots__ = ("_locked", "_waiters")

    def __init__(self) -> None:
        self._locked = False
        self._waiters: deque[asyncio.Future[None]] = deque()

    def locked(self) -> bool:
        return self._locked

    def try_acquire(self) -> bool:
        """Take the lock if it is free and nobody waits for it; never awaits."""
        if self._locked or self._waiters:
            return False
        self._locked = True
        return True

    async def acquire(self) -> bool:
        """Take the lock, after those already waiting for it."""
        if self.try_acquire():
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed over just as we were cancelled: pass it on
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            raise
        return True

    def release(self) -> None:
        """Give the lock to the oldest live waiter (it stays held), or free it."""
        if not self._locked:
            raise RuntimeError("TryLock released while not held")
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._locked = False

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, kind: type[BaseException] | None, err: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.release()
