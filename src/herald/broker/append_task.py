"""A journal's append task: groups of waiting appends, each committed durably.

Appends are serialised through one queue and one task per journal (started at the
first append), so they never interleave [I-APPEND-1]. The task takes every append
that is waiting (up to `MAX_GROUP_BYTES`), checks registers in order, writes all
the bodies and commits them with one sync (group commit), and only then publishes
the new write head and resolves the waiting requests [I-APPEND-3]. A request that
fails a check writes nothing [I-REG-1]; a sync that fails rolls the whole group
back [I-APPEND-2].

Embedded (no peers), a group joins the broker-wide sync round
(`herald.broker.sync_rounds`), which takes it itself as it opens and answers it
as it ends (`_take_for_round`: no wake-up of the task, which only takes what the
round hands back); a replicating primary pipelines its groups through its peers
(`herald.broker.primary_pipeline`). A mixin of `Journal`, which holds the
spool, the lock, the role and the roll rules.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from typing import TYPE_CHECKING

from herald.broker.group import (
    MAX_GROUP_BYTES,
    AppendCommit,
    Pending,
    as_herald_error,
    check_registers,
    commits_ahead,
    fail_group,
)
from herald.broker.metrics import count_group
from herald.broker.preconditions import catch_up_to_index, require_full_peerset
from herald.broker.sync_rounds import SyncRounds, Taken, rounds_of_running_loop
from herald.fragment.group_write import GroupWrite
from herald.fragment.spool import Spool
from herald.fragment.spool_stream import SpoolStream
from herald.protocol.errors import HeraldError, Status
from herald.protocol.fragment import Fragment
from herald.protocol.labels import LabelSet

if TYPE_CHECKING:
    from herald.broker.append_stream import StreamedAppend

log = logging.getLogger(__name__)

SYNC_RETRY_S = 0.25


class AppendTask:
    """The append queue and task of one journal (see the module doc). Relies on
    `Journal`'s spool, lock, role, index, roll rules and `PipelinedPrimary`."""

    _rounds: SyncRounds  # this loop's sync rounds, set with the queue (see _enqueue)
    #: A body streaming into the spool, holding its lock (`herald.broker.append_stream`).
    streaming: StreamedAppend | None = None
    _round_wanted = False  # a sync round will take this journal's queued appends
    #: The most bytes of queued appends one group takes (the rest go to the next).
    max_group_bytes = MAX_GROUP_BYTES

    def _enqueue(self, item: Pending | None) -> None:
        """Queue an append (None: a poke) for the append task, started on first use."""
        if self.streaming is not None:  # a slow one gives the spool back (see there)
            self.streaming.others_waiting()
        if self._queue is None:
            self._rounds = rounds_of_running_loop()
            self._queue = AppendQueue(self._rounds.loop)
            self._serving.start_soon(self._append_loop(self._queue), "append")
        rounds = self._rounds
        if item is not None and self.pipeline is None:  # the next round takes it (see _take_for_round)
            self._queue.put(item, wake=False)
            if not self._round_wanted:
                self._round_wanted = True
                rounds.want(self._take_for_round)
        else:
            self._queue.put(item)
        rounds.arrivals += 1
        if rounds.arrivals == rounds.gather_target:  # a finished round's writers are back
            rounds.arrived()

    def _take_for_round(self) -> Taken:
        """The group a sync round takes as it opens, and what answers it as the round
        ends: the task's `_run_group` and `_commit_group` for an embedded primary,
        run on the round's own callbacks (`SyncRounds.want`), so no task wakes. Any
        other case (the spool held, a pipeline, no longer primary or no lease, a
        spool closed) goes to the task, which takes the queued appends in order."""
        self._round_wanted = False
        queue = self._queue
        assert queue is not None
        if not queue.has_append():
            return None
        spool = self._spool
        if (self.pipeline is not None or self._inflight or spool is None
                or not self.is_primary or not self._lease_ok() or not self._spool_lock.try_acquire()):
            queue.wake()
            return None
        group, taken = queue.take(self.max_group_bytes)
        if not self._ready_to_write(group, now := time.time()):
            self._round_done(taken)
            return None
        spool = self._spool
        accepted, contents, registers = check_registers(group, spool.registers)
        if not accepted:
            self._round_done(taken)
            return None
        mark, begin = spool.mark(), spool.end
        write = GroupWrite(spool, contents, registers, now)
        write.answer_ahead = functools.partial(commits_ahead, accepted, begin)
        writer = getattr(accepted[0][0].future, "writer", None) if len(accepted) == 1 else None
        return write, functools.partial(self._round_ended, accepted, write, begin, mark, taken), writer

    def _round_ended(self, accepted: list[tuple[Pending, LabelSet]], write: GroupWrite, begin: int,
                     mark: object, taken: int, outcome: list[str] | BaseException) -> None:
        """A group `_take_for_round` gave ended its round: answer it, as `_commit_group`."""
        try:
            if isinstance(outcome, BaseException):
                self._group_failed(accepted, mark, outcome)
            elif (commits := write.answers) is not None:  # built while the log synced (`commits_ahead`)
                for (pending, _), commit in zip(accepted, commits):
                    pending.future.set_result(commit)
                self._show(commits[0].fragment, len(accepted), write.size)  # answered first: same loop turn
            else:
                self._published(accepted, write.contents, outcome, begin)
        finally:
            self._round_done(taken)

    def _group_failed(self, accepted: list[tuple[Pending, LabelSet]], mark: object, err: BaseException) -> None:
        """A group's write or sync failed: roll the spool back to ``mark`` (taken before
        the group was written), log it, and fail every append of the group with the
        error a client can act on [I-APPEND-2]; an error other than a disk's or
        Herald's (a bug) answers as an internal error."""
        spool = self._spool
        assert spool is not None
        spool.rollback(mark)
        log.error("journal=%s append failed, group rolled back: %s", self.spec.name, err)
        if not isinstance(err, (OSError, HeraldError)):
            err = HeraldError(Status.INTERNAL, f"internal error (logged by the broker): {err!r}")
        fail_group([pending for pending, _ in accepted], as_herald_error(err))

    def _round_done(self, taken: int) -> None:
        """Give the spool back; appends left queued past `MAX_GROUP_BYTES` (or
        queued meanwhile) go to the next round."""
        self._spool_lock.release()
        queue = self._queue
        assert queue is not None
        queue.task_done(taken)
        if not self._round_wanted and queue.has_append():
            self._round_wanted = True
            self._rounds.want(self._take_for_round)

    async def _append_loop(self, queue: AppendQueue) -> None:
        while True:
            await queue.wait()
            if self.pipeline is None and queue.has_append() and (gate := self._rounds.gate()) is not None:
                await gate  # the round under way ends: take every append queued by then
            elif self.pipeline is not None and self._gather_want:
                await self._gather(queue)  # the last group's writers come back (primary_pipeline)
            group, taken = queue.take(self.max_group_bytes)
            try:
                if not self._holding_spool_lock:
                    await self._spool_lock.acquire()
                    self._holding_spool_lock = True
                try:
                    await self._run_group(group)
                finally:
                    if not self._inflight:
                        self._holding_spool_lock = False
                        self._spool_lock.release()
            finally:
                queue.task_done(taken)

    def _keeps_inflight(self, group: list[Pending]) -> bool:
        """Whether ``group`` may be written while the groups in flight wait for their
        peers: only a group (or a poke) of the same synced pipeline, with no roll
        due; anything else (a roll, a new pipeline, a demotion, closing) finishes
        every group in flight first."""
        item = self._inflight[-1]
        assert self._spool is not None
        return (not self._closing and self.is_primary
                and self.pipeline is item.pipeline and item.pipeline.synced and self._lease_ok()
                and not self._roll_due(time.time(), self._spool.content_length + self._spool.pending_bytes))

    async def _run_group(self, group: list[Pending]) -> None:
        if self._inflight and not self._keeps_inflight(group):
            await self._finish_inflight()
        if self.is_primary and not self._lease_ok():
            self.demote()
            log.warning("journal=%s: the broker's lease may have expired; appends refused", self.spec.name)
        if not self.is_primary:
            for pending in group:  # queued while we were primary (e.g. before a pause)
                pending.future.set_exception(HeraldError(
                    Status.NOT_JOURNAL_PRIMARY_BROKER, f"this broker is no longer primary of {self.spec.name}"))
            return
        if self._inflight:  # no roll due (see _keeps_inflight): write the next group
            if group:
                await self._write_replicated(group)
            else:  # a poke: the peers of a group in flight answered
                await self._finish_answered()
            return
        if not self._ready_to_write(group, time.time()):
            return
        if self.pipeline is not None and not self.pipeline.synced:
            pipeline, loop = self.pipeline, asyncio.get_running_loop()
            if group and (wait_s := pipeline.pacer.wait_s(loop.time())):
                # A peer failed a moment ago: this group waits for the paced retry
                # rather than failing at once (a peer is often just behind our route).
                await asyncio.sleep(wait_s)
            try:
                await pipeline.sync(self)
            except HeraldError as err:  # logged by the pipeline, at a bounded rate
                for pending in group:
                    pending.future.set_exception(err)
                # Peers may lag our view of the route, or be down: try again when due.
                loop.call_later(max(SYNC_RETRY_S, pipeline.pacer.wait_s(loop.time())), self.poke)
                return
        if group:
            await self._commit_group(group)

    def _ready_to_write(self, group: list[Pending], now: float) -> bool:
        """Roll the spool if due and check the route before ``group`` is written
        (by the task or by a sync round); False, with the group failed, if not."""
        try:
            self._maybe_roll(now)
            require_full_peerset(self)  # the route may have shrunk while the group waited
            catch_up_to_index(self)  # never append under persisted bytes (INDEX_HAS_GREATER_OFFSET)
        except (OSError, HeraldError) as err:  # no descriptors or disk for the next spool
            fail_group(group, as_herald_error(err))
            return False
        return True

    async def _commit_group(self, group: list[Pending]) -> None:
        if self.pipeline is not None:
            await self._write_replicated(group)  # see herald.broker.primary_pipeline
            return
        spool = self._spool
        assert spool is not None
        accepted, contents, registers = check_registers(group, spool.registers)
        if not accepted:
            return
        mark = spool.mark()
        begin = spool.end
        try:
            sums = await self._write_durably(spool, contents, registers)
        except (OSError, HeraldError) as err:
            self._group_failed(accepted, mark, err)
            return
        self._published(accepted, contents, sums, begin)

    async def commit_streamed(self, stream: SpoolStream) -> AppendCommit:
        """Commit a body `herald.broker.append_stream` wrote into the spool (the
        caller holds the spool lock), in the next sync round as any group; its
        commit once durable [I-APPEND-3]. A failure rolls the spool back."""
        spool = self._spool
        assert spool is not None and stream.spool is spool
        if not self.is_primary or not self._lease_ok():  # demoted while the body arrived
            raise HeraldError(Status.NOT_JOURNAL_PRIMARY_BROKER,
                              f"this broker is no longer primary of {self.spec.name}")
        if not hasattr(self, "_rounds"):
            self._rounds = rounds_of_running_loop()
        mark, begin, registers = spool.mark(), spool.end, spool.registers
        try:
            sums = await self._rounds.commit(stream.group_write(registers, time.time()))
        except (OSError, HeraldError) as err:
            spool.rollback(mark)
            log.error("journal=%s streamed append failed, rolled back: %s", self.spec.name, err)
            raise as_herald_error(err) from None
        pending = Pending(b"", None, None, None, self._rounds.loop.create_future())
        self._publish_sized([(pending, registers)], [stream.length], sums, begin)
        return pending.future.result()

    def _published(self, accepted: list[tuple[Pending, LabelSet]], contents: list[bytes],
                   sums: list[str], begin: int) -> None:
        """A group from ``begin`` just committed: show it to readers, answer its appends."""
        self._publish_sized(accepted, [len(content) for content in contents], sums, begin)

    def _publish_sized(self, accepted: list[tuple[Pending, LabelSet]], sizes: list[int],
                       sums: list[str], begin: int) -> None:
        """`_published` for appends known by their sizes (a streamed body is not kept)."""
        spool = self._spool
        assert spool is not None
        self._show(fragment := spool.fragment(), len(accepted), sum(sizes))
        for (pending, regs), length, sha in zip(accepted, sizes, sums):
            end = begin + length
            pending.future.set_result(AppendCommit(begin, end, sha, regs, spool.end, fragment))
            begin = end

    def _show(self, fragment: Fragment, appends: int, size: int) -> None:
        """Readers see a group of ``appends`` committed up to ``fragment``'s end; metrics count it."""
        assert self._spool is not None
        self.index.add_local(fragment, self._spool.path)
        self.wake_readers()
        count_group(self.spec.name, appends, size)

    async def _write_durably(self, spool: Spool, contents: list[bytes], registers: LabelSet) -> list[str]:
        """Write a group and its commit record, synced together in the broker-wide
        sync round that covers every journal with a group ready [I-APPEND-3]. (With
        peers, `herald.broker.primary_pipeline` commits instead.)"""
        return await self._rounds.commit(GroupWrite(spool, contents, registers, time.time()))


class AppendQueue:
    """A journal's queue of appends (None: a poke) for its append task: the part of
    `asyncio.Queue` the task uses, for a fifth of the CPU (put, get and task_done
    cost 1.8 us per append there, in Python, on the loop). Loop only."""

    __slots__ = ("_items", "_joined", "_loop", "_pokes", "_unfinished", "_waiter", "_want")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: deque[Pending | None] = deque()
        self._pokes = 0  # the Nones among _items: `has_append` is asked twice per group
        self._unfinished = 0
        self._waiter: asyncio.Future[None] | None = None  # the task, waiting for an item
        self._joined: asyncio.Future[None] | None = None  # `join`, waiting for the last task_done
        self._want = 1  # items queued that wake the waiter (`wait_for`)

    @property
    def idle(self) -> bool:
        """Nothing queued, and the task not running a group."""
        return not self._unfinished

    def put(self, item: Pending | None, wake: bool = True) -> None:
        """Queue ``item``; ``wake=False``: a sync round takes it, not the task."""
        self._items.append(item)
        self._pokes += item is None
        self._unfinished += 1
        if wake and len(self._items) >= self._want:
            self.wake()

    def wake(self) -> None:
        """Wake the task to take what is queued."""
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __len__(self) -> int:
        return len(self._items)

    async def wait_for(self, count: int, timeout_s: float) -> None:
        """Until ``count`` items are queued, or ``timeout_s`` passed: one wake-up,
        not one per item."""
        if len(self._items) >= count:
            return
        self._want, waiter = count, self._loop.create_future()
        self._waiter = waiter
        timer = self._loop.call_later(timeout_s, _resolve, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._want = 1
            if self._waiter is waiter:
                self._waiter = None

    async def wait(self) -> None:
        """Until an item is queued."""
        while not self._items:
            self._waiter = self._loop.create_future()
            await self._waiter

    def has_append(self) -> bool:
        """Whether an append (not only pokes) is queued."""
        return len(self._items) > self._pokes

    def take(self, max_bytes: int) -> tuple[list[Pending], int]:
        """The next group: queued appends, in order, until ``max_bytes`` is reached
        (at least one); and how many items were taken (pokes included)."""
        items, group, size, taken = self._items, [], 0, 0
        while items and size < max_bytes:
            item = items.popleft()
            taken += 1
            if item is not None:
                group.append(item)
                size += len(item.content)
        self._pokes -= taken - len(group)
        return group, taken

    def task_done(self, count: int) -> None:
        self._unfinished -= count
        if self._unfinished == 0 and self._joined is not None:
            joined, self._joined = self._joined, None
            if not joined.done():
                joined.set_result(None)

    async def join(self) -> None:
        """Until every item queued so far was taken and its group ran."""
        while self._unfinished:
            if self._joined is None:
                self._joined = self._loop.create_future()
            await asyncio.shield(self._joined)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
