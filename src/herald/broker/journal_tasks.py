"""Opening and closing a broker's journals, each a task of its own, by name.

The resolver pass (`herald.broker.service`) sets journals' roles at once and never
awaits an open or a close: a journal whose open waited on a store that accepts and
never answers held the whole pass, and with it every other journal's fail-over and
every new journal on the broker. An open of a journal still closing waits for that
close (the two share the journal's spool directory).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from herald.broker.journal import Journal

log = logging.getLogger(__name__)


class JournalTasks:
    """The journals being opened and closed, by name. One event loop owns it."""

    def __init__(self) -> None:
        self.opening: dict[str, asyncio.Task[None]] = {}
        self.closing: dict[str, asyncio.Task[None]] = {}

    def open(self, name: str, opener: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        """The task opening ``name``: the one under way, else a new one running
        ``opener`` once any close of ``name`` has finished."""
        task = self.opening.get(name)
        if task is None:
            task = asyncio.create_task(self._after_close(name, opener), name=f"open:{name}")
            _track(self.opening, name, task)
        return task

    def close(self, name: str, journal: Journal) -> None:
        """Close ``journal`` (already out of the broker's journals) in the background."""
        _track(self.closing, name, asyncio.create_task(_close(name, journal), name=f"close:{name}"))

    async def wait_all(self) -> None:
        """Wait for every open and close under way (a stopping broker)."""
        await asyncio.gather(*self.opening.values(), *self.closing.values(), return_exceptions=True)

    async def _after_close(self, name: str, opener: Callable[[], Awaitable[None]]) -> None:
        if (closing := self.closing.get(name)) is not None:
            await asyncio.wait([closing])
        await opener()


def _track(tasks: dict[str, asyncio.Task[None]], name: str, task: asyncio.Task[None]) -> None:
    tasks[name] = task
    task.add_done_callback(lambda done: tasks.pop(name) if tasks.get(name) is done else None)


async def _close(name: str, journal: Journal) -> None:
    try:
        await journal.close()
    except Exception:  # process edge: one journal's close must not stop the others
        log.exception("closing journal failed", extra={"journal": name})
    log.info("stopped serving journal", extra={"journal": name})
