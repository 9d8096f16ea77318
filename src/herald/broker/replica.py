"""The replica's side of replication: applying the writes and syncs a primary sends.

A mixin of `Journal` (one journal, one spool, one lock), kept in its own module so
the primary's append path and the replica's read apart: the primary decides
fragment boundaries and offsets, and a replica follows — rolling when the primary
rolled, rolling forward when the primary is ahead — so every replica writes the
same fragments under the same names.
"""

from __future__ import annotations

import asyncio
import logging
import time

from herald.broker.sync_rounds import commit_replica_write
from herald.fragment.group_write import GroupWrite
from herald.protocol.errors import HeraldError, Status
from herald.protocol.labels import LabelSet

log = logging.getLogger(__name__)

# A pipelining primary sends a group before the previous one is acknowledged
# (herald.broker.primary_pipeline), on another connection: a group that arrives
# first waits this long for the one before it to commit here.
IN_ORDER_WAIT_S = 1.0


class ReplicaWrite(GroupWrite):
    """A replicated group's write: only the fragment's running SHA1 is computed.

    A primary's group needs each body's SHA1 (every append's answer carries its
    own); a replica answers with the fragment's SHA1 alone, and its one "body" is
    the primary's whole group, so a body SHA1 would be a second pass over every
    replicated byte, thrown away (~14 us per 16 KiB group). A group large enough to
    be hashed beside its write (`herald.fragment.spool_sums`) is sealed as usual.

    Its round syncs in place (data and commit line, two fdatasyncs side by side)
    like a primary's lone group past the log's `lone_bytes`. Logged instead (one
    fdatasync of the commit log, data inline; tried in session 9) a 31 KiB
    replica round cost more, not less: 321-386 us of process CPU per round
    against 206-285 in place, wall 2.2-3.5 ms against 1.5-1.6 (600 rounds each,
    load 9-10), as the log grows in zeros and the spool's copy is written back on
    top of the record. In the cluster (1 KiB x 32, load 8-12) the log's slow-disk
    check kept it off; without that check (peers at 1.03 fdatasyncs a group
    against 2.0, 7 interleaved pairs) neither appends/s nor CPU per append moved
    past the noise, and p99 was worse in 4 of 7. On this VM an fdatasync that writes dirty pages back costs 130-190
    us of CPU (a clean one ~25), whatever the way (``O_DSYNC``, ``RWF_DSYNC``):
    replication 3's six a group against replication 1's two are most of its extra
    CPU per append (`bench.cluster` reports them).
    """

    BODY_SUMS = False


class ReplicaSide:
    """Replicated writes and syncs, and rolling forward (callers of the last hold
    the spool lock). Relies on `Journal`'s spool, lock, index and roll methods."""

    async def apply_replicated(self, fragment_begin: int, begin: int, content: bytes,
                               registers: LabelSet) -> str:
        """A peer's side of a primary's group commit; returns the fragment's SHA1.

        The primary decides fragment boundaries: when it rolled, ``fragment_begin``
        says so and this replica rolls too, so replicas write identical fragments.
        """
        await self._await_write_head(begin)
        async with self._spool_lock:
            spool = self._spool
            assert spool is not None
            if spool.end != begin or fragment_begin not in (spool.begin, spool.end):
                raise HeraldError(Status.PROPOSAL_MISMATCH,
                                  f"replica of {self.spec.name} is at {spool.end}, not {begin}",
                                  extra={"write_head": spool.end})
            if fragment_begin != spool.begin:
                self._roll()
            spool = self._spool
            # In the broker-wide sync round, beside every other journal's group
            # (herald.broker.sync_rounds): data and commit line durable before the answer.
            await commit_replica_write(ReplicaWrite(spool, [content], registers, time.time()))
            fragment = spool.fragment()
            self.index.add_local(fragment, spool.path)
            self.wake_readers()
            return fragment.sum

    async def _await_write_head(self, begin: int) -> None:
        """Wait (bounded) until this replica's write head reaches ``begin``: the
        primary's previous group may still be on its way, or committing here."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + IN_ORDER_WAIT_S
        while self._spool is not None and self._spool.end < begin and not self._closing:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return  # answered as a mismatch: the primary re-syncs
            try:
                await asyncio.wait_for(self.wait_for_commit(), remaining)
            except TimeoutError:
                return

    async def sync_to(self, end: int, registers: LabelSet,
                      fragment_begin: int) -> tuple[int, int, LabelSet]:
        """A peer's side of a pipeline sync: roll forward to ``end`` if behind.

        A replica ahead of the primary answers with its own end and registers, and
        the primary rolls forward to it (the most advanced replica wins).
        """
        async with self._spool_lock:
            spool = self._spool
            assert spool is not None
            if spool.end < end:
                self.roll_forward(end, registers)
            elif spool.end == end and spool.begin != fragment_begin and fragment_begin == end:
                self._roll()  # the primary just rolled: start the next fragment with it
            return self.spool_position()

    def roll(self) -> None:
        """Complete the current spool now (it is persisted next). Callers hold the
        spool lock (the append task does)."""
        self._roll()

    def roll_forward(self, end: int, registers: LabelSet) -> None:
        """Start a new spool at ``end`` (bytes before it come from another replica's
        fragments, via the store). Callers hold the spool lock."""
        spool = self._spool
        assert spool is not None
        if spool.end != end:
            self._replace_spool(self._new_spool(end, registers))
        else:
            self._roll()
        self.fragments.refresh_soon()
        log.info("journal=%s rolled forward to %d", self.spec.name, end)

