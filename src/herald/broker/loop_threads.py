"""Blocking calls run on helper threads, their outcome back on the loop in one
``call_soon_threadsafe``: ``loop.run_in_executor`` without `concurrent.futures`.

``run_in_executor`` costs each call a `concurrent.futures.Future` (a `Condition`
and its lock), a work item, an idle-thread `Semaphore`, the future's wrapping into
an asyncio future and two callbacks to copy the outcome across: a dozen
Python-level lock operations per call, each competing with the loop for the GIL.
A replicating primary pays one such call per group for its local sync
(`herald.broker.primary_pipeline`). Here a call is a tuple on a C ``SimpleQueue``
(`herald.helper_threads`):

    await LOOP_THREADS.call(spool.sync_precommit, line, at)

Threads start on demand up to `MAX_THREADS` and then idle on the queue. Calls of
one caller run in the order made only if the caller awaits each before the next.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from herald.helper_threads import HelperThreads

__all__ = ["LOOP_THREADS", "MAX_THREADS", "LoopThreads"]

MAX_THREADS = 8

_Job = tuple[Callable[..., Any], tuple, asyncio.AbstractEventLoop, asyncio.Future]


class LoopThreads(HelperThreads[_Job]):
    """Helper threads for blocking calls awaited on an event loop. Thread-safe."""

    def __init__(self, max_threads: int = MAX_THREADS, name: str = "herald-loop-call") -> None:
        super().__init__(max_threads, name)

    def call(self, fn: Callable[..., Any], *args: object) -> asyncio.Future:
        """``fn(*args)`` on a helper thread; the future (of the running loop) gets
        its result or its exception. Cancelling the future does not stop the call."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._submit((fn, args, loop, future))
        return future

    def _run(self, job: _Job) -> tuple[object, bool]:
        fn, args, _, _ = job
        try:
            return fn(*args), False
        except BaseException as err:  # noqa: BLE001 - handed to the awaiting caller
            return err, True

    def _finish(self, job: _Job, outcome: object) -> None:
        _, _, loop, future = job
        try:
            loop.call_soon_threadsafe(_settle, future, *outcome)  # type: ignore[misc]
        except RuntimeError:  # the loop closed meanwhile: nobody waits any more
            pass


def _settle(future: asyncio.Future, outcome: object, failed: bool) -> None:
    if future.done():
        return
    if failed:
        future.set_exception(outcome)  # type: ignore[arg-type]
    else:
        future.set_result(outcome)


LOOP_THREADS = LoopThreads()
