"""A replicating primary's groups in flight, on its spool (`herald.broker.primary_pipeline`).

Each group's commit line is written and synced with its data while the peers
still have the group (`precommit_line`, `sync_precommit`), so the peers' syncs
and ours overlap; the group commits in memory (readers, acknowledgement) only
once every peer answered (`commit_precommitted`) [I-APPEND-3]. A group that
fails has its line zeroed (`drop_precommits`). A line whose group failed but
reached the disk first is as a replica's commit of that group: recovery keeps
those bytes, never acknowledged (as any peer that committed them does).

A mixin of `herald.fragment.spool.Spool`: it uses the spool's descriptors, commits
file position and `_advance`; kept apart because only a replicating primary uses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from herald.fragment.commits import encode_record
from herald.fragment.fdatasyncs import SYNCS
from herald.protocol.labels import LabelSet

__all__ = ["SpoolPrecommits"]


class SpoolPrecommits:
    """The precommit steps of a `Spool` (see the module doc)."""

    end: int
    first_append_unix: float | None
    _delta: int
    _fd: int
    _commits_pos: int
    _precommitted: int

    if TYPE_CHECKING:  # the spool's own, used here
        def _put_record(self, line: bytes, sync: bool = True, at: int | None = None) -> None: ...
        def _erase_record(self, length: int) -> None: ...
        def _advance(self, line_bytes: int, registers: LabelSet, first_append_unix: float | None,
                     fragment_sum: str) -> None: ...

    def precommit_line(self, end: int, fragment_sum: str, registers: LabelSet,
                       now_unix: float) -> tuple[bytes, int, float | None]:
        """The commit line of the pending bytes up to ``end`` (the running SHA1
        there is ``fragment_sum``), where in the commits file it goes (after the lines
        of the groups before it), and the first-append time it sets. Loop only."""
        first = now_unix if self.first_append_unix is None and end > self.end else None
        line = encode_record(end, registers, fragment_sum, first)
        at = self._commits_pos + self._precommitted
        self._precommitted += len(line)
        return line, at, first

    def sync_precommit(self, line: bytes, at: int) -> None:
        """Write a `precommit_line` and fdatasync it beside the data (blocking;
        descriptors pinned by the caller; one at a time, in order)."""
        data_synced = SYNCS.fdatasync(self._fd)
        try:
            self._put_record(line, at=at)
        finally:
            error = data_synced.exception()  # waits: descriptors stay pinned until done
        if error is not None:
            raise error

    def commit_precommitted(self, end: int, fragment_sum: str, registers: LabelSet,
                            first_append_unix: float | None, line_bytes: int) -> None:
        """The groups up to ``end``, whose lines (``line_bytes`` in all) were synced,
        commit: readers see them. Bytes past ``end`` stay pending. Loop only."""
        assert self.end <= end <= self.end + self._delta and line_bytes <= self._precommitted
        pending_after = self.end + self._delta - end
        self._delta = end - self.end
        self._advance(line_bytes, registers, first_append_unix, fragment_sum)
        self._precommitted -= line_bytes
        self._delta = pending_after

    def drop_precommits(self) -> None:
        """Zero the lines of groups that failed (no sync of theirs still running;
        descriptors pinned by the caller), so the next lines are written over them."""
        self._erase_record(self._precommitted)
        self._precommitted = 0
