"""A journal's fragments beyond its spool: persisting, listing, pruning.

Completed spools are handed over here; the keeper compresses and uploads them to
the journal's first store (retrying forever, reporting failures to the store's
health checker so appends see an outage), then drops their local files. It lists
the stores into the index every ``fragment.refresh_interval`` — at once when a
range is missing that another replica is persisting — and prunes by retention on
an operator's request (brokers never delete by themselves, as in Gazette).

An idle journal costs the keeper no task: the persister starts with the first
hand-over, and each listing is a one-shot task started by a timer (jittered, so
thousands of journals opened together do not list their stores all at once).
A broker serves thousands of journals, most of them idle (issue 19 §1).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from herald.broker.listing_threads import listing_threads
from herald.broker.metrics import METRICS
from herald.broker.tasks import TaskSet
from herald.fragment.health import health_of
from herald.fragment.index import Index
from herald.fragment.persister import lower_thread_priority, persist
from herald.fragment.spool_recycling import retire
from herald.fragment.stores import FileStore, Store, list_fragments
from herald.protocol.errors import HeraldError, Status
from herald.protocol.fragment import Fragment
from herald.protocol.journal import JournalSpec

log = logging.getLogger(__name__)

PERSIST_RETRY_S = (0.5, 1, 2, 5, 10, 30)
# Uploads (compress + put + fsync, seconds each) run on their own threads: on the
# default executor, a restart that recovers thousands of spools queued every
# journal's open and every append behind them (issue 19 §1).
PERSIST_THREADS = 4
# They run below the appends' priority (`lower_thread_priority`): on two cores,
# compressing a rolled fragment took a quarter of the CPU from 1 MiB appends.
_persist_executor = ThreadPoolExecutor(PERSIST_THREADS, thread_name_prefix="herald-persist",
                                       initializer=lower_thread_priority)
DRAIN_TIMEOUT_S = 10  # within server.STOP_DEADLINE_S, after the HTTP runner's 5 s
# How long a stop still waits once the store has failed an upload: the retry in
# flight may land, but a failing store must not hold a stop for DRAIN_TIMEOUT_S —
# the spools stay on local disk and are persisted after restart [I-FRAG-2].
FAILING_STORE_GRACE_S = 1.0
HOLE_RETRY_S = 1.0  # listing again while a peer is still persisting a range we lack
REFRESH_JITTER = 0.25  # each listing is due after refresh_interval × (1 ± this)
# A read below the write head that the index cannot place lists the stores at once,
# but at most this often per journal: readers hammering a hole share listings.
READ_MISS_LISTING_S = 0.2
# A journal's open waits this long for its first listing; past it the journal is
# served unlisted (appends and reads below its head refused, naming the store) while
# the listing goes on, retried with PERSIST_RETRY_S back-off: a store that accepts
# connections and never answers (S3's read timeout is 60 s) held the broker's whole
# resolver pass, and every other journal's role change with it.
OPEN_LISTING_S = 3.0


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
    """Persists, lists and prunes one journal's fragments. Its tasks belong to the
    journal: listings to ``refreshing`` (stopped before the final drain), the
    persister to ``persisting`` (stopped after it)."""

    def __init__(self, journal: KeptJournal, refreshing: TaskSet, persisting: TaskSet) -> None:
        self.journal = journal
        self._refreshing, self._persisting = refreshing, persisting
        self._completed: asyncio.Queue[Completed] | None = None  # with the persister
        self._refresh_timer: asyncio.TimerHandle | None = None
        self._refresh_running = False
        self._refresh_again = False
        self._listing_now: asyncio.Future[None] | None = None  # a read miss's listing, shared
        self._listed_now_at = float("-inf")  # when the last one finished (loop time)
        # Set by a failed upload, cleared by a good one; made with the persister.
        self.store_failing: asyncio.Event | None = None
        # Whether every store the spec names was listed: until then the persisted head
        # is unknown, so the journal takes no append (gazette-facts §8.2: the first
        # index refresh precedes appends), at open and after `stores_changed`.
        self.listed = not journal.stores
        self._listed_urls: frozenset[str] = frozenset()  # the stores the last good listing covered
        self._listing_until_listed = False
        self._first_answer = asyncio.Event()  # the first listing succeeded or failed
        self._listing_error = "listing not answered yet"

    def hand_over(self, completed: Completed) -> None:
        """Queue a rolled spool for persisting, starting the persister on first use
        (non-blocking; needs the running loop)."""
        if self._completed is None:
            self._completed, self.store_failing = asyncio.Queue(), asyncio.Event()
            self._persisting.start_soon(self._persist_loop(self._completed), "persist")
        self._completed.put_nowait(completed)

    async def _persist_loop(self, completed: asyncio.Queue[Completed]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            done = await completed.get()
            try:
                if self.journal.stores:
                    await self._persist_with_retries(loop, done)
            finally:
                completed.task_done()

    async def _persist_with_retries(self, loop, done: Completed) -> None:
        attempt = 0
        while True:
            store = self.journal.stores[0]
            started = time.perf_counter()
            try:
                fragment = await loop.run_in_executor(
                    _persist_executor, persist, store, done.fragment, done.path, done.fragment.codec)
                METRICS.upload_seconds.observe(time.perf_counter() - started)
                break
            except OSError as err:
                METRICS.upload_failures.labels(store.url).inc()
                delay = PERSIST_RETRY_S[min(attempt, len(PERSIST_RETRY_S) - 1)]
                log.warning("persisting a fragment failed (retry in %ss): %s", delay, err,
                            extra={"journal": self.journal.spec.name, "fragment": done.fragment.content_name,
                                   "store": store.url})
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
        METRICS.persisted_bytes.labels(self.journal.spec.name).inc(fragment.end - fragment.begin)
        log.info("persisted fragment", extra={"journal": self.journal.spec.name,
                                              "fragment": fragment.content_name, "store": fragment.store})

    async def list_stores(self, stores: list[Store] | None = None) -> list[Fragment]:
        """Every fragment ``stores`` (default: the journal's) hold, on their listing threads."""
        stores = list(self.journal.stores) if stores is None else stores
        return await listing_threads(stores).call(self.list_stores_blocking, stores)

    @property
    def lists_inline(self) -> bool:
        """Whether the open lists on its spool-recovery trip, as it did before lists
        were bounded: every store is a local `FileStore`, which answers at disk speed
        (one executor hop less per journal, measurable in a restart of thousands)."""
        return not self.listed and all(isinstance(store, FileStore) for store in self.journal.stores)

    def take_first_listing(self, listing: list[Fragment] | OSError) -> None:
        """The listing made inline at open (see `lists_inline`); a failed one is retried."""
        if isinstance(listing, OSError):
            self._listing_error = f"listing failed: {listing}"
            log.warning("store listing failed at open (retrying): %s", listing,
                        extra={"journal": self.journal.spec.name})
            self._start_listing_until_listed()
        else:
            self.journal.index.replace_remote(listing)
            self._mark_listed(self.journal.stores)

    def stores_changed(self) -> None:
        """The spec's stores changed (`Journal.update_spec`). A store never listed may
        hold fragments written elsewhere, past our head: the journal is unlisted
        (appends refused, naming it) until listed, as at open, not appending over
        them for a ``refresh_interval``. Non-blocking; needs the running loop."""
        if {store.url for store in self.journal.stores} <= self._listed_urls:
            return
        self.listed = False
        self._listing_error = "a store new to the spec, not listed yet"
        self._start_listing_until_listed()

    def _start_listing_until_listed(self) -> None:
        if not self._listing_until_listed:
            self._listing_until_listed = True
            self._refreshing.start_soon(self._list_until_listed(), "first-listing")

    def _mark_listed(self, stores: list[Store]) -> None:
        """A listing of ``stores`` succeeded: the journal is listed if they cover
        every store its spec names now (a spec may have changed meanwhile)."""
        self._listed_urls = frozenset(store.url for store in stores)
        self.listed = {store.url for store in self.journal.stores} <= self._listed_urls

    async def list_first(self, timeout_s: float = OPEN_LISTING_S) -> None:
        """Start listing until a listing succeeds (back-off between failures) and
        wait for the first answer at most ``timeout_s``: the open of a journal whose
        store fails or hangs goes on, the journal served unlisted until a listing
        succeeds (see `unlisted_error`)."""
        if self.listed:
            return
        self._start_listing_until_listed()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._first_answer.wait(), timeout_s)

    async def _list_until_listed(self) -> None:
        attempt = 0
        try:
            while not self.listed:
                answered = await self._list_into_index()
                self._first_answer.set()
                if not answered:  # a listing that answered but missed a store added meanwhile: again now
                    await asyncio.sleep(PERSIST_RETRY_S[min(attempt, len(PERSIST_RETRY_S) - 1)])  # wait-ok: back-off
                    attempt += 1
        finally:
            self._listing_until_listed = False

    def unlisted_error(self) -> HeraldError:
        """FRAGMENT_STORE_UNHEALTHY (503, retryable) for a journal never listed: a
        primary must not append before it knows the persisted head, nor a read
        below it be answered from a partial index."""
        stores = ", ".join(s.url for s in self.journal.stores)
        return HeraldError(Status.FRAGMENT_STORE_UNHEALTHY,
                           f"{self.journal.spec.name}: its fragment store {stores} has not been listed yet "
                           f"({self._listing_error}); the persisted head is unknown until it is, retry")

    def list_stores_blocking(self, stores: list[Store] | None = None) -> list[Fragment]:
        """`list_stores`, blocking: for callers already on an executor thread."""
        return [fragment for store in (self.journal.stores if stores is None else stores)
                for fragment in list_fragments(store, self.journal.spec.name)]

    # -- listing ---------------------------------------------------------------------

    def refresh_later(self) -> None:
        """List the stores once ``fragment.refresh_interval`` (jittered) has passed,
        unless a listing is already due sooner. Non-blocking; needs the running loop."""
        delay_s = self.journal.spec.fragment.refresh_interval_s * random.uniform(1 - REFRESH_JITTER,
                                                                                 1 + REFRESH_JITTER)
        self._schedule_refresh(delay_s)

    def refresh_soon(self) -> None:
        """List the stores now (a range is missing, or a read found a fragment gone);
        calls while a listing runs coalesce into one more listing."""
        if self._refresh_running:
            self._refresh_again = True
        else:
            self._schedule_refresh(0)

    async def refresh_now(self) -> None:
        """List the stores into the index and return when done: for a read that found
        a hole below the write head (a replica that rolled forward learns of the
        primary's fragments here, not a ``refresh_interval`` later). Single-flight
        per journal — concurrent callers await one listing — and at most one every
        READ_MISS_LISTING_S; a failed listing is logged and leaves the index as it was."""
        loop = asyncio.get_running_loop()
        if self._listing_now is None:
            if loop.time() - self._listed_now_at < READ_MISS_LISTING_S:
                return
            self._listing_now = loop.create_task(self._list_now(), name=f"list-now:{self.journal.spec.name}")
        await asyncio.shield(self._listing_now)

    async def _list_now(self) -> None:
        try:
            await self._list_into_index()
        finally:
            self._listing_now, self._listed_now_at = None, asyncio.get_running_loop().time()

    async def _list_into_index(self) -> bool:
        """One listing of the stores into the index (waking readers it may serve); a
        failed listing is logged and leaves the index as it was. Whether it answered."""
        stores = list(self.journal.stores)
        try:
            self.journal.index.replace_remote(await self.list_stores(stores))
        except OSError as err:
            self._listing_error = f"listing failed: {err}"
            log.warning("store listing failed: %s", err, extra={"journal": self.journal.spec.name})
            return False
        self._mark_listed(stores)
        self.journal.wake_readers()
        return True

    def stop_refreshing(self) -> None:
        """No further listings (the journal is closing); one running is stopped with
        the journal's serving tasks."""
        if self._refresh_timer is not None:
            self._refresh_timer.cancel()
            self._refresh_timer = None
        self._refresh_running, self._refresh_again = True, False  # nothing is scheduled again

    def _schedule_refresh(self, delay_s: float) -> None:
        loop = asyncio.get_running_loop()
        when = loop.time() + delay_s
        timer = self._refresh_timer
        if timer is not None:
            if timer.when() <= when:
                return
            timer.cancel()
        self._refresh_timer = loop.call_at(when, self._start_refresh)

    def _start_refresh(self) -> None:
        self._refresh_timer = None
        self._refresh_running = True
        self._refreshing.start_soon(self._refresh_once(), "refresh")

    async def _refresh_once(self) -> None:
        try:
            await self._list_into_index()
        finally:
            self._refresh_running = False
        if self._refresh_again:
            self._refresh_again = False
            self._schedule_refresh(0)
        elif self.journal.index.has_hole_below(self.journal.write_head):
            self._schedule_refresh(HOLE_RETRY_S)  # a peer is still persisting the range we lack
        else:
            self.refresh_later()

    async def drain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """Wait for queued spools to persist (SIGTERM path): at most ``timeout_s``,
        and at most FAILING_STORE_GRACE_S more once the store fails an upload."""
        if not self.journal.stores or self._completed is None or self.store_failing is None:
            return
        joined = asyncio.ensure_future(self._completed.join())
        failing = asyncio.ensure_future(self.store_failing.wait())
        try:
            await asyncio.wait((joined, failing), timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
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
    """Delete a persisted spool's commits file, and its data file unless it is kept
    for the journal's next spool (`herald.fragment.spool_recycling`). Commits file
    first: a crash between leaves a spool with no commit, which recovery deletes,
    never a commits file that nothing reads or removes. Blocking."""
    done.commits_path.unlink(missing_ok=True)
    retire(done.path)
