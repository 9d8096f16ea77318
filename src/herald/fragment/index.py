"""A journal's fragment index: what byte range lives where.

The index is one cover set over every fragment a replica knows of — local spools
(current and completed, not yet persisted) and the store listing — plus the paths
of the fragments that still have a local file. Reads prefer the local file; once
a fragment is persisted and its spool deleted, reads go to the store. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from herald.fragment.coverset import CoverSet
from herald.protocol.fragment import Fragment


@dataclass(frozen=True, slots=True)
class Located:
    """Where to read ``offset``: the fragment holding it and its local file, if any.

    ``offset`` may be larger than asked when the asked offset was pruned away (an
    offset jump, as Gazette's readers see after retention deletes old fragments).
    """

    offset: int
    fragment: Fragment
    local_path: Path | None


JUMP_AGE_S = 6 * 3600


def _may_jump_to(fragment: Fragment, is_first: bool, now_unix: float) -> bool:
    """Whether a read below ``fragment`` may skip to it: only to a persisted fragment
    (a local one without a mod time may yet be preceded by a replica's upload), and
    only if it is the index's first (retention removed what came before) or was
    persisted over ``JUMP_AGE_S`` ago (the hole is not an upload still in flight)."""
    if not fragment.mod_time:
        return False
    return is_first or now_unix - fragment.mod_time > JUMP_AGE_S


def _covers(fragments: CoverSet, fragment: Fragment) -> bool:
    """Whether ``fragments`` span all of ``fragment`` without a gap (several smaller
    contiguous or overlapping fragments may cover it together)."""
    at, covered = fragments.longest_overlapping(fragment.begin)
    if not covered:
        return False
    reached = fragments[at].end
    while reached < fragment.end and at + 1 < len(fragments) and fragments[at + 1].begin <= reached:
        at += 1
        reached = max(reached, fragments[at].end)
    return reached >= fragment.end


class Index:
    """Every known fragment of one journal; updated only by its journal's tasks."""

    def __init__(self) -> None:
        self._set = CoverSet()
        self._local: dict[int, tuple[int, Path]] = {}  # begin -> (end, path)
        # Persisted by us but not yet seen in a listing: a listing that started before
        # the upload finished must not drop them (their local files are already gone).
        self._unlisted: dict[str, Fragment] = {}

    @property
    def end_offset(self) -> int:
        return self._set.end_offset

    @property
    def begin_offset(self) -> int:
        return self._set.begin_offset

    def fragments(self) -> list[Fragment]:
        return list(self._set)

    def add_local(self, fragment: Fragment, path: Path) -> None:
        """A spool committed (or was recovered): readable from ``path`` up to its end."""
        if fragment.end == fragment.begin:
            return
        self._local[fragment.begin] = (fragment.end, path)
        self._set.add(fragment)

    def add_remote(self, fragment: Fragment) -> None:
        """A fragment is now in a store (it replaces a local one of the same range)."""
        self._set.add(fragment)
        self._unlisted[fragment.content_path] = fragment

    def forget(self, fragment: Fragment) -> None:
        """A persisted fragment was removed from its store (prune)."""
        self._unlisted.pop(fragment.content_path, None)

    def drop_local(self, begin: int) -> None:
        """The local file of the spool at ``begin`` is gone (persisted and deleted)."""
        self._local.pop(begin, None)

    def has_hole_below(self, offset: int) -> bool:
        """Whether some range between the first fragment and ``offset`` is missing."""
        previous_end = None
        for fragment in self._set:
            if fragment.begin >= offset:
                break
            if previous_end is not None and fragment.begin > previous_end:
                return True
            previous_end = fragment.end
        return previous_end is not None and previous_end < offset

    def replace_remote(self, listing: list[Fragment]) -> None:
        """Swap in a fresh store listing, plus fragments we persisted that it does not
        show yet (it may predate their upload), plus local fragments it does not cover.

        A local fragment the listing covers is dropped from the set (as Gazette's
        ``ReplaceRemote``): the persisted copy, with its mod time, is what decides
        offset jumps. Its file stays readable through ``_local`` while it exists.
        """
        listed = {f.content_path for f in listing}
        self._unlisted = {k: f for k, f in self._unlisted.items() if k not in listed}
        fresh = CoverSet()
        for fragment in [*listing, *self._unlisted.values()]:
            fresh.add(fragment)
        for fragment in self._set:
            if not fragment.store and fragment.begin in self._local and not _covers(fresh, fragment):
                fresh.add(fragment)
        self._set = fresh

    def locate(self, offset: int, now_unix: float) -> Located | None:
        """The fragment to read ``offset`` from, jumping forward over pruned ranges.

        Returns None when ``offset`` is at or past the end of the index, or falls in
        a hole that may yet be filled. Only a persisted fragment is jumped to: at
        once before the first one (retention pruned what preceded it), and over a
        hole between fragments only when the fragment after it was persisted over
        6 h ago — as Gazette, so a reader racing a replica's upload after a
        roll-forward waits instead of skipping bytes.
        """
        at, covered = self._set.longest_overlapping(offset)
        if at == len(self._set):
            return None
        fragment = self._set[at]
        if not covered and not _may_jump_to(fragment, at == 0, now_unix):
            return None  # a hole another replica may still fill: wait, don't skip it
        local = self._local.get(fragment.begin)
        path = local[1] if local and local[0] >= fragment.end else None
        return Located(max(offset, fragment.begin), fragment, path)
