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
import time
from collections.abc import Callable, Sequence

from herald.fragment.commit_log import INLINE_BYTES, CommitLog
from herald.fragment.group_write import GroupWrite
from herald.fragment.spool_sums import PARALLEL_HASH_BYTES
from herald.fragment.syncfs import syncfs, syncs_whole_file_system
from herald.protocol.errors import HeraldError

__all__ = ["logged_to", "round_syncs", "uses_syncfs", "write_round"]

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
    started, pinned = time.perf_counter(), _pin(writes)
    timed = None
    try:
        if (commit_log := logged_to(writes)) is not None:
            _write_then_log(writes, commit_log)
        elif uses_syncfs(writes):
            _write_then_syncfs(writes)
        else:
            timed = _lone_declined(writes)
            for write in writes:
                write.step(write.write_data)
            for write in writes:
                write.step(functools.partial(write.write_record, sync_here=write is writes[-1]))
        return [_outcome(write) for write in writes]
    finally:
        _unpin(pinned)
        if timed is not None:  # how the log learns that the disk is quick again
            timed.sync_average.add(time.perf_counter() - started)


def _lone_declined(writes: Sequence[GroupWrite]) -> CommitLog | None:
    """The commit log that just declined ``writes`` (`logged_to`), if they are one
    group small enough for it (`CommitLog.takes_lone`: its syncs averaged slow, or
    the segment had no room): their round, synced in place, is timed into the
    log's `sync_average`, else the log would never see a quick sync again."""
    if len(writes) != 1 or (commit_log := writes[0].spool.commit_log) is None:
        return None
    return commit_log if writes[0].size < commit_log.lone_bytes else None


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
    and one fdatasync of it for the round (issued twice at once while the log's
    syncs average slow: `herald.fragment.fdatasyncs.fdatasync_twice`); the commit lines are left to the log
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
    GroupWrite.write_placed(writes)
    for write in writes:
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
