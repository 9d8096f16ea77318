"""When a journal's spool rolls into a new fragment, and how the old one is retired.

A spool rolls past ``fragment.length`` bytes, at a UTC-aligned ``flush_interval``
boundary, or (after a prune) when it holds the journal's first known byte; a
replica rolls where its primary did. The retired spool goes to the persister, or
is deleted when empty.
"""

from __future__ import annotations

import math

from herald.broker.fragment_keeper import Completed
from herald.fragment.spool import Spool
from herald.protocol.labels import LabelSet

__all__ = ["SpoolRolling"]


class SpoolRolling:
    """A `herald.broker.journal.Journal` mixin: relies on its spool, spec, index,
    directory, commit log and fragment keeper."""

    def _maybe_roll(self, now_unix: float) -> None:
        """Roll past ``fragment.length`` or at a UTC-aligned ``flush_interval`` boundary."""
        spool = self._spool
        assert spool is not None
        if spool.content_length == 0:
            return
        due = self._roll_due(now_unix, spool.content_length)
        self.roll_if_first = False
        if due:
            self._roll()

    def _roll_due(self, now_unix: float, content_length: int) -> bool:
        """Whether a spool holding ``content_length`` bytes rolls now."""
        spool, frag = self._spool, self.spec.fragment
        assert spool is not None
        if content_length == 0:
            return False
        # A spool holding the journal's first known byte is persisted at once when
        # asked (after a prune): until it has a mod time, readers below it wait
        # rather than jump, since a replica might still upload what precedes it.
        first = self.roll_if_first and spool.begin <= self.index.begin_offset
        interval = frag.flush_interval_s
        crossed = bool(interval) and spool.first_append_unix is not None and (
            math.floor(spool.first_append_unix / interval) != math.floor(now_unix / interval))
        return first or content_length > frag.length or crossed

    def _roll(self) -> None:
        spool = self._spool
        assert spool is not None
        if spool.content_length == 0:
            return
        self._replace_spool(self._new_spool(spool.end, spool.registers))

    def _new_spool(self, begin: int, registers: LabelSet) -> Spool:
        return Spool(self.directory, self.spec.name, begin, self.spec.fragment.compression_codec,
                     registers, commit_log=self._commit_log)

    def _replace_spool(self, successor: Spool) -> None:
        """Retire the current spool for ``successor``, which the caller already opened:
        if opening failed (no descriptors, no disk) nothing changed, so an error can
        never leave the journal holding a closed spool [I-RESTART-1]. A retired spool
        with content goes to the persister; an empty one is deleted."""
        spool = self._spool
        assert spool is not None
        if spool.content_length:
            fragment = spool.fragment()
            spool.close()
            self.fragments.hand_over(Completed(fragment, spool.path, spool.commits_path))
        else:
            spool.remove_files()
        self._spool = successor
