"""A replicating primary's group commit, pipelined: later groups are written while
earlier ones wait for their peers.

Without pipelining each group cost its local write+fdatasync (beside the peers'),
then the wait for the slowest peer, then the local commit line's fdatasync, and only
then could the next group start: a journal's throughput was one peer round trip per
group. Here a group that has been written locally and sent to every peer (on its
stream, `herald.broker.peer_stream`) is *in flight*: its data and its own commit
line are fdatasync'd here *while* the peers sync theirs (`Spool.precommit_line`),
and the append task goes on to write the next groups (up to `PIPELINE_DEPTH` in
flight). A group whose peers all answered and whose local sync returned commits in
memory (readers see it) and is acknowledged, oldest first. The next group then
waits (briefly, `GATHER_SHARE`) for the writers just answered to come back, so
groups hold every writer, not half of them.

Durability and order are exactly as without pipelining:

- A group is acknowledged only after every peer answered that it committed the
  same fragment (same SHA1), and its bytes and its commit line are fdatasync'd
  here [I-APPEND-3]. A line synced for a group that then fails is zeroed
  (`Spool.drop_precommits`); if it reached the disk first, a restart keeps that
  group's bytes, as a peer that committed it does (never acknowledged: journals
  are at-least-once, docs/cluster.md).
- Groups finish in order. When one fails (a peer's error or a different SHA1, a
  local disk error), every group written after it fails too and is never
  acknowledged; the spool rolls back to before the failed group [I-APPEND-2], and
  the pipeline re-syncs its peers before the next group. Before rolling back, the
  later groups' replication and local syncs are awaited, so nothing of theirs is
  still on its way to a peer or a disk when the peers are re-synced. A peer applies
  a stream's groups one after another, and stops at the first that fails.
- Anything that changes the spool other than writing a group (a roll, a pipeline
  sync, a demotion, closing) first finishes every group in flight; the spool lock
  is held for as long as a group is in flight, so a replicated write or sync from
  another primary can never see pending bytes.

A mixin of `Journal`, which provides the spool, readers' wake-up and the roll rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from herald.broker.group import Pending, as_herald_error, check_registers, fail_group
from herald.broker.loop_threads import LOOP_THREADS
from herald.broker.metrics import METRICS
from herald.broker.replication import Pipeline
from herald.protocol.errors import HeraldError, Status
from herald.protocol.labels import LabelSet

if TYPE_CHECKING:
    from herald.broker.append_task import AppendQueue

log = logging.getLogger(__name__)

#: Groups in flight at most: each waits for its peers' answers (and its own sync)
#: while the next is written; a full pipeline waits for its oldest. Deeper pipelines
#: made groups smaller, and each group has a fixed cost on every broker (a frame, a
#: sync round, thread hand-offs: ~0.3-0.6 ms of CPU per replica on the streams of
#: `herald.broker.peer_stream`, 1-1.5 ms with a request per group). Three brokers on
#: two cores are CPU-bound, so fewer, larger groups win now that our own sync runs
#: beside the peers' instead of after them: with streams, replication 3 at 32
#: writers made 10.9-11.2 k appends/s at depth 1 against 8.8-9.05 k at depth 2, and
#: depth 4 was worse still (`bench cluster`, interleaved runs, same minutes).
#: Measured again with the whole machine under load (1 KiB x 32, load 10-12):
#: depth 2 made 3.0 k appends/s (2.7-4.6 k) against 4.5 k (4.4-7.7 k), in groups of
#: 12 against 16.
#:
#: Where a group's time goes at depth 1 (same load): a group cycle takes 2.0-3.8
#: ms against replication 1's 1.3 ms (one sync round), with groups of ~16 either
#: way. It is the slower of our own sync (data and line) and the peers' round trip
#: (1.3-2.5 ms, of which their sync round is 0.75-1.3 ms; the rest is loopback TCP
#: and wake-ups of their loop and ours), plus this loop's own work on the group.
#: With the peers not syncing at all (a diagnostic, never durable) their round trip
#: fell 0.3-0.4 ms but the cycle stayed at 2.1-2.6 ms: our own sync, as slow, took
#: the critical path. Without their syncs or ours,
#: it fell to 0.9-2.0 ms. So one fdatasync per replica group alone would not move
#: the ratio; both sides' syncs have to shrink. CPU per append over the three
#: brokers: 93-127 us against 33-40 us at replication 1 (our loop 30-43 us, of
#: which ~20 % is sending frames; each peer 21-28 us, half of it its round's
#: thread and syncs).
PIPELINE_DEPTH = 1
#: Gathering: once a group is acknowledged, the next waits for the writers it
#: answered to come back, at most this share of the group's cycle (taken to
#: acknowledged) and this long. Taken at once, the next group held only the appends
#: that arrived while the last was in flight: 32 writers settled into two cohorts
#: taking turns, groups of ~16, and every group costs each of the three brokers a
#: frame, a sync round and thread hand-offs. As the broker-wide sync round gathers
#: (`herald.broker.sync_rounds.GATHER_SHARE`). With it, groups of 25-30 against
#: 16, and CPU per append over the three brokers 56-82 us against 93-106 (primary
#: 28-39 against 44-50, each peer 14-21 against 24-30; 1 KiB x 32, load 9-12).
#: 4 ms instead of 2 gathered no more (groups 28-30, CPU within noise).
#:
#: The ceiling on two cores: with peers that answer each frame at once, writing and
#: syncing nothing (a diagnostic, never durable), the three brokers still took
#: 38-48 us per append against replication 1's 24-28 (primary ~31, each peer ~4.4:
#: the stream alone); with the load generator's ~9 us, 0.8x at CPU-bound load would
#: need the whole replicated path within ~1.25x of replication 1's, below what the
#: primary alone costs. Tried without gain, same minutes: peers committing through
#: the commit log (one fdatasync, data inline), peers or the primary syncing data
#: then line in one thread (no hand-off, two syncs in a row), no timed wake-up
#: after a replica's round.
#:
#: Where replication 3's tail (p99) comes from, traced per group and per append
#: (a /tmp tracer, never in the code; 1 KiB x 32, load 6-10). Medians: the gather
#: waits 0.2-0.3 ms; our sync is done 0.9-1.2 ms after the frames go out (its
#: thread starts 0.4 ms after them, behind the write on the loop), the slower
#: peer's answer is here at 1.0-1.4 ms (its apply, sync round and hand-offs
#: included, 0.5-0.9 ms; its answer back 0.1 ms): the syncs overlap, the peers'
#: round trip is the critical path. The p99 appends sit in groups whose flight
#: stalled, 16-50 ms against 1.0-2.2 ms typically: a helper thread or a loop of
#: any of the three brokers not scheduled, or a slow fdatasync (a peer's answer
#: back alone is 6-11 ms at p99). 3-10 % of appends missed a group after a gather
#: ran out (a load generator thread late), 10-40 % of the tail. The broker's own
#: part (queued to acknowledged) is under half of wrk's latency: 0.4-0.7 ms of
#: 1.1-2.2 ms at the median at replication 1, 1.7-2.5 of 3.4-4.7 at replication 3.
#: With 32 writers in a closed loop, mean latency is 32 / appends/s (Little's
#: law): at 0.60-0.66x the appends/s the mean is already 1.5-1.67x, so a p99
#: ratio under 1.5 needs a tighter tail than replication 1's, not only a shorter
#: gather. Tried, same minutes: a 1 ms cap (groups and p99 within noise), no
#: gather (groups of 20 against 29-30, 10-25 % more CPU per append), our data and
#: line synced in a row on one thread (our part 3.2-3.5 ms against 1.9-2.1).
GATHER_SHARE = 1.0
GATHER_MAX_S = 0.002
#: A group this small is written to the page cache (no sync) on the event loop when
#: the spool's files are open (no file to create or open): an executor hop costs
#: more than the write, and this write is on the critical path.
INLINE_WRITE_BYTES = 64 << 10


@dataclass(slots=True)
class InFlight:
    """A group written and synced here, sent to the peers, not yet acknowledged."""

    accepted: list[tuple[Pending, LabelSet]]
    contents: list[bytes]
    sums: list[str]  # each body's SHA1
    begin: int  # journal offset of the group's first byte
    end: int
    fragment_sum: str  # the fragment's SHA1 once this group commits
    registers: LabelSet  # after this group
    mark: object  # the spool's running SHA1 before this group (to roll back to)
    pipeline: Pipeline
    remote: asyncio.Future[list[str]]  # the peers' fragment SHA1s
    local: asyncio.Future[None]  # this group's data and commit line synced here
    line_bytes: int  # its commit line's length
    first_append_unix: float | None  # what its line sets, if anything
    started: float  # loop time it was taken (its cycle ends when it is acknowledged)

    def settled(self) -> bool:
        return self.remote.done() and self.local.done()


class PipelinedPrimary:
    """The replicated append path (see the module doc). Relies on `Journal`'s
    `_spool`, `pipeline`, `poke` and `_published`."""

    _inflight: deque[InFlight]  # oldest first; set by Journal.__init__
    _queue: AppendQueue | None  # the append task's (`herald.broker.append_task`)
    # The spool's descriptors, pinned open while any group is in flight: a group's
    # write and the fdatasync that makes it durable must use one descriptor (a
    # reopened one would not report a write-back error from before it was opened).
    _inflight_pin: contextlib.ExitStack | None = None
    # After a group is acknowledged with none left in flight: how many appends the
    # next waits for (those queued, and the writers it answered: `_gather`), and
    # for how long at most.
    _gather_want = 0
    _gather_s = 0.0

    async def _write_replicated(self, group: list[Pending]) -> None:
        """Write ``group`` here and send it to the peers; then finish the groups in
        flight whose peers answered (and wait for the oldest if the pipeline is full)."""
        spool = self._spool
        pipeline: Pipeline = self.pipeline
        inflight = self._inflight
        accepted, contents, registers = check_registers(
            group, inflight[-1].registers if inflight else spool.registers)
        if not accepted:
            return
        begin = spool.end + spool.pending_bytes
        mark, now = spool.mark(), time.time()
        loop = asyncio.get_running_loop()
        started = loop.time()
        remote = pipeline.replicate(spool.begin, begin, contents, registers)
        try:
            pin_first = self._inflight_pin is None
            pin = self._inflight_pin = self._inflight_pin or contextlib.ExitStack()
            if sum(map(len, contents)) <= INLINE_WRITE_BYTES and (not pin_first or _pin_if_open(spool, pin)):
                sums = _write_pinned(spool, contents, pin, False)  # pinned, open: no file to open
            else:
                sums = await loop.run_in_executor(None, _write_pinned, spool, contents, pin, pin_first)
        except (OSError, HeraldError) as err:
            # Peers may commit this group: re-sync them before the next one.
            pipeline.synced = False
            await _settled(remote)
            # Earlier groups commit or fail first; if one failed, the spool is already
            # rolled back to before it, and so before this group too.
            if await self._finish_inflight():
                spool.rollback(mark)
            self._release_pin()
            log.error("journal=%s append failed, group rolled back: %s", spool.journal, err)
            fail_group([pending for pending, _ in accepted], as_herald_error(err))
            return
        end, fragment_sum = begin + sum(map(len, contents)), spool.pending_sha1_hex()
        # Our sync of the group (data and commit line) runs beside the peers' (see
        # `Spool.precommit_line`), after the group before it.
        line, at, first = spool.precommit_line(end, fragment_sum, registers, now)
        local = (asyncio.ensure_future(_sync_after(inflight[-1].local, spool, line, at)) if inflight
                 else LOOP_THREADS.call(spool.sync_precommit, line, at))
        item = InFlight(accepted, contents, sums, begin, end, fragment_sum, registers, mark, pipeline,
                        remote, local, len(line), first, started)
        # Wake the append task once both are done, to finish this group even if no
        # other group comes (a poke finishes the groups that settled).
        for future in (remote, local):
            future.add_done_callback(lambda _: item.settled() and self.poke())
        inflight.append(item)
        await self._finish_answered(wait_oldest=len(inflight) >= PIPELINE_DEPTH)

    async def _gather(self, queue: AppendQueue) -> None:
        """Before the next group: wait for the writers the last one answered to come
        back (at most `GATHER_SHARE` of its cycle, `GATHER_MAX_S`), so the group
        holds them too (see `GATHER_SHARE`)."""
        want, self._gather_want = self._gather_want, 0
        if not self._inflight and self.pipeline is not None:
            await queue.wait_for(want, self._gather_s)

    async def _finish_inflight(self) -> bool:
        """Finish every group in flight; whether all of them committed."""
        while self._inflight:
            if not await self._finish_answered(wait_oldest=True):
                return False
        return True

    async def _finish_answered(self, wait_oldest: bool = False) -> bool:
        """Commit, with one commit line, the oldest groups in flight whose peers all
        answered alike (first waiting for the oldest's, if asked), and acknowledge
        them; fail the first that failed and every later one. False if any failed."""
        inflight = self._inflight
        if wait_oldest and inflight:
            await _settled(inflight[0].remote)
            await _settled(inflight[0].local)
        ready, failure = _answered(inflight)
        if ready:
            last = ready[-1]
            first = next((item.first_append_unix for item in ready if item.first_append_unix is not None), None)
            self._spool.commit_precommitted(last.end, last.fragment_sum, last.registers, first,
                                            sum(item.line_bytes for item in ready))
            METRICS.fdatasyncs.inc(2 * len(ready))  # data and commit line, as a sync round counts them
            for item in ready:
                inflight.popleft()
                self._published(item.accepted, item.contents, item.sums, item.begin)
            if not inflight:
                self._release_pin()
                cycle_s = asyncio.get_running_loop().time() - ready[0].started
                # What is queued now, and as many again as it just answered.
                queued = len(self._queue) if self._queue is not None else 0
                self._gather_want = queued + sum(len(item.accepted) for item in ready)
                self._gather_s = min(GATHER_SHARE * cycle_s, GATHER_MAX_S)
        if failure is not None:
            await self._fail_from(inflight[0], failure)
            return False
        return True

    def _release_pin(self) -> None:
        """Unpin the spool's descriptors: no group is in flight any more."""
        pin, self._inflight_pin = self._inflight_pin, None
        if pin is not None:
            pin.close()

    async def _fail_from(self, first: InFlight, err: HeraldError) -> None:
        """``first`` (the oldest group not committed) failed: fail it and every later
        group, and roll the spool back to before it [I-APPEND-2]. No ack for any."""
        first.pipeline.synced = False
        failed = list(self._inflight)
        self._inflight.clear()
        for item in failed:
            await _settled(item.remote)  # none of its requests still on the way to a peer
            await _settled(item.local)  # nor a sync of its line still running here
        self._spool.rollback(first.mark)
        self._spool.drop_precommits()
        self._release_pin()
        log.error("journal=%s replicated append failed, %d groups rolled back: %s",
                  self._spool.journal, len(failed), err.message)
        for item in failed:
            fail_group([pending for pending, _ in item.accepted], err)


async def _sync_after(previous: asyncio.Future, spool, line: bytes, at: int) -> None:
    """Sync a group's data and line once the group before it is synced (or failed):
    one sync at a time, in order, so lines land in order."""
    await _settled(previous)
    await LOOP_THREADS.call(spool.sync_precommit, line, at)


def _write_pinned(spool, contents: list[bytes], pin: contextlib.ExitStack, pin_first: bool) -> list[str]:
    """`Spool.write_pending`, first pinning the spool's descriptors on ``pin`` for
    the first group in flight (blocking: opens the files if they are closed)."""
    if pin_first:
        pin.enter_context(spool.holding_descriptors())
    return spool.write_pending(contents)


def _pin_if_open(spool, pin: contextlib.ExitStack) -> bool:
    """Pin the spool's descriptors on ``pin`` if they are open (never blocking).
    At depth 1 every group is the first in flight: without this, each one paid an
    executor hop for a write of a few KiB to open files."""
    pool = spool._pool
    if not pool.pin_if_open(spool):
        return False
    pin.callback(pool.unpin, spool)
    return True


def _answered(inflight: deque[InFlight]) -> tuple[list[InFlight], HeraldError | None]:
    """The oldest groups whose peers all answered with our fragment's SHA1, and the
    error of the group after them if its replication failed."""
    ready = []
    for item in inflight:
        if not item.settled():
            return ready, None
        try:
            item.local.result()
            peer_sums = item.remote.result()
        except (OSError, HeraldError) as err:
            return ready, as_herald_error(err)
        except Exception as err:  # noqa: BLE001 - a bug in the client: the group fails, loudly
            log.exception("replication of journal=%s failed", item.pipeline.journal)
            return ready, HeraldError(Status.INTERNAL, f"replication failed: {err!r}")
        if any(peer != item.fragment_sum for peer in peer_sums):
            return ready, HeraldError(Status.PROPOSAL_MISMATCH, "a replica computed a different fragment")
        ready.append(item)
    return ready, None


async def _settled(future: asyncio.Future) -> None:
    """Wait for ``future`` to end, whatever its outcome (its error is another's)."""
    if future.done():  # most are, when a poke finishes them: no shield, no task switch
        return
    with contextlib.suppress(Exception):
        await asyncio.shield(future)
