"""A journal's fragments beyond its spool: persisting, listing, pruning.

Completed spools are handed over here; the keeper compresses and uploads them to
the journal's first store (retrying forever, reporting failures to the store's
health checker so appends see an outage), then drops their local files. It lists
the stores into the index every ``fragment.refresh_interval`` — at once when a
range is missing that another replica is persisting — and prunes by retention on
an operator's request (brokers never delete by themselves, as in Gazette).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from herald.broker.metrics import METRICS
from herald.fragment.health import health_of
from herald.fragment.index import Index
from herald.fragment.persister import persist
from herald.fragment.stores import Store, list_fragments
from herald.protocol.fragment import Fragment
from herald.protocol.journal import JournalSpec

log = logging.getLogger(__name__)

PERSIST_RETRY_S = (0.5, 1, 2, 5, 10, 30)
# Uploads (compress + put + fsync, seconds each) run on their own threads: on the
# default executor, a restart that recovers thousands of spools queued every
# journal's open and every append behind them (issue 19 §1).
PERSIST_THREADS = 4
_persist_executor = ThreadPoolExecutor(PERSIST_THREADS, thread_name_prefix="herald-persist")
DRAIN_TIMEOUT_S = 10  # within server.STOP_DEADLINE_S, after the HTTP runner's 5 s
# How long a stop still waits once the store has failed an upload: the retry in
# flight may land, but a failing store must not hold a stop for DRAIN_TIMEOUT_S —
# the spools stay on local disk and are persisted after restart [I-FRAG-2].
FAILING_STORE_GRACE_S = 1.0


@dataclass(frozen=True, slots=True)
class Completed:
    """A rolled spool waiting to be persisted: its fragment and its two local files."""

    fragment: Fragment
    path: Path
    commits_path: Path


class KeptJournal(Protocol):
    """What the keeper needs of its journal, and nothing more: its spec and stores
    (read), its index (updated), and two nudges — wake blocked readers, and wake
    the append task to roll a spool that became the first fragment."""

    spec: JournalSpec
    stores: list[Store]
    index: Index
    roll_if_first: bool

    @property
    def write_head(self) -> int: ...

    def wake_readers(self) -> None: ...

    def poke(self) -> None: ...


class FragmentKeeper:
    """Persists, lists and prunes one journal's fragments (tasks owned by the journal)."""

    def __init__(self, journal: KeptJournal) -> None:
        self.journal = journal
        self.completed: asyncio.Queue[Completed] = asyncio.Queue()
        self.refresh_now = asyncio.Event()
        self.store_failing = asyncio.Event()  # set by a failed upload, cleared by a good one

    def hand_over(self, completed: Completed) -> None:
        """Queue a rolled spool for persisting (non-blocking)."""
        self.completed.put_nowait(completed)

    async def persist_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            done = await self.completed.get()
            try:
                if self.journal.stores:
                    await self._persist_with_retries(loop, done)
            finally:
                self.completed.task_done()

    async def _persist_with_retries(self, loop, done: Completed) -> None:
        attempt = 0
        while True:
            store = self.journal.stores[0]
            try:
                fragment = await loop.run_in_executor(
                    _persist_executor, persist, store, done.fragment, done.path, done.fragment.codec)
                break
            except OSError as err:
                delay = PERSIST_RETRY_S[min(attempt, len(PERSIST_RETRY_S) - 1)]
                log.warning("journal=%s persist of %s to %s failed (retry in %ss): %s",
                            self.journal.spec.name, done.fragment.content_name, store.url, delay, err)
                attempt += 1
                self.store_failing.set()
                health = health_of(store)
                health.report_failure(err)  # appends wait from now on; re-probed at once.
                await health.wait_recovery(delay)
        self.store_failing.clear()
        self.journal.index.add_remote(fragment)
        self.journal.index.drop_local(done.fragment.begin)
        self.journal.wake_readers()  # a reader waiting below a now-persisted fragment may jump
        # Off the event loop: unlinking a spool with its preallocated commits file
        # takes milliseconds (2 s for 1,000 journals at restart, measured).
        await loop.run_in_executor(_persist_executor, _remove_local_files, done)
        METRICS.persisted_fragments.labels(self.journal.spec.name).inc()
        log.info("journal=%s persisted %s to %s", self.journal.spec.name, fragment.content_name, fragment.store)

    async def list_stores(self) -> list[Fragment]:
        loop = asyncio.get_running_loop()
        listing: list[Fragment] = []
        for store in self.journal.stores:
            listing += await loop.run_in_executor(None, list_fragments, store, self.journal.spec.name)
        return listing

    async def refresh_loop(self) -> None:
        """List the stores every refresh_interval, or at once when a hole needs filling."""
        while True:
            try:
                await asyncio.wait_for(self.refresh_now.wait(), self.journal.spec.fragment.refresh_interval_s)
            except TimeoutError:
                pass
            self.refresh_now.clear()
            try:
                self.journal.index.replace_remote(await self.list_stores())
                self.journal.wake_readers()
            except OSError as err:
                log.warning("journal=%s store listing failed: %s", self.journal.spec.name, err)
            if self.journal.index.has_hole_below(self.journal.write_head):
                await asyncio.sleep(1.0)  # a peer is still persisting the range we lack
                self.refresh_now.set()

    async def drain(self) -> None:
        """Wait for queued spools to persist (SIGTERM path): at most DRAIN_TIMEOUT_S,
        and at most FAILING_STORE_GRACE_S more once the store fails an upload."""
        if not self.journal.stores:
            return
        joined = asyncio.ensure_future(self.completed.join())
        failing = asyncio.ensure_future(self.store_failing.wait())
        try:
            await asyncio.wait((joined, failing), timeout=DRAIN_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
            if not joined.done() and failing.done():
                await asyncio.wait((joined,), timeout=FAILING_STORE_GRACE_S)
            persisted = joined.done()
        finally:
            joined.cancel()
            failing.cancel()
        if not persisted:
            log.warning("journal=%s spools left unpersisted at shutdown (store %s); kept on local disk "
                        "and persisted after restart", self.journal.spec.name,
                        "failing" if failing.done() else "slow")

    async def prune(self, now_unix: float, dry_run: bool) -> list[Fragment]:
        """Delete persisted fragments whose age ≥ ``fragment.retention`` (≤ 0: none)."""
        retention = self.journal.spec.fragment.retention_s
        if retention <= 0:
            return []
        stores = {s.url: s for s in self.journal.stores}
        doomed = [f for f in self.journal.index.fragments()
                  if f.store in stores and f.mod_time and now_unix - f.mod_time >= retention]
        if dry_run:
            return doomed
        loop = asyncio.get_running_loop()
        for fragment in doomed:
            await loop.run_in_executor(None, stores[fragment.store].remove, fragment.content_path)
            self.journal.index.forget(fragment)
        self.journal.index.replace_remote(await self.list_stores())
        if doomed:  # the spool may now hold the first byte: persist it so readers can jump
            self.journal.roll_if_first = True
            self.journal.poke()
        return doomed


def _remove_local_files(done: Completed) -> None:
    """Delete a persisted spool's two files (blocking)."""
    for path in (done.path, done.commits_path):
        path.unlink(missing_ok=True)
