"""A journal's fragment index: what byte range lives where (gazette-facts §4.7).

The index is one cover set over every fragment a replica knows of — local spools
(current and completed, not yet persisted) and the store listing — plus the paths
of the local fragments no listing covers yet. As Gazette's ``Index``, a persisted
copy always wins over a local one of the same bytes: its mod time is what lets a
read jump over a hole, and a local copy without one would make it wait forever.
Reads use a local file while the index has one; once a listing shows the bytes
persisted, reads go to the store. Pure: no I/O, and the time is an argument.

    >>> from herald.protocol.fragment import EMPTY_SUM
    >>> from herald.protocol.journal import CompressionCodec
    >>> index = Index()
    >>> index.add_local(Fragment("j", 0, 10, EMPTY_SUM, CompressionCodec.NONE), Path("/spool/0"))
    >>> index.locate(5, now_unix=0).local_path
    PosixPath('/spool/0')
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from herald.fragment.coverset import CoverSet, query
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


class Index:
    """Every known fragment of one journal; updated only by its journal's tasks."""

    def __init__(self) -> None:
        self._set = CoverSet()
        # Local files of fragments no listing covers yet: begin -> (end, path).
        self._local: dict[int, tuple[int, Path]] = {}
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
        """A spool committed (or was recovered): readable from ``path`` up to its end.

        A recovered spool whose bytes the listing already shows persisted (the broker
        died between upload and delete) is not added: the persisted copies keep their
        mod times, so a read below them may still jump.
        """
        if self._set.grow_last(fragment):  # the usual spool commit: past all that is known
            self._local[fragment.begin] = (fragment.end, path)
            return
        if fragment.end == fragment.begin or self._is_persisted(fragment.begin, fragment.end):
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
        """Whether some range between the first fragment and ``offset`` is missing.

        An empty index has no hole by this rule, on purpose: it cannot tell bytes
        not yet uploaded from bytes pruned by retention, and re-listing every few
        seconds for a fully pruned journal would never end. A read that lands in
        such a range lists the stores on demand (herald.broker.read_holes)."""
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

        As Gazette's ``ReplaceRemote``, a local fragment the listing covers — alone or
        with contiguous neighbours — is dropped, file and all: the persisted copies,
        with their mod times, serve its bytes from now on.
        """
        listed = {f.content_path for f in listing}
        self._unlisted = {k: f for k, f in self._unlisted.items() if k not in listed}
        remote = CoverSet([*listing, *self._unlisted.values()])
        self._local = {b: (e, p) for b, (e, p) in self._local.items() if not remote.covers(b, e)}
        for fragment in self._set:
            if not fragment.store and fragment.begin in self._local:
                remote.add(fragment)
        self._set = remote

    def locate(self, offset: int, now_unix: float) -> Located | None:
        """The fragment to read ``offset`` from, jumping forward over pruned ranges.

        Returns None — the read waits, or a non-blocking one answers
        OFFSET_NOT_YET_AVAILABLE — when ``offset`` is at or past the end of the
        index, or in a hole that may yet be filled. The jump rule is Gazette's
        (`coverset.query`): only to a persisted fragment, and only if it is the
        index's first or was persisted over 6 h ago, so a reader racing a
        replica's upload waits instead of skipping bytes.
        """
        found = query(self._set, offset, now_unix)
        if found.fragment is None:
            return None
        fragment = found.fragment
        local = self._local.get(fragment.begin)
        path = local[1] if local and local[0] >= fragment.end else None
        return Located(found.offset, fragment, path)

    def _is_persisted(self, begin: int, end: int) -> bool:
        """Whether persisted fragments of the set span ``[begin, end)`` gap-free."""
        if end > self._set.end_offset:
            return False  # the usual spool commit, past everything known: no walk
        offset = begin
        while offset < end:
            at, covered = self._set.longest_overlapping(offset)
            if not covered or not self._set[at].mod_time:
                return False
            offset = self._set[at].end
        return True
