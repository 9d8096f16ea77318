"""The cover set: a journal's fragments with none contained in another (gazette-facts §4.7).

Fragments of one journal come from local spools and from every store's listing, and
replicas can cut different boundaries, so ranges overlap. A `CoverSet` keeps them
ordered and *minimal*: adding a fragment drops every fragment it covers, and a
fragment covered by another is ignored. Larger fragments win; partial overlaps stay.
Because no fragment contains another, ordering by ``begin`` also orders by ``end``.

    >>> from herald.protocol.fragment import EMPTY_SUM
    >>> from herald.protocol.journal import CompressionCodec
    >>> s = CoverSet()
    >>> s.add(Fragment("j", 0, 100, EMPTY_SUM, CompressionCodec.NONE))
    True
    >>> s.add(Fragment("j", 10, 20, EMPTY_SUM, CompressionCodec.NONE))  # covered
    False
    >>> [(f.begin, f.end) for f in s]
    [(0, 100)]

`query` answers "which fragment serves this read offset" with Gazette's offset-jump
rule. Pure: no I/O and no clock — the current time is an argument.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from herald.protocol.fragment import Fragment

__all__ = [
    "OFFSET_JUMP_AGE_S",
    "CoverSet",
    "QueryResult",
    "query",
]

OFFSET_JUMP_AGE_S = 6 * 3600
"""A read may jump over a hole to a persisted fragment only if that fragment is at
least this old: a younger one may be a neighbour of an upload still in flight."""

def _begin(f: Fragment) -> int:
    return f.begin


class CoverSet:
    """Fragments ordered by ``begin`` (and so by ``end``), none contained in another."""

    __slots__ = ("_fragments",)

    def __init__(self, fragments: Iterable[Fragment] = ()) -> None:
        self._fragments: list[Fragment] = []
        for fragment in fragments:
            self.add(fragment)

    def add(self, fragment: Fragment) -> bool:
        """Add ``fragment``; returns whether the set changed.

        Empty fragments and fragments strictly inside an existing one are ignored.
        A fragment with the same range as an existing one replaces it (so a listed
        store copy replaces the local spool copy), as does one covering several.
        """
        if fragment.begin == fragment.end:
            return False
        fragments = self._fragments
        if fragments and fragments[-1].begin == fragment.begin and fragments[-1].end <= fragment.end:
            # A spool's commit, growing the last fragment (once per group commit): what
            # the general case below does, without its two bisects by key.
            fragments[-1] = fragment
            return True
        # The fragment beginning at or before ours that reaches furthest is the last
        # one with begin <= ours: ends increase with begins.
        at = bisect.bisect_right(fragments, fragment.begin, key=_begin)
        if at:
            before = fragments[at - 1]
            if before.end >= fragment.end and (before.begin, before.end) != (fragment.begin, fragment.end):
                return False
        start = bisect.bisect_left(fragments, fragment.begin, key=_begin)
        stop = start
        while stop < len(fragments) and fragments[stop].end <= fragment.end:
            stop += 1
        fragments[start:stop] = [fragment]
        return True

    def grow_last(self, fragment: Fragment) -> bool:
        """Replace the last fragment by ``fragment`` if it begins where the last one
        does and ends past it (a spool's commit growing its fragment); whether it
        did. What `add` would do then, for the index's hot path (once per group)."""
        fragments = self._fragments
        if fragments and fragments[-1].begin == fragment.begin and fragments[-1].end < fragment.end:
            fragments[-1] = fragment
            return True
        return False

    def longest_overlapping(self, offset: int) -> tuple[int, bool]:
        """``(index, True)`` of the fragment covering ``offset`` that reaches furthest,
        else ``(index of the first fragment beginning after offset, False)`` —
        possibly ``len(self)``."""
        at = bisect.bisect_right(self._fragments, offset, key=_begin)
        if at and self._fragments[at - 1].end > offset:
            return at - 1, True
        return at, False

    @property
    def begin_offset(self) -> int:
        """Begin of the first fragment (0 when empty)."""
        return self._fragments[0].begin if self._fragments else 0

    @property
    def end_offset(self) -> int:
        """End of the last fragment (0 when empty)."""
        return self._fragments[-1].end if self._fragments else 0

    def covers(self, begin: int, end: int) -> bool:
        """Whether the union of the set's fragments covers ``[begin, end)`` gap-free."""
        offset = begin
        while offset < end:
            index, found = self.longest_overlapping(offset)
            if not found:
                return False
            offset = self._fragments[index].end
        return True

    def difference(self, other: CoverSet) -> CoverSet:
        """Fragments of this set that ``other``'s coverage (the union of its
        fragments, gaps and all) does not fully cover."""
        return CoverSet(f for f in self._fragments if not other.covers(f.begin, f.end))

    def __iter__(self) -> Iterator[Fragment]:
        return iter(self._fragments)

    def __len__(self) -> int:
        return len(self._fragments)

    def __getitem__(self, index: int) -> Fragment:
        return self._fragments[index]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CoverSet) and self._fragments == other._fragments

    __hash__ = None  # type: ignore[assignment]  # Mutable.

    def __repr__(self) -> str:
        ranges = ", ".join(f"[{f.begin}, {f.end})" for f in self._fragments)
        return f"CoverSet({ranges})"


@dataclass(frozen=True, slots=True)
class QueryResult:
    """Where a read of ``offset`` goes.

    ``fragment`` is None when no fragment serves the offset yet (a non-blocking read
    answers OFFSET_NOT_YET_AVAILABLE; a blocking one waits for the next index
    update). ``offset`` is where reading starts; it exceeds the asked offset when
    the read jumped over a hole or over fragments older than ``begin_mod_time``.
    """

    offset: int
    write_head: int
    fragment: Fragment | None

    @property
    def is_found(self) -> bool:
        return self.fragment is not None


def query(cover_set: CoverSet, offset: int, now_unix_s: float, begin_mod_time: float = 0) -> QueryResult:
    """Gazette's index query for one read offset (``-1`` = the write head).

    If ``offset`` is in a hole but a persisted fragment lies beyond it, the read
    jumps there only when that fragment is the set's first (what preceded it was
    pruned) or was modified more than 6 h before ``now_unix_s``: holes left by
    deleted fragments are skipped, while a reader racing an upload the index does
    not know of yet waits instead. A local fragment (no mod time) is never jumped
    to: a replica may still be uploading what precedes it. Persisted fragments
    modified before ``begin_mod_time`` are skipped over.
    """
    write_head = cover_set.end_offset
    at = write_head if offset == -1 else offset
    while True:
        index, found = cover_set.longest_overlapping(at)
        if not found and index < len(cover_set) and _may_jump(cover_set[index], index == 0, now_unix_s):
            at, found = cover_set[index].begin, True
        if not found:
            return QueryResult(at, write_head, None)
        fragment = cover_set[index]
        if fragment.mod_time and fragment.mod_time < begin_mod_time:
            at = fragment.end
            continue
        return QueryResult(at, write_head, fragment)


def _may_jump(fragment: Fragment, is_first: bool, now_unix_s: float) -> bool:
    # Gazette's Index.Query: `ind == 0` — the fragment's place in the set, whatever
    # offset the client asked for.
    return bool(fragment.mod_time) and (
        is_first or fragment.mod_time < now_unix_s - OFFSET_JUMP_AGE_S
    )
