"""Blocking calls run on helper threads, their outcome back on the loop in one
``call_soon_threadsafe``: ``loop.run_in_executor`` without `concurrent.futures`.

``run_in_executor`` costs each call a `concurrent.futures.Future` (a `Condition`
and its lock), a work item, an idle-thread `Semaphore`, the future's wrapping into
an asyncio future and two callbacks to copy the outcome across: a dozen
Python-level lock operations per call, each competing with the loop for the GIL.
A replicating primary pays one such call per group for its local sync
(`herald.broker.primary_pipeline`). Here a call is a tuple on a C ``SimpleQueue``:

    await LOOP_THREADS.call(spool.sync_precommit, line, at)

Threads start on demand up to `MAX_THREADS` and then idle on the queue. Calls of
one caller run in the order made only if the caller awaits each before the next.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["LOOP_THREADS", "MAX_THREADS", "LoopThreads"]

MAX_THREADS = 8

_Job = tuple[Callable[..., Any], tuple, asyncio.AbstractEventLoop, asyncio.Future]


class LoopThreads:
    """Helper threads for blocking calls awaited on an event loop. Thread-safe."""

    def __init__(self, max_threads: int = MAX_THREADS, name: str = "herald-loop-call") -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = self._outstanding = 0
        self._max_threads = max_threads
        self._name = name

    def call(self, fn: Callable[..., Any], *args: object) -> asyncio.Future:
        """``fn(*args)`` on a helper thread; the future (of the running loop) gets
        its result or its exception. Cancelling the future does not stop the call."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            self._outstanding += 1
            if self._outstanding > self._threads and self._threads < self._max_threads:
                self._threads += 1
                threading.Thread(target=self._serve, name=f"{self._name}_{self._threads}", daemon=True).start()
        self._jobs.put((fn, args, loop, future))
        return future

    def _serve(self) -> None:
        while True:
            fn, args, loop, future = self._jobs.get()
            try:
                outcome, failed = fn(*args), False
            except BaseException as err:  # noqa: BLE001 - handed to the awaiting caller
                outcome, failed = err, True
            with self._lock:
                self._outstanding -= 1
            try:
                loop.call_soon_threadsafe(_settle, future, outcome, failed)
            except RuntimeError:  # the loop closed meanwhile: nobody waits any more
                pass
            del fn, args, loop, future, outcome


def _settle(future: asyncio.Future, outcome: object, failed: bool) -> None:
    if future.done():
        return
    if failed:
        future.set_exception(outcome)  # type: ignore[arg-type]
    else:
        future.set_result(outcome)


LOOP_THREADS = LoopThreads()
