"""Broker-wide group commit: one sync round covers every journal with appends pending.

Each journal already gathers the appends that arrive together into one group. With
many journals, syncing each group on its own costs an executor hop, a loop wake-up
and two fdatasyncs per journal, one after another as threads free up. Here the
groups of every journal that is ready join one round: one job on the broker's
round thread (`RoundThread`) runs `herald.fragment.rounds.write_round` for all of
them. Meanwhile a journal with appends queued waits at the round's `gate`; when the
round ends and the writers it answered had a moment to send their next appends
(see `SyncRounds._gather_step`), the gate opens, every journal waiting there takes
its group, and those groups form the next round.

    rounds = rounds_of_running_loop()         # once per journal
    rounds.arrivals += 1                      # each append queued
    rounds.want(take)                         # an embedded journal's appends queued: the
                                              # round calls take() as it opens, and the
                                              # answer it returns with the outcome
    if (gate := rounds.gate()) is not None:   # else, in a journal's task: before taking a group
        await gate
    sums = await rounds.commit(GroupWrite(spool, bodies, registers, now))

A lone writer's round (one append, by the same writer as the last round's lone
append) runs on the loop itself while the commit log's syncs are quick and those
rounds no slower than the thread's (`herald.broker.lone_rounds`): no hop to the
round thread and back, at the price of every other connection waiting for that one
sync.

Acknowledgement is unchanged: a group's future resolves only after its own data and
commit line are both fdatasync'd [I-APPEND-3]; a group that fails fails alone.
No background task: rounds are driven by their jobs' completion callbacks, so a
cancelled appender never strands the other journals of its round.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import queue
import time
import weakref
from collections.abc import Callable

from herald.broker.lone_rounds import HERE, THERE, LoneRounds, Way
from herald.broker.metrics import METRICS
from herald.fragment.commit_log import INLINE_BYTES
from herald.fragment.group_write import GroupWrite
from herald.fragment.rounds import round_syncs, write_round
from herald.helper_threads import HelperThreads
from herald.protocol.errors import HeraldError

__all__ = ["RoundThread", "SyncRounds", "Taken", "commit_replica_write"]

log = logging.getLogger(__name__)

#: The longest a finished round waits for its writers to come back, as a share of
#: its own duration and in seconds (a writer that does not come back costs at most
#: this, once; a round slowed by a stalled disk must not hold the next one long).
#: A full round is the break-even: two cohorts taking turns get half the writers
#: per round; waiting up to a round gets them all in at most two (half measured
#: slower under load: the answers alone outlasted it, and the cohorts stayed).
GATHER_SHARE = 1.0
GATHER_MAX_S = 0.002

#: A write waiting for its round, what runs on the loop with its outcome as the
#: round ends, and whether its appends come through the gate (a journal's; a
#: replica's group does not: see `SyncRounds.commit`).
Waiter = tuple[GroupWrite, "Callable[[list[str] | BaseException], object]", bool]
#: A journal's group taken as a round opens (`SyncRounds.want`): its write, what
#: answers its appends with the outcome and, for a group of one append, who wrote it
#: (`herald.broker.group.CalledAnswer.writer`; None: unknown); None when the
#: journal's task takes it instead.
Taken = tuple[GroupWrite, "Callable[[list[str] | BaseException], object]", object] | None
#: A round's wait for its writers: share of its duration, most seconds, what runs then.
Gather = tuple[float, float, Callable[[], object]]
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
            done: Callable[[Outcomes | BaseException], object],
            gather: Gather | None = None) -> None:
        """Run `write_round` on ``writes`` in the thread; ``done(outcomes)`` (or the
        exception, for a bug) then runs on ``loop``. With ``gather = (share, most,
        timed_out)``, ``timed_out()`` runs on ``loop`` too if no next round comes
        within ``share`` of this one's duration (at most ``most`` seconds)."""
        self._submit((writes, loop, done, gather))

    def _serve(self) -> None:
        # HelperThreads._serve, but a finished round's wait for the next one is timed:
        # the loop has no timer finer than a millisecond, and this thread is idle.
        wait, late = None, None
        while True:
            try:
                job = self._jobs.get(timeout=wait)
            except queue.Empty:
                _call_soon(*late)
                wait = late = None
                continue
            if job is None:
                return
            started = time.perf_counter()
            outcome = self._run(job)
            with self._lock:
                self._outstanding -= 1
            _, loop, _, gather = job
            wait, late = None, None
            if gather is not None:
                share, most, timed_out = gather
                wait, late = min(share * (time.perf_counter() - started), most), (loop, timed_out)
            # The loop's wake-up last, just before this thread lets go of the GIL in
            # get(): woken earlier, the loop blocked on the GIL this thread still held.
            self._finish(job, outcome)
            del job, outcome, loop, gather  # hold nothing of a finished round while idle

    def _run(self, job: tuple) -> Outcomes | BaseException:
        return _run_round(job[0])

    def _finish(self, job: tuple, outcome: object) -> None:
        _call_soon(job[1], job[2], outcome)


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[..., object], *args: object) -> None:
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:  # the loop closed meanwhile: nobody waits any more
        pass


def _run_round(writes: list[GroupWrite], run: Callable[[list[GroupWrite]], Outcomes] | None = None
               ) -> Outcomes | BaseException:
    """``run``'s outcomes (default `_counted_round`), or the exception it raised (a
    bug: every waiter of the round hears of it)."""
    try:
        return (run or _counted_round)(writes)
    except BaseException as err:  # noqa: BLE001 - see the docstring
        return err


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

    def __init__(self, loop: asyncio.AbstractEventLoop, *, gather_share: float = GATHER_SHARE,
                 gather_max_s: float = GATHER_MAX_S) -> None:
        self.loop = loop
        #: How long a finished round waits for its writers (see `arrived`); tests
        #: make it unbounded, to show only arrivals open a round.
        self.gather_share, self.gather_max_s = gather_share, gather_max_s
        self._waiting: list[Waiter] = []
        self._running = False
        self._thread = RoundThread()
        weakref.finalize(self, self._thread.stop)
        self.rounds = 0
        self.groups = 0
        self.arrivals = 0  # appends (and pokes) queued by this loop's journals, counted by them
        self.gather_target = -1  # after a round, the arrivals that bring its writers back
        self._gate: list[asyncio.Future[None]] = []
        self._wants: list[Callable[[], Taken]] = []  # journals whose groups the next round takes
        self._lone = LoneRounds()  # whether a lone writer's round runs on the loop
        #: False keeps every round off the loop (`herald.broker.lone_rounds`): a cluster
        #: member's loop keeps its etcd lease, which one stalled fdatasync must not hold up.
        self.rounds_on_loop = True

    def gate(self) -> asyncio.Future[None] | None:
        """What a journal with appends queued awaits before it takes its group: None
        when no round is under way (go now), else a future resolved when the next
        round opens, so that the group holds every append that arrived until then."""
        if not self._running:
            return None
        opened: asyncio.Future[None] = self.loop.create_future()
        self._gate.append(opened)
        return opened

    async def commit(self, write: GroupWrite, *, gathered: bool = True) -> list[str]:
        """Make ``write`` durable in the next round; its body SHA1s, or its error.

        ``gathered=False`` is for a group whose appends were not counted in
        `arrivals` (a replica's: its primary waits on it): it does not make the next
        round wait for its writers, and it opens a round that was waiting for others'."""
        done: asyncio.Future[list[str]] = self.loop.create_future()
        self._waiting.append((write, functools.partial(_resolve, done), gathered))
        if not gathered:
            self.arrived()
        if not self._running:
            self._start_round()
        return await done  # if the appender is cancelled, the round still ends: see _end_round

    def want(self, take: Callable[[], Taken]) -> None:
        """A journal has appends queued: the next round calls ``take()`` as it opens,
        on the loop, for the journal's group and what answers it (see `Taken`).

        Through its task, a journal's group cost three wake-ups of that task per
        round (queued, gate open, round done), each through five coroutines: 13.5 us
        per append with 16 journals under cProfile. Taken here, no task wakes."""
        self._wants.append(take)
        if not self._running:  # after the rest of this loop turn's requests are queued
            self._running = True
            self.loop.call_soon(self._start_next_round)

    def statistics(self) -> dict[str, int]:
        return {"rounds": self.rounds, "groups": self.groups, "waiting": len(self._waiting),
                "rounds_here": self._lone.rounds_here}

    def _start_round(self) -> None:
        self._running = True  # a take may queue appends (an answer's next request): they want the next
        batch, self._waiting = self._waiting, []
        wants, self._wants = self._wants, []
        writer = None
        for take in wants:
            if (taken := take()) is not None:
                batch.append((taken[0], taken[1], True))
                writer = taken[2]
        if not batch:  # every journal that wanted one handed its appends to its task
            if self._wants:  # or failed its group, and has more queued: in the next turn
                self.loop.call_soon(self._start_next_round)
                return
            self._running = False
            self._open_gate()
            return
        self.rounds += 1
        self.groups += len(batch)
        writes = [write for write, _, _ in batch]
        started = time.perf_counter()
        way = self._lone.way(writes, writer) if self.rounds_on_loop else None
        if way is HERE:
            self._run_here(batch, writes, started)
            return
        METRICS.sync_rounds.inc()
        # Only a round that answers writers waits for them: after replicas' groups alone
        # (`commit(gathered=False)`) the next round opens at once (`_end_round`), and
        # a timed wake-up of the loop would find nothing to do, once per group on a peer.
        gather = ((self.gather_share, self.gather_max_s, functools.partial(self._gather_timed_out, self.rounds))
                  if any(gathered for _, _, gathered in batch) else None)
        self._thread.run(writes, self.loop, functools.partial(self._end_round, batch, started, way), gather)

    def _run_here(self, batch: list[Waiter], writes: list[GroupWrite], started: float) -> None:
        """A lone writer's round, on the loop (`herald.broker.lone_rounds`): its append
        answered as soon as the round ends, what it tells the metrics and the choice
        of the next round's way after (the writer's next request is on its way). A
        group the log carries whole makes no fdatasync but the log's (which counts
        its own): `round_syncs` is not asked."""
        outcomes = _run_round(writes, write_round if writes[0].size < INLINE_BYTES else None)
        seconds = time.perf_counter() - started
        self._end_round(batch, started, None, outcomes)
        self._lone.ran(HERE, seconds)
        METRICS.sync_rounds.inc()
        METRICS.sync_rounds_on_loop.inc()
        self._ended_here()

    def _ended_here(self) -> None:
        """After a round run on the loop (`herald.broker.lone_rounds`): no wait for
        its writer to come back (nobody else wrote): the next append starts the next round."""
        if self.gather_target < 0:  # its next append already came (pipelined): see `arrived`
            return
        self.gather_target = -1
        if self._waiting or self._wants or self._gate:
            self.loop.call_soon(self._open_next_round)
        else:
            self._running = False

    def _end_round(self, batch: list[Waiter], started: float, way: Way | None,
                   result: Outcomes | BaseException) -> None:
        """A round's outcome, on the loop: answer its groups. ``way``: `THERE` for a
        lone writer's round handed to the thread (`herald.broker.lone_rounds`), timed."""
        seconds = time.perf_counter() - started
        outcomes = [result] * len(batch) if isinstance(result, BaseException) else result
        # Gather: the next round opens once as many appends arrived as this one
        # answers (`arrived`), or when its writers took too long (`_gather_timed_out`).
        # Set first: an answer may start a request the client had already sent.
        answered = sum(len(write.contents) for write, _, gathered in batch if gathered)
        if answered:
            self.gather_target = self.arrivals + answered
        else:  # only replicas' groups: nobody to wait for
            self.loop.call_soon(self._open_next_round)
        for (_write, finish, _), outcome in zip(batch, outcomes):
            try:
                finish(outcome)
            except Exception:  # a bug in one journal's answers must not strand the others
                log.exception("answering a sync round's group failed")
        METRICS.sync_round_seconds.observe(seconds)  # after the answers: nobody waits for it
        if way is THERE:
            self._lone.ran(THERE, seconds)

    def arrived(self) -> None:
        """The appends a finished round waits for are all queued (a journal calls this
        when its count of `arrivals` reaches `gather_target`): open the next round.

        A round's writers are answered as it ends. Started at once, the next round
        would hold only the appends that arrived while this one ran, and the writers
        would settle into two cohorts taking turns, each sync covering half of them
        (14-16 appends per round with 32 writers). So the next round waits for the
        writers just answered to come back, at most `GATHER_SHARE` of this round's
        duration or `GATHER_MAX_S` (a lone writer left after many pays that once;
        then its round answers one append and waits for one)."""
        if self.gather_target < 0:
            return
        self.gather_target = -1
        if not self._gate and not self._waiting and not self._wants:
            # Every journal is idle (a lone writer's, typically): its group starts a
            # round at once, with no loop turns through the gate.
            self._running = False
            return
        # After the journal that queued this append came to the gate (scheduled first).
        self.loop.call_soon(self._open_next_round)

    def _gather_timed_out(self, number: int) -> None:
        if self.rounds == number:  # still gathering after round ``number``
            self.arrived()

    def _open_next_round(self) -> None:
        if not self._gate:  # no task to wake: the round takes the groups wanted (`want`) now
            self._start_next_round()
            return
        self._open_gate()
        # After the journals woken here take their groups (scheduled first).
        self.loop.call_soon(self._start_next_round)

    def _open_gate(self) -> None:
        gate, self._gate = self._gate, []
        for opened in gate:
            if not opened.done():
                opened.set_result(None)

    def _start_next_round(self) -> None:
        if self._waiting or self._wants:
            self._start_round()
        else:
            self._running = False
            self._open_gate()  # a journal that came to the gate just now: no round will open it


def _resolve(done: asyncio.Future[list[str]], outcome: list[str] | BaseException) -> None:
    if done.done():  # its committer was cancelled: the round ended all the same
        return
    if isinstance(outcome, BaseException):
        done.set_exception(outcome)
    else:
        done.set_result(outcome)


_ROUNDS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SyncRounds] = weakref.WeakKeyDictionary()


def rounds_of_running_loop() -> SyncRounds:
    """This loop's rounds (a broker runs one loop; tests may run several in turn).
    A journal looks them up once, with its append queue."""
    loop = asyncio.get_running_loop()
    rounds = _ROUNDS.get(loop)
    if rounds is None:
        rounds = _ROUNDS[loop] = SyncRounds(loop)
    return rounds


async def commit_replica_write(write: GroupWrite) -> list[str]:
    """Make a replica's ``write`` durable in this broker's next sync round (see the
    module doc), never held for a journal's writers to come back."""
    return await rounds_of_running_loop().commit(write, gathered=False)
