"""One group's way to durability, in steps a sync round interleaves across spools.

`herald.fragment.rounds` runs a round: which groups are logged, synced in place
or covered by one syncfs, and in what order their steps go. Each group's own
steps — its bodies to the page cache, its hash and commit line, its record for
the commit log, its fragment and answers built ahead, its commit in memory once
durable — are here, one object per group (`GroupWrite`), so that a round of many
journals is a loop over objects that each know their spool.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from herald.fragment.commit_log import INLINE_BYTES, CommitLog
from herald.fragment.commit_log_records import frame
from herald.fragment.fdatasyncs import SYNCS, PendingSync
from herald.fragment.spool_sums import FRAMED, seal_framed
from herald.fragment.whole_writes import pwrite_each
from herald.protocol.errors import HeraldError
from herald.protocol.labels import LabelSet

if TYPE_CHECKING:
    from herald.fragment.spool import Spool
    from herald.protocol.fragment import Fragment

__all__ = ["GroupWrite"]


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
            self._line_at = line_at = spool._commits_pos
            name = commit_log.name_of(spool.directory)
            if (head := self._seal_framed(name) if inline else None) is None:
                self.seal()
            line = self._line
            if defer:  # the log holds the line durably: its file grows with no sync of its own
                if line_at + len(line) > spool._commits_allocated:
                    spool._grow_commits(len(line), durable=False)
                self.deferred = True
            else:
                spool._put_record(line, sync=False)
            # This group's record: the bytes go along unless synced in place.
            if head is not None:
                return [head, *self.contents]
            return frame(name, spool.begin, self._data_at, line_at, line, self.contents if inline else ())
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

    @staticmethod
    def write_placed(writes: Sequence[GroupWrite]) -> None:
        """Write the bodies `place_data` placed, for each of ``writes`` (blocking), in
        one call (`pwrite_each`: at 16 journals, one group per append). Raises the
        first OSError (once every write was tried: the round fails as a whole)."""
        errors = pwrite_each([(write.spool._fd, write._placed, write._data_at) for write in writes])
        failed: OSError | None = None
        for write, error in zip(writes, errors):
            placed, write._placed = write._placed, ()
            if error:
                try:
                    write.spool._padded_write_failed(placed, write.contents, write._data_at,
                                                     OSError(error, os.strerror(error)))
                except OSError as err:
                    failed = failed or err
        if failed is not None:
            raise failed

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
        self._sums, running = self.spool._seal(self.contents, self.BODY_SUMS)
        self._line, self._first, self._fragment_sum = self.spool._record_line(self.registers, self.now_unix, running)

    def _seal_framed(self, directory: bytes) -> bytes | None:
        """`seal` and the head of this group's log record (the bodies follow it), in
        one C call (`herald.fragment.spool_sums.seal_framed`); None where that cannot
        be (no extension, a group hashed elsewhere, a streamed body hashed as it came,
        no body sums wanted): the caller seals and frames in Python, to the same bytes."""
        spool = self.spool
        if not FRAMED or spool._hashing is not None or not self.BODY_SUMS or not self.HOLDS_BYTES:
            return None
        prefix, suffix, first = spool._line_affixes(self.registers, self.now_unix)
        sealed = seal_framed(spool._sha1, self.contents, directory, spool.begin, self._data_at, self._line_at,
                             prefix, suffix)
        if sealed is None:
            return None
        self._sums, self._fragment_sum, self._line, head = sealed
        self._first = first
        return head

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
