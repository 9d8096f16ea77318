"""A one-shot event renewed at each change: how a broker wakes whoever waits for
"the next change" (a keyspace update, a journal's new role) without polling.

`ChangeSignal.next` hands out the event the *next* `signal` sets; `signal` sets it
and starts a new one. A waiter takes the event before it checks the state it
waits on, so a change between the check and the wait is never missed.
"""

from __future__ import annotations

import asyncio

__all__ = ["ChangeSignal"]


class ChangeSignal:
    """Wakes every waiter of the current round at the next `signal`."""

    def __init__(self) -> None:
        self._next = asyncio.Event()  # binds to the running loop at its first wait, not here

    def signal(self) -> None:
        event, self._next = self._next, asyncio.Event()
        event.set()

    def next(self) -> asyncio.Event:
        """The event the next `signal` sets (take it before checking the state)."""
        return self._next

    async def wait(self) -> None:
        """Return after the next `signal`."""
        await self._next.wait()
