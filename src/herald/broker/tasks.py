"""Background tasks owned by a `asyncio.TaskGroup` for an object's whole life.

A journal runs loops (appends, persisting, listing, pulses) from ``open`` to
``close``. `TaskSet` holds a TaskGroup open in a runner task, so those loops are
the group's children: `stop` cancels them all and waits for them, and a loop that
crashes is logged with its traceback (then its siblings stop with it, TaskGroup's
rule) rather than dying unseen.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["TaskSet"]

log = logging.getLogger(__name__)


class TaskSet:
    """Tasks started with `start_soon`, all stopped by `stop` (idempotent)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._group: asyncio.TaskGroup | None = None
        self._runner: asyncio.Task[None] | None = None

    async def start(self) -> TaskSet:
        ready = asyncio.Event()

        async def hold_open() -> None:
            async with asyncio.TaskGroup() as group:
                self._group = group
                ready.set()
                # Until stop() cancels us, and the group with us. A bare future, not an
                # Event: it is held per journal for its whole life (memory, issue 19 §1).
                await asyncio.get_running_loop().create_future()

        self._runner = asyncio.create_task(hold_open(), name=f"tasks:{self.name}")
        self._runner.add_done_callback(self._report)
        await ready.wait()
        return self

    def start_soon(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        assert self._group is not None, "start() first"
        self._group.create_task(coro, name=f"{name}:{self.name}")

    async def stop(self) -> None:
        """Cancel every task of the set and wait until all have finished."""
        if self._runner is None or self._runner.done():
            return
        self._runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._runner

    def _report(self, runner: asyncio.Task[None]) -> None:
        if not runner.cancelled() and (err := runner.exception()) is not None:
            log.error("tasks of %s stopped: a task failed", self.name, exc_info=err)
