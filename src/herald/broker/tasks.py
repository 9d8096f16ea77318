"""Background tasks owned together for an object's whole life, TaskGroup's rules.

A journal runs loops (appends, persisting, listing, pulses) between ``open`` and
``close``. `TaskSet` keeps them as one group with `asyncio.TaskGroup`'s rules:
`stop` cancels them all and waits for them, and a task that crashes is logged
with its traceback and stops its siblings, rather than dying unseen.

Unlike a TaskGroup it needs no task parked inside ``async with`` for the owner's
whole life, and it holds nothing until its first task: a broker serves thousands
of journals, most of them idle, and an open TaskGroup costs each of them a task
and its frame (issue 19 §1). Tasks may be started lazily, at first use.

    tasks = TaskSet("serving:a/journal")
    tasks.start_soon(append_loop(), "append")   # needs a running loop
    await tasks.stop()                          # cancels, waits; idempotent
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["TaskSet"]

log = logging.getLogger(__name__)


class TaskSet:
    """Tasks started with `start_soon`, all stopped by `stop` (idempotent)."""

    __slots__ = ("_stopped", "_tasks", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] | None = None  # created with the first task
        self._stopped = False

    def start_soon(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        """Run ``coro`` as a task of the set. After `stop`, or once a sibling
        crashed, the coroutine is closed unrun (the set is shutting down)."""
        if self._stopped:
            coro.close()
            return
        if self._tasks is None:
            self._tasks = set()
        task = asyncio.get_running_loop().create_task(coro, name=f"{name}:{self.name}")
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    @property
    def running(self) -> int:
        """How many tasks of the set have not finished."""
        return len(self._tasks) if self._tasks else 0

    async def stop(self) -> None:
        """Cancel every task of the set and wait until all have finished."""
        self._stopped = True
        tasks = list(self._tasks or ())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        if self._tasks is not None:
            self._tasks.discard(task)
        if task.cancelled() or (err := task.exception()) is None:
            return
        log.error("tasks of %s stopped: task %s failed", self.name, task.get_name(), exc_info=err)
        self._stopped = True  # TaskGroup's rule: one crash stops the siblings
        for sibling in list(self._tasks or ()):
            sibling.cancel()
