"""Broker-wide group commit: one sync round covers every journal with appends pending.

Each journal already gathers the appends that arrive together into one group. With
many journals, syncing each group on its own costs an executor hop, a loop wake-up
and two fdatasyncs per journal, one after another as threads free up. Here the
groups of every journal that is ready join one round: one job on the broker's
round thread (`RoundThread`) runs `herald.fragment.rounds.write_round` for all of
them, and the groups that arrive meanwhile form the next round, which starts the
moment this one ends.

    sums = await commit_in_round(GroupWrite(spool, bodies, registers, now))

Acknowledgement is unchanged: a group's future resolves only after its own data and
commit line are both fdatasync'd [I-APPEND-3]; a group that fails fails alone.
No background task: rounds are driven by their jobs' completion callbacks, so a
cancelled appender never strands the other journals of its round.
"""

from __future__ import annotations

import asyncio
import functools
import time
import weakref
from collections.abc import Callable

from herald.broker.metrics import METRICS
from herald.fragment.rounds import GroupWrite, round_syncs, write_round
from herald.helper_threads import HelperThreads
from herald.protocol.errors import HeraldError

__all__ = ["RoundThread", "SyncRounds", "commit_in_round"]

Waiter = tuple[GroupWrite, "asyncio.Future[list[str]]"]
Outcomes = list[list[str] | OSError | HeraldError]


class RoundThread(HelperThreads[tuple]):
    """The thread that runs one broker's sync rounds, one at a time (as they come).

    ``loop.run_in_executor`` cost each round a `concurrent.futures.Future` (with
    its `threading.Condition`), its wrapping into an asyncio future and two
    callbacks to copy the outcome across: 5-8 % of the loop's time with one writer
    (py-spy). Here a round is a queue item, and its outcome comes back to the
    loop in one ``call_soon_threadsafe``. Rounds never overlap (`SyncRounds` starts
    the next when one ends), so one thread is all an executor gave them.
    """

    def __init__(self) -> None:
        super().__init__(1, "herald-sync-round")

    def run(self, writes: list[GroupWrite], loop: asyncio.AbstractEventLoop,
            done: Callable[[Outcomes | BaseException], object]) -> None:
        """Run `write_round` on ``writes`` in the thread; ``done(outcomes)`` (or the
        exception, for a bug) then runs on ``loop``."""
        self._submit((writes, loop, done))

    def _run(self, job: tuple) -> Outcomes | BaseException:
        try:
            return _counted_round(job[0])
        except BaseException as err:  # noqa: BLE001 - a bug: every waiter of the round hears of it
            return err

    def _finish(self, job: tuple, outcome: object) -> None:
        _, loop, done = job
        try:
            loop.call_soon_threadsafe(done, outcome)
        except RuntimeError:  # the loop closed meanwhile: nobody waits any more
            pass


def _counted_round(writes: list[GroupWrite]) -> Outcomes:
    """`write_round`, its syncs counted in the broker's metrics (the commit log
    counts its own)."""
    fdatasyncs, syncfs = round_syncs(writes)
    if fdatasyncs:
        METRICS.fdatasyncs.inc(fdatasyncs)
    if syncfs:
        METRICS.syncfs.inc(syncfs)
    return write_round(writes)


class SyncRounds:
    """The rounds of one event loop (one broker). Not thread-safe: loop only."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._waiting: list[Waiter] = []
        self._running = False
        self._thread = RoundThread()
        weakref.finalize(self, self._thread.stop)
        self.rounds = 0
        self.groups = 0

    async def commit(self, write: GroupWrite) -> list[str]:
        """Make ``write`` durable in the next round; its body SHA1s, or its error."""
        done: asyncio.Future[list[str]] = self.loop.create_future()
        self._waiting.append((write, done))
        if not self._running:
            self._start_round()
        return await done  # if the appender is cancelled, the round still ends: see _end_round

    def statistics(self) -> dict[str, int]:
        return {"rounds": self.rounds, "groups": self.groups, "waiting": len(self._waiting)}

    def _start_round(self) -> None:
        batch, self._waiting = self._waiting, []
        self._running = True
        self.rounds += 1
        self.groups += len(batch)
        METRICS.sync_rounds.inc()
        writes = [write for write, _ in batch]
        started = time.perf_counter()
        self._thread.run(writes, self.loop, functools.partial(self._end_round, batch, started))

    def _end_round(self, batch: list[Waiter], started: float, result: Outcomes | BaseException) -> None:
        METRICS.sync_round_seconds.observe(time.perf_counter() - started)
        outcomes = [result] * len(batch) if isinstance(result, BaseException) else result
        for (_write, done), outcome in zip(batch, outcomes):
            if done.done():
                continue
            if isinstance(outcome, BaseException):
                done.set_exception(outcome)
            else:
                done.set_result(outcome)
        # The next round starts once the journals just answered had their turn: each
        # one's append task wakes (already scheduled, so ahead of this callback) and
        # hands in its next group at once. Started here, the round would hold only
        # the groups that waited through this one, and every journal would miss
        # every other round (16 journals ran at half the rate of one).
        self.loop.call_soon(self._start_next_round)

    def _start_next_round(self) -> None:
        if self._waiting:
            self._start_round()
        else:
            self._running = False


_ROUNDS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SyncRounds] = weakref.WeakKeyDictionary()


def rounds_of_running_loop() -> SyncRounds:
    """This loop's rounds (a broker runs one loop; tests may run several in turn).
    A journal looks them up once, with its append queue."""
    loop = asyncio.get_running_loop()
    rounds = _ROUNDS.get(loop)
    if rounds is None:
        rounds = _ROUNDS[loop] = SyncRounds(loop)
    return rounds


async def commit_in_round(write: GroupWrite) -> list[str]:
    """Make ``write`` durable in this broker's next sync round (see the module doc)."""
    return await rounds_of_running_loop().commit(write)
