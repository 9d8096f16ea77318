"""Sync rounds: many journals' group commits made durable together (blocking part).

A group commit writes a spool's bytes and one commit line, and both must be
fdatasync'd before its appends are acknowledged [I-APPEND-3]. `GroupWrite` splits
that into steps, and `write_round` runs the steps of every group of a round side by
side — all data written and every sync started, then every commit line — so one
thread and one wait cover every journal that had appends pending, instead of one
executor hop and two syncs in a row per journal. The syncs run concurrently on a
small pool: on ext4, concurrent fdatasyncs share the journal commit and the device
flush they each need. In a broker, a round of several groups (or of one small
group) instead writes one record per group to the broker-wide commit log and
fdatasyncs only that (`herald.fragment.commit_log`); the records carry small groups'
bytes, so their spools' copies are written while that sync runs (`_write_then_log`).

    outcomes = write_round([GroupWrite(spool, bodies, registers, time.time()), ...])

Runs in an executor thread; the asyncio side is `herald.broker.sync_rounds`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from herald.fragment.commit_log import INLINE_BYTES, CommitLog
from herald.fragment.commit_log_records import frame
from herald.fragment.fdatasyncs import SYNCS, PendingSync
from herald.fragment.spool_sums import PARALLEL_HASH_BYTES
from herald.fragment.syncfs import syncfs, syncs_whole_file_system
from herald.protocol.errors import HeraldError
from herald.protocol.labels import LabelSet

if TYPE_CHECKING:
    from herald.fragment.spool import Spool
    from herald.protocol.fragment import Fragment

__all__ = ["GroupWrite", "logged_to", "round_syncs", "uses_syncfs", "write_round"]

#: From this many groups in a round, one syncfs replaces their fdatasyncs (where the
#: file system allows: `herald.fragment.syncfs`).
SYNCFS_MIN_GROUPS = 3
#: From this many groups in a round, one commit log record each and one fdatasync of
#: the log replace their in-place syncs; a round of one group does so only while it
#: is small (`herald.fragment.commit_log.CommitLog.takes_lone`).
LOG_MIN_GROUPS = 2


def write_round(writes: Sequence[GroupWrite]) -> list[list[str] | OSError | HeraldError]:
    """Make every group of a round durable together; each one's body SHA1s, or the
    error that failed it (and only it). Blocking: run it in an executor."""
    pinned = _pin(writes)
    try:
        if (commit_log := logged_to(writes)) is not None:
            _write_then_log(writes, commit_log)
        elif uses_syncfs(writes):
            _write_then_syncfs(writes)
        else:
            for write in writes:
                write.step(write.write_data)
            for write in writes:
                write.step(functools.partial(write.write_record, sync_here=write is writes[-1]))
        return [_outcome(write) for write in writes]
    finally:
        _unpin(pinned)


def _pin(writes: Sequence[GroupWrite]) -> list[GroupWrite]:
    """The writes whose spools' descriptors are now held for the round (`GroupWrite.pin`;
    the others keep their error for `finish`): under one hold of the pool's lock
    where every spool's files exist, in one pool (at 16 journals a lock round trip
    per group cost more than the pins themselves)."""
    if not writes or not all(write.spool._created and write.spool._pool is writes[0].spool._pool
                             for write in writes):
        return [write for write in writes if write.pin()]
    pinned = []
    for write, error in zip(writes, writes[0].spool._pool.pin_many([write.spool for write in writes])):
        if error is None:
            write._pinned = True
            pinned.append(write)
        else:
            write.error = error
    return pinned


def _unpin(writes: Sequence[GroupWrite]) -> None:
    """`GroupWrite.unpin` for each of ``writes`` still pinned, as `_pin` pinned them."""
    held = [write for write in writes if write._pinned]
    if held and all(write.spool._pool is held[0].spool._pool for write in held):
        for write in held:
            write._pinned = False
        held[0].spool._pool.unpin_many([write.spool for write in held])
    for write in held:
        write.unpin()  # those of other pools (idempotent)


def logged_to(writes: Sequence[GroupWrite]) -> CommitLog | None:
    """The commit log that makes ``writes`` durable, if the round has `LOG_MIN_GROUPS`
    groups (or one the log takes alone: `CommitLog.takes_lone`) and their spools
    were all given one open log (a broker's, `herald.fragment.commit_log`); else
    None: they sync in place."""
    if not writes:
        return None
    commit_log = writes[0].spool.commit_log
    if commit_log is None or commit_log.closed or any(w.spool.commit_log is not commit_log for w in writes):
        return None
    return commit_log if len(writes) >= LOG_MIN_GROUPS or commit_log.takes_lone(writes[0].size) else None


def round_syncs(writes: Sequence[GroupWrite]) -> tuple[int, int]:
    """How many fdatasyncs and syncfs calls `write_round` makes for ``writes``, the
    commit log's own aside (it counts them itself)."""
    if logged_to(writes) is not None:
        return sum(1 for write in writes if write.size >= INLINE_BYTES), 0
    if uses_syncfs(writes):
        return 0, 1
    return 2 * len(writes), 0


def uses_syncfs(writes: Sequence[GroupWrite]) -> bool:
    """Whether `write_round` makes ``writes`` durable with one syncfs (not fdatasyncs)."""
    return len(writes) >= SYNCFS_MIN_GROUPS and syncs_whole_file_system(writes[0].spool.directory.parent)


def _write_then_log(writes: Sequence[GroupWrite], commit_log: CommitLog) -> None:
    """Every group's data to the page cache, then one record each in the commit log
    and one fdatasync of it for the round; the commit lines are left to the log
    (`CommitLog.defer`). A group of `INLINE_BYTES` or more is not copied into the
    log: its data fdatasync runs beside the log's, and the round's lines are then
    written in place (that sync may still fail the round once logged). A failed log
    write fails every group of the round. Once logged, the write-back of what the
    round left dirty may start (`herald.fragment.writeback`).

    One pass per group: with many journals a round holds about one append per
    group, so this is paid per append.

    A round of small groups only (`_writes_beside`) writes their data to the spools
    while the log's fdatasync runs, not before: each record carries its group's
    bytes, so the spool copy is not what makes them durable, and at 16 journals the
    spools' pwritevs (~12 us of CPU each) would otherwise sit between the round's
    start and its sync. A spool write that fails then fails the round, its records
    zeroed, as a failed log write does."""
    defer = all(write.size < INLINE_BYTES for write in writes)
    beside = _writes_beside(writes)
    frames, written = [], []
    for write in writes:
        if write.error is None and (parts := write.write_logged(commit_log, defer, beside)) is not None:
            frames.append(parts)
            written.append(write)
    if written:
        _log_written(written, frames, commit_log, functools.partial(_write_placed, written, commit_log)
                     if beside else None)


def _writes_beside(writes: Sequence[GroupWrite]) -> bool:
    """Whether a logged round's data may go to the spools during the log's sync:
    every group small enough to be hashed here and copied into its record, and
    holding its bytes (a streamed body, `herald.fragment.spool_stream`, is already
    written). A lone group too: its spool copy and answers are built while the
    record's write-back runs (`CommitLog.append`), on this thread, no hand-off."""
    return all(write.size < PARALLEL_HASH_BYTES and write.HOLDS_BYTES for write in writes)


def _write_placed(writes: Sequence[GroupWrite], commit_log: CommitLog) -> None:
    """While the log's records go to disk (`CommitLog.append`), what would otherwise
    wait for their sync, on the round's critical path: the data of a round's groups placed by
    `GroupWrite.place_data`, written to their spools; each spool's fragment as it
    will be once committed, and its journal's answers (`GroupWrite.answer_ahead`),
    built (the loop would build them as it answers); the spool's descriptors
    released where no line of the group is in its commits file (nothing there to
    erase should the round fail); the write-back of the chunks completed started
    (bytes past a committed end, should it fail, are cut at recovery [I-FRAG-2]).
    Raises OSError."""
    for write in writes:
        write.write_placed()
        write.next_fragment = write.spool.fragment_after(write._fragment_sum)
        if write.answer_ahead is not None:
            write.answers = write.answer_ahead(write)
        write.start_writeback(commit_log)
    _unpin([write for write in writes if write.deferred])


def _log_written(written: list[GroupWrite], frames: list[list[bytes]], commit_log: CommitLog,
                 meanwhile: Callable[[], object] | None = None) -> None:
    """One log record per written group and one fdatasync (`CommitLog.append`),
    ``meanwhile`` run beside it."""
    try:
        lines = [(write.spool.commits_path, write._line_at, write._line) for write in written if write.deferred]
        place = commit_log.append(frames, [write.spool.directory for write in written], lines, meanwhile)
        failed = _in_place_sync_failure(written)
        if failed is not None:  # its logged line must never be replayed over a later group's
            commit_log.forget(*place)
            raise failed
    except OSError as err:
        for write in written:
            write.error = err
        return
    if meanwhile is None:  # else started by it (`_write_placed`)
        for write in written:
            write.start_writeback(commit_log)


def _in_place_sync_failure(writes: Sequence[GroupWrite]) -> OSError | None:
    """Wait for the in-place data syncs of a logged round's large groups; the first
    that failed, if any. Such a group's record (its line) is already in the log, and
    a failed group's place is written again by the next: a replay of the record
    would put its line over a later, acknowledged one's [I-FRAG-2]."""
    for write in writes:
        for sync in write._syncs:
            if (err := sync.exception()) is not None:
                return err
    return None


def _write_then_syncfs(writes: Sequence[GroupWrite]) -> None:
    """Every group's data and commit line, then one ``syncfs`` for all of them
    (`herald.fragment.syncfs`): one call instead of two fdatasyncs per journal. A
    failed syncfs fails every group of the round: any of them may be the one whose
    write-back failed."""
    for write in writes:
        write.step(functools.partial(write.write_data, sync=False))
    for write in writes:
        write.step(functools.partial(write.write_record, sync_here=False, sync_later=False))
    written = [write for write in writes if write.error is None]
    if written:
        try:
            syncfs(written[0].spool._fd)
        except OSError as err:
            for write in written:
                write.error = err


def _outcome(write: GroupWrite) -> list[str] | OSError | HeraldError:
    try:
        return write.finish()
    except (OSError, HeraldError) as err:
        return err


class GroupWrite:
    """One group's way to durability, in steps a sync round interleaves across spools
    (one thread, descriptors pinned by the caller; blocking):

    1. `write_data`: the bodies go to the page cache; their fdatasync starts.
    2. `write_record`: the group is hashed (beside the data sync) and its commit line,
       carrying the fragment's SHA1, is written; its fdatasync starts too.
    3. `finish`: waits for both syncs, then commits in memory [I-APPEND-3]; after any
       failure it erases the line and raises (the caller rolls the spool back).

    Data and record sync concurrently: a line that reaches the disk without its data
    fails its SHA1 at recovery and is ignored (`herald.fragment.commits`). In a
    logged round (`write_logged`) the commit log's record replaces both syncs, and a
    small group's data may be written after its record (`place_data`, `write_placed`).
    """

    BODY_SUMS = True  # each body's SHA1 for its answer; a replica's write needs none
    HOLDS_BYTES = True  # its bodies are here to write (a streamed body is already written)

    def __init__(self, spool: Spool, contents: Sequence[bytes], registers: LabelSet, now_unix: float):
        self.spool, self.contents, self.registers, self.now_unix = spool, contents, registers, now_unix
        self.error: OSError | HeraldError | None = None
        self._syncs: list[PendingSync] = []
        self._sums: list[str] = []
        self._line: bytes = b""
        self._first: float | None = None
        self._fragment_sum = ""
        self.size = sum(map(len, contents))
        self._data_at = self._line_at = 0
        self.deferred = False  # its commit line left to the commit log (write_logged)
        self._placed: Sequence[bytes] = ()  # bodies and padding placed, not yet written (place_data)
        self.next_fragment: Fragment | None = None  # the spool's once committed, if built ahead
        self._pinned = False  # its spool's descriptors held (`pin`)
        #: What builds the group's answers ahead, given this write once sealed, while
        #: the log syncs (set by its journal); ``answers``: what it built, if it ran.
        self.answer_ahead: Callable[[GroupWrite], Any] | None = None
        self.answers: Any = None

    def step(self, action: Callable[[], object]) -> None:
        """Run one step unless an earlier one failed; a failure is kept for `finish`."""
        if self.error is None:
            try:
                action()
            except (OSError, HeraldError) as err:  # re-raised by finish, once the syncs under way are done
                self.error = err

    def pin(self) -> bool:
        """Hold the spool's descriptors for the round (as ``holding_descriptors``,
        without its generator and an ExitStack: paid per group); False, with the
        error kept for `finish`, if they could not be opened."""
        try:
            self.spool.pin()
        except (OSError, HeraldError) as err:
            self.error = err
            return False
        self._pinned = True
        return True

    def unpin(self) -> None:
        """Release what `pin` held, if it still does (idempotent: a logged round lets
        a group go during its sync, `_write_placed`)."""
        if self._pinned:
            self._pinned = False
            self.spool.unpin()

    def write_logged(self, commit_log: CommitLog, defer: bool, beside: bool = False) -> list[bytes] | None:
        """Steps 1 and 2 for a logged round (no sync but a large group's data sync),
        then this group's log record; None after a failure (kept for `finish`).
        ``defer``: the commit line is left to the log (`CommitLog.defer`), its commits
        file grown (not synced) first if it must. ``beside``: the data is only placed
        (`place_data`), written later by `write_placed`."""
        try:
            inline = self.size < INLINE_BYTES
            if beside:
                self.place_data()
            else:
                self.write_data(sync=not inline)
            spool = self.spool
            self.seal()
            line = self._line
            self._line_at = line_at = spool._commits_pos
            if defer:  # the log holds the line durably: its file grows with no sync of its own
                if line_at + len(line) > spool._commits_allocated:
                    spool._grow_commits(len(line), durable=False)
                self.deferred = True
            else:
                spool._put_record(line, sync=False)
            # This group's record: the bytes go along unless synced in place.
            return frame(commit_log.name_of(spool.directory), spool.begin, self._data_at, line_at, line,
                         self.contents if inline else ())
        except (OSError, HeraldError) as err:
            self.error = err
            return None

    def write_data(self, sync: bool = True) -> None:
        """``sync``: start the data's fdatasync in the pool (else the round syncs)."""
        spool = self.spool
        self._data_at = spool.end - spool.begin + spool._delta
        spool.write_group(self.contents)
        if sync:
            self._syncs.append(SYNCS.fdatasync(spool._fd))

    def place_data(self) -> None:
        """`write_data`'s placement without its write: the bodies' offset, their zero
        padding and the pending size, so that the group seals as if written; its
        bytes go to the spool with `write_placed` (a small group: no hashing starts
        beside its write, see `herald.fragment.spool_sums`)."""
        spool = self.spool
        self._data_at = at = spool.end - spool.begin + spool._delta
        self._placed = spool.with_zero_padding(self.contents, at, self.size)
        spool._delta += self.size

    def write_placed(self) -> None:
        """Write the bodies `place_data` placed (blocking). Raises OSError."""
        placed, self._placed = self._placed, ()
        self.spool._pwrite_padded(placed, self.contents, self._data_at)

    def write_record(self, sync_here: bool = True, sync_later: bool = True) -> None:
        """``sync_here``: fdatasync the line in this thread (a round's last group),
        else start it in the pool (``sync_later``), or leave it to the round. A
        hand-off costs some 50-80 us of CPU on this machine (thread wake-ups), so a
        round's last sync is not handed off."""
        spool = self.spool
        self.seal()
        self._line_at = spool._commits_pos
        spool._put_record(self._line, sync=sync_here)
        if not sync_here and sync_later:
            self._syncs.append(SYNCS.fdatasync(spool._commits_fd))

    def start_writeback(self, commit_log: CommitLog) -> None:
        """Once logged: start writing back the chunks this group completed of its
        files (`herald.fragment.writeback`), the bytes unless synced in place."""
        chunk = commit_log.writeback_bytes  # most groups complete no chunk: no call then
        if self.size < INLINE_BYTES and (self._data_at + self.size) // chunk > self._data_at // chunk:
            commit_log.start_writeback(self.spool.path, self._data_at, self.size)
        if not self.deferred:  # a deferred line's write-back starts once written
            commit_log.start_writeback(self.spool.commits_path, self._line_at, len(self._line))

    @property
    def sums(self) -> list[str]:
        """Each body's SHA1, once sealed."""
        return self._sums

    def seal(self) -> None:
        """Hash the group's bodies and build its commit line (carrying the fragment's
        SHA1 after them): the one step every kind of round shares, so a group whose
        bytes were hashed elsewhere (`herald.fragment.spool_stream`) overrides it once."""
        self._sums = self.spool._hash(self.contents, self.BODY_SUMS)
        self._line, self._first, self._fragment_sum = self.spool._record_line(self.registers, self.now_unix)

    def finish(self) -> list[str]:
        """Each body's SHA1 once both syncs returned; raises what failed, if anything."""
        # Waits for every sync (descriptors stay pinned until all are done); lighter
        # than concurrent.futures.wait, which is measurable per group.
        error = self.error
        for sync in self._syncs:
            if (failed := sync.exception()) is not None and error is None:
                error = failed
        if error is not None:
            if not self.deferred:  # a deferred line was never written (and its descriptors may be let go)
                self.spool._erase_record(len(self._line))
            raise error
        self.spool._advance(len(self._line), self.registers, self._first, self._fragment_sum, self.next_fragment)
        return self._sums
