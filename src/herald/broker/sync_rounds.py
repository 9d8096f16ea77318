"""Broker-wide group commit: one sync round covers every journal with appends pending.

Each journal already gathers the appends that arrive together into one group. With
many journals, syncing each group on its own costs an executor hop, a loop wake-up
and two fdatasyncs per journal, one after another as threads free up. Here the
groups of every journal that is ready join one round: a single executor job runs
`herald.fragment.rounds.write_round` for all of them, and the groups that arrive
meanwhile form the next round, which starts the moment this one ends.

    sums = await commit_in_round(GroupWrite(spool, bodies, registers, now))

Acknowledgement is unchanged: a group's future resolves only after its own data and
commit line are both fdatasync'd [I-APPEND-3]; a group that fails fails alone.
No background task: rounds are driven by their executor jobs' completion callbacks,
so a cancelled appender never strands the other journals of its round.
"""

from __future__ import annotations

import asyncio
import time
import weakref

from herald.broker.metrics import METRICS
from herald.fragment.rounds import GroupWrite, uses_syncfs, write_round
from herald.protocol.errors import HeraldError

__all__ = ["SyncRounds", "commit_in_round"]

Waiter = tuple[GroupWrite, "asyncio.Future[list[str]]"]
Outcomes = list[list[str] | OSError | HeraldError]


class SyncRounds:
    """The rounds of one event loop (one broker). Not thread-safe: loop only."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiting: list[Waiter] = []
        self._running = False
        self.rounds = 0
        self.groups = 0

    async def commit(self, write: GroupWrite) -> list[str]:
        """Make ``write`` durable in the next round; its body SHA1s, or its error."""
        done: asyncio.Future[list[str]] = self._loop.create_future()
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
        if uses_syncfs(writes):
            METRICS.syncfs.inc()
        else:
            METRICS.fdatasyncs.inc(2 * len(batch))
        job = self._loop.run_in_executor(None, write_round, writes)
        started = time.perf_counter()
        job.add_done_callback(lambda finished: self._end_round(batch, finished, started))

    def _end_round(self, batch: list[Waiter], job: asyncio.Future[Outcomes], started: float) -> None:
        METRICS.sync_round_seconds.observe(time.perf_counter() - started)
        outcomes: list[list[str] | BaseException]
        try:
            outcomes = list(job.result())
        except BaseException as err:  # noqa: BLE001 - a bug or loop shutdown: every waiter hears of it
            outcomes = [err] * len(batch)
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
        self._loop.call_soon(self._start_next_round)

    def _start_next_round(self) -> None:
        if self._waiting:
            self._start_round()
        else:
            self._running = False


_ROUNDS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SyncRounds] = weakref.WeakKeyDictionary()


def rounds_of_running_loop() -> SyncRounds:
    """This loop's rounds (a broker runs one loop; tests may run several in turn)."""
    loop = asyncio.get_running_loop()
    rounds = _ROUNDS.get(loop)
    if rounds is None:
        rounds = _ROUNDS[loop] = SyncRounds(loop)
    return rounds


async def commit_in_round(write: GroupWrite) -> list[str]:
    """Make ``write`` durable in this broker's next sync round (see the module doc)."""
    return await rounds_of_running_loop().commit(write)
