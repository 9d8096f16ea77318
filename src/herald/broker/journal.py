"""One journal as served by its broker: spool, index, append pipeline, persister.

Appends are serialised through one queue and one task (`herald.broker.append_task`),
so they never interleave [I-APPEND-1]; each group of appends is acknowledged only
once durable [I-APPEND-3].

Completed spools go to a persister task that compresses and uploads them to the
journal's first store, then drops the local files. The stores are listed every
``fragment.refresh_interval``, so fragments written by others (or before a
restart on an empty disk [I-FRAG-1]) join the index.

A journal that is served but not written holds no task and no queue: the append
task starts with the first append, the persister with the first completed spool,
the pulse only for a ``flush_interval``, and listings are timers. A broker serves
thousands of journals, most of them idle (issue 19 §1).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from pathlib import Path
from urllib.parse import quote

from herald.broker.append_task import AppendQueue, AppendTask
from herald.broker.change_signal import ChangeSignal
from herald.broker.fragment_keeper import Completed, FragmentKeeper
from herald.broker.group import AppendCommit, CalledAnswer, Pending
from herald.broker.preconditions import await_full_peerset, catch_up_to_index, peerset_is_short
from herald.broker.primary_pipeline import PipelinedPrimary
from herald.broker.replica import ReplicaSide
from herald.broker.replication import Pipeline
from herald.broker.spool_rolling import SpoolRolling
from herald.broker.tasks import TaskSet
from herald.broker.try_lock import TryLock
from herald.fragment.commit_log import CommitLog
from herald.fragment.fdpool import retry_out_of_descriptors
from herald.fragment.health import StoreHealth, health_of
from herald.fragment.index import Index, Located
from herald.fragment.spool import Spool
from herald.fragment.spool_recovery import RecoveredSpool, recover_spools
from herald.fragment.stores import Store
from herald.protocol.errors import HeraldError, Status, ValidationError
from herald.protocol.fragment import Fragment
from herald.protocol.journal import JournalSpec
from herald.protocol.labels import LabelSelector, LabelSet

log = logging.getLogger(__name__)


class Journal(AppendTask, ReplicaSide, PipelinedPrimary, SpoolRolling):
    """A served journal. Create with ``await Journal.open(...)``; ``await close()`` it.

    Its role is set by the broker through `become_primary` and `demote`; the
    replica's side of replication (writes a primary sends) is `ReplicaSide`."""

    def __init__(self, spec: JournalSpec, data_dir: Path, stores: list[Store],
                 lease_ok: Callable[[], bool] = lambda: True, commit_log: CommitLog | None = None):
        self.spec = spec
        # The data dir's commit log (its owner's, herald.broker.datadir), given to each
        # spool this journal creates; None (a journal on its own): spools sync in place.
        self._commit_log = commit_log
        # Whether this broker may still acknowledge (its etcd lease cannot have expired):
        # checked before every group is written, so a broker resumed from a pause past
        # its lease acknowledges nothing, even before it learns the lease is gone.
        self._lease_ok = lease_ok
        self.stores = stores
        self.directory = data_dir / "spools" / quote(spec.name, safe="")
        self.index = Index()
        self._spool: Spool | None = None
        # Created with the append task, at the first append or poke (see _enqueue).
        self._queue: AppendQueue | None = None
        self._commit_event: asyncio.Event | None = None  # created by the first waiting reader
        self.role_changes = ChangeSignal()  # set by become_primary/demote: wakes appends on a short peerset
        # Loops that stop before the final drain, and the persister that drains.
        self._serving = TaskSet(f"serving:{spec.name}")
        self._persisting = TaskSet(f"persisting:{spec.name}")
        self._pulsing = False
        self._recovered: list[Completed] = []  # until persist_recovered
        self._closing = False
        self.roll_if_first = False  # set by prune: persist a spool that became the first fragment
        self._spool_lock = TryLock()  # one mutator of the spool at a time
        # The append task holds the spool lock from a group's start while any group is
        # in flight (herald.broker.primary_pipeline), not just while one runs.
        self._holding_spool_lock = False
        self._inflight = deque()
        self.fragments = FragmentKeeper(self, self._serving, self._persisting)
        # Cluster role: a primary replicates through ``pipeline`` (None: embedded or a
        # peerset of one); a non-primary replica only takes replicated writes.
        self.is_primary = True
        self.pipeline: Pipeline | None = None
        self._health: StoreHealth | None = None  # of stores[0]: see _first_store_health

    # -- lifecycle ---------------------------------------------------------------------

    @classmethod
    async def open(cls, spec: JournalSpec, data_dir: Path, stores: list[Store],
                   lease_ok: Callable[[], bool] = lambda: True, persist_recovered: bool = True,
                   commit_log: CommitLog | None = None) -> Journal:
        """Recover local spools, list the stores and start serving. Blocks on disk I/O.

        With ``persist_recovered=False`` the recovered spools wait for
        `persist_recovered` (a starting broker serves first, then uploads)."""
        journal = cls(spec, data_dir, stores, lease_ok, commit_log)
        await journal._recover()
        if persist_recovered:
            journal.persist_recovered()
        journal.fragments.refresh_later()
        journal._start_pulse_if_needed()
        return journal

    async def _recover(self) -> None:
        # The spools are recovered on the default executor while remote stores are
        # listed on their own threads (`FragmentKeeper.list_first`): a store that
        # hangs delays this open by at most OPEN_LISTING_S, and the journal is then
        # served unlisted (no appends) until a listing answers. Local file stores
        # are listed on the same trip (a restart opens thousands of journals, issue
        # 19 §1). The spool directory is created with the first spool's files, so
        # a journal never written has none.
        loop, inline = asyncio.get_running_loop(), self.fragments.lists_inline
        recovering = loop.run_in_executor(None, self._recover_blocking, inline)
        if not inline:
            await self.fragments.list_first()
        recovered, registers, listing = await recovering
        if listing is not None:
            self.fragments.take_first_listing(listing)
        for spool in recovered:
            self.index.add_local(spool.fragment, spool.path)
        self._recovered = [Completed(s.fragment, s.path, s.commits_path) for s in recovered]
        head = max([self.index.end_offset] + [s.fragment.end for s in recovered])
        new_spool = partial(self._new_spool, head, registers)
        # Only registers make a new spool write (a commit record carrying them).
        self._spool = await loop.run_in_executor(None, new_spool) if len(registers) else new_spool()

    def _recover_blocking(self, list_stores: bool
                          ) -> tuple[list[RecoveredSpool], LabelSet, list[Fragment] | OSError | None]:
        recovered, registers = retry_out_of_descriptors("recovering spools", lambda: recover_spools(
            self.directory, self.spec.name, self.spec.fragment.compression_codec))
        listing: list[Fragment] | OSError | None = None
        if list_stores:
            try:
                listing = self.fragments.list_stores_blocking()
            except OSError as err:
                listing = err
        return recovered, registers, listing

    def persist_recovered(self) -> None:
        """Hand the spools recovered at open to the persister (once; non-blocking)."""
        recovered, self._recovered = self._recovered, []
        for completed in recovered:
            self.fragments.hand_over(completed)

    async def close(self) -> None:
        """Finish queued appends, roll the spool and persist what can be (SIGTERM path)."""
        self._closing = True
        if self._queue is not None:
            self._queue.put(None)
            await self._queue.join()
        if self._commit_log is not None and self._commit_log.lines_pending:
            # Its spools' commit lines left to the log (herald.fragment.commit_log.defer)
            # reach their files: a journal opened again in this process recovers from them.
            await asyncio.get_running_loop().run_in_executor(None, self._commit_log.flush_lines)
        try:
            self._roll()
        except (OSError, HeraldError) as err:  # the spool stays on disk, recovered at the next start
            log.warning("journal=%s could not roll its spool at close: %s", self.spec.name, err)
        self.fragments.stop_refreshing()
        if self.pipeline is not None:
            self.pipeline.close()
        await self._serving.stop()
        await self.fragments.drain()
        if self._commit_event is None:
            self._commit_event = asyncio.Event()
        self._commit_event.set()  # and left set: readers waiting now or later return
        await self._persisting.stop()
        if self._spool:
            self._spool.close()

    # -- role --------------------------------------------------------------------------

    def become_primary(self, pipeline: Pipeline | None) -> None:
        """Take appends, replicating each group through ``pipeline`` (None: a peerset
        of one). A new pipeline syncs its peers before the next group commits."""
        if self.pipeline is not None and self.pipeline is not pipeline:
            self.pipeline.close()  # its peer streams (herald.broker.peer_stream)
        self.is_primary, self.pipeline = True, pipeline
        self.role_changes.signal()

    def demote(self) -> None:
        """Stop taking appends (another broker is primary, or our lease is gone);
        replicated writes from the primary are still taken."""
        if self.pipeline is not None:
            self.pipeline.close()
        self.is_primary, self.pipeline = False, None
        self.role_changes.signal()

    def update_spec(self, spec: JournalSpec, stores: list[Store]) -> None:
        """A new revision of the spec: takes effect at the next roll / refresh, but a
        store never listed is listed before the next append (`stores_changed`)."""
        self.spec, self.stores = spec, stores
        self.fragments.stores_changed()
        self._start_pulse_if_needed()

    # -- appends -----------------------------------------------------------------------

    @property
    def write_head(self) -> int:
        assert self._spool is not None
        return self._spool.end

    def spool_position(self) -> tuple[int, int, LabelSet]:
        """The current spool's begin, end (= write head) and registers."""
        assert self._spool is not None
        return self._spool.begin, self._spool.end, self._spool.registers

    @property
    def registers(self) -> LabelSet:
        assert self._spool is not None
        return self._spool.registers

    async def append(self, content: bytes, check: LabelSelector | None = None,
                     union: LabelSet | None = None,
                     subtract: LabelSet | None = None) -> AppendCommit:
        """Append ``content`` atomically; returns once it is durable [I-APPEND-3].

        Raises RegisterMismatchError (nothing written) [I-REG-1]. If the caller is
        cancelled after the request is queued, the append may still commit (as when a
        client disconnects after sending its whole body); it is never partial.
        """
        self._refuse_unless_serving()
        if (union or subtract) and not content:
            raise ValidationError("content", "register modification requires a non-empty append")
        await await_full_peerset(self)  # else INSUFFICIENT_JOURNAL_BROKERS
        if self.stores and not (health := self._first_store_health()).is_healthy:
            # Spools must reach the first store; while it is down, refuse new bytes
            # after a bounded wait (FRAGMENT_STORE_UNHEALTHY, gazette-facts §4.6).
            await health.require_healthy()
        pending = Pending(content, check, union, subtract, asyncio.get_running_loop().create_future())
        self._enqueue(pending)
        return await asyncio.shield(pending.future)

    def append_nowait(self, content: bytes, answer: Callable[[AppendCommit | BaseException], object]) -> bool:
        """Queue a plain append (no registers), to be answered by a call of
        ``answer`` with its `AppendCommit` (once durable, as `append` returns
        [I-APPEND-3]) or its error: the append fast path's way in
        (`herald.broker.front`), with no task or future per request. False (nothing
        queued) when the first store is unhealthy or the peerset short of
        ``replication``: the caller awaits `append`, which waits for them (boundedly)."""
        self._refuse_unless_serving()
        if (self.stores and not self._first_store_health().is_healthy) or peerset_is_short(self):
            return False
        self._enqueue(Pending(content, None, None, None, CalledAnswer(answer)))
        return True

    def _refuse_unless_serving(self) -> None:
        if self._closing:
            raise HeraldError(Status.NOT_JOURNAL_BROKER, "broker is shutting down")
        if not self.is_primary:
            raise HeraldError(Status.NOT_JOURNAL_PRIMARY_BROKER,
                              f"this broker is not the primary of {self.spec.name}")
        if not self.fragments.listed:  # the persisted head is unknown (gazette-facts §8.2)
            raise self.fragments.unlisted_error()

    def _first_store_health(self) -> StoreHealth:
        """The first store's health checker, looked up once per store rather than per
        append (the broker-wide lookup is a weak-keyed dict: measurable per request)."""
        store = self.stores[0]
        if self._health is None or self._health.store is not store:
            self._health = health_of(store)
        self._health.start()  # idempotent: restarts a checker whose task ended, as health_of does
        return self._health

    def try_take_spool(self) -> Spool | None:
        """The spool, held for the caller until `release_spool`, if nothing else
        writes it or waits to: no append queued or in flight, an embedded (or
        single-replica) primary with its lease, its first store healthy. Rolled
        first if due. Else None, at once: `herald.broker.append_stream`'s way in."""
        queue = self._queue
        if (self._closing or not self.is_primary or self.pipeline is not None
                or (queue is not None and not queue.idle) or self._inflight or not self._lease_ok()
                or peerset_is_short(self) or (self.stores and not self._first_store_health().is_healthy)
                or not self.fragments.listed or not self._spool_lock.try_acquire()):
            return None
        try:
            self._maybe_roll(time.time())
            catch_up_to_index(self)
        except (OSError, HeraldError):  # the queued path meets the same error and answers it
            self._spool_lock.release()
            return None
        return self._spool

    def release_spool(self) -> None:
        """Give back the spool `try_take_spool` returned."""
        self._spool_lock.release()

    def wake_readers(self) -> None:
        if self._closing and self._commit_event is not None and self._commit_event.is_set():
            return  # closed: the event stays set
        event, self._commit_event = self._commit_event, None
        if event is not None:
            event.set()

    def poke(self) -> None:
        """Wake the append task with no append (to sync a new pipeline, or roll)."""
        self._enqueue(None)

    def _start_pulse_if_needed(self) -> None:
        if self.spec.fragment.flush_interval_s and not self._pulsing:
            self._pulsing = True
            self._serving.start_soon(self._pulse_loop(), "pulse")

    async def _pulse_loop(self) -> None:
        """Wake the append task now and then so flush_interval rolls without traffic
        (only a spool holding bytes can roll; an empty one needs no wake-up)."""
        while True:
            await asyncio.sleep(max(1.0, min(60.0, self.spec.fragment.flush_interval_s or 60.0) / 4))
            if self._spool is not None and self._spool.content_length:
                self.poke()

    # -- reads -------------------------------------------------------------------------

    def locate(self, offset: int) -> Located | None:
        """Where to read ``offset`` from, or None if it is at/after the write head."""
        if offset >= self.write_head:
            return None
        return self.index.locate(offset, time.time())

    async def wait_for_commit(self) -> None:
        """Return once the next group commits (or the journal closes)."""
        if self._commit_event is None:
            self._commit_event = asyncio.Event()
        await self._commit_event.wait()
