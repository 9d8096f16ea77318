"""The spool: a replica's in-progress fragment on local disk.

A spool is two files under the broker's data dir: ``<begin:016x>.spool`` holds the
fragment's uncompressed bytes, and ``<begin:016x>.commits`` holds one JSON line per
group commit (``{"end": N, "registers": [...], "sum": SHA1}``, see
`herald.fragment.commits`). A group's data and its commit line are fdatasync'd in
one round (concurrently), and an append is acknowledged only after both syncs
returned [I-APPEND-3]; after a ``kill -9`` or a power cut, the last commit line
whose SHA1 matches the spool's bytes says exactly which bytes were acknowledged
[I-FRAG-2]; anything past it is an append that never committed and is truncated
away [I-APPEND-2] (`herald.fragment.spool_recovery`).

The spool is not thread-safe: one writer (the journal's append task) owns it. Its
blocking methods (``sync``) are meant to run in an executor. Its files are created
at its first write (or at once when it must record registers), and its two
descriptors are opened when used and closed when idle by the broker-wide
`herald.fragment.fdpool` (pinned while a write, sync or commit uses them), so a
broker serves many more journals than its descriptor limit.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from herald.fragment.commit_log import CommitLog
from herald.fragment.commits import encode_record, record_affixes, registers_json
from herald.fragment.fdpool import DescriptorPool, default_pool
from herald.fragment.group_write import GroupWrite
from herald.fragment.spool_descriptors import SpoolDescriptors
from herald.fragment.spool_precommits import SpoolPrecommits
from herald.fragment.spool_sums import PARALLEL_HASH_BYTES, GroupSums, new_sha1, seal_inline
from herald.fragment.whole_writes import pwrite_all
from herald.protocol.fragment import Fragment
from herald.protocol.journal import CompressionCodec
from herald.protocol.labels import LabelSet

SPOOL_SUFFIX = ".spool"
COMMITS_SUFFIX = ".commits"
# The commits file is preallocated in steps that double from the first to the
# largest: a journal written once holds 4 KiB of disk, not 1 MiB (10 GB at 10,000
# journals, issue 19 §1), while a busy one soon grows a megabyte at a time.
COMMITS_FIRST_PREALLOC_BYTES = 4 << 10
COMMITS_PREALLOC_BYTES = 1 << 20
# A spool file is zero-filled this far past its end by small groups (see
# `Spool.with_zero_padding`); a group this large or larger is written as it is.
DATA_PAD_BYTES = 256 << 10
_ZEROS = memoryview(bytes(DATA_PAD_BYTES))
_PAD_FIRST_BYTES = 4 << 10
EMPTY_SHA1 = hashlib.sha1().hexdigest()


@dataclass(frozen=True, slots=True)
class Commit:
    """One append's place in the journal: ``[begin, end)`` and the SHA1 of its bytes."""

    begin: int
    end: int
    sha1_hex: str


class Spool(SpoolDescriptors, SpoolPrecommits):
    """A fragment being written: committed bytes ``[begin, end)`` plus a pending delta.

    ``write`` places bytes after the pending delta; ``sync`` makes everything written
    durable and commits it; ``rollback`` forgets the pending delta. Readers only ever
    see ``[begin, end)``.
    """

    def __init__(self, directory: Path, journal: str, begin: int, codec: CompressionCodec,
                 registers: LabelSet, first_append_unix: float | None = None,
                 pool: DescriptorPool | None = None, commit_log: CommitLog | None = None):
        self.directory = directory
        # The data dir's commit log, if its owner opened one: rounds of several groups
        # go through it (herald.fragment.rounds); None: this spool syncs in place.
        self.commit_log = commit_log
        self.journal = journal
        self.begin = begin
        self.end = begin
        self.codec = codec
        self.registers = registers
        self.first_append_unix = first_append_unix
        self._delta = 0
        self._sha1 = new_sha1()  # paired with each body's where built (spool_sums)
        self._hashing: GroupSums | None = None  # a large group's SHA1s, under way
        self._committed_sum = EMPTY_SHA1  # the running SHA1 as of ``end``
        self._fragment: Fragment | None = None  # `fragment()` as of ``end``, once built
        self._registers_json: tuple[LabelSet | None, bytes] = (None, b"")  # the last line's, as written
        self.path = directory / f"{begin:016x}{SPOOL_SUFFIX}"
        self.commits_path = directory / f"{begin:016x}{COMMITS_SUFFIX}"
        # Files are created at the first write, descriptors opened through the pool
        # when used and closed when idle: an idle journal holds none (issue 19 §1).
        self._pool = pool or default_pool()
        self._created = False
        self._fd = -1
        self._commits_fd = -1
        self._commits_pos = 0
        self._precommitted = 0  # bytes of commit lines past _commits_pos, groups in flight
        self._commits_allocated = 0
        self._data_allocated = 0  # bytes of the spool file written (data or zero padding)
        if len(registers):
            # Registers outlive the fragment that last changed them: record them in the
            # new spool at once, so a crash before its first append still recovers them.
            line = encode_record(begin, registers, EMPTY_SHA1, None)
            with self.holding_descriptors():
                self._put_record(line)
            self._commits_pos += len(line)

    # -- writing (owned by the journal's append task) -------------------------------

    @property
    def pending_bytes(self) -> int:
        return self._delta

    @property
    def content_length(self) -> int:
        return self.end - self.begin

    def write(self, content: bytes) -> None:
        """Place ``content`` after what is already pending. Not yet visible or durable."""
        with self.holding_descriptors():
            pwrite_all(self._fd, [content], self.content_length + self._delta)
        self._sha1.update(content)
        self._delta += len(content)

    def write_group(self, contents: Sequence[bytes]) -> None:
        """Write a group's bodies after the pending bytes, in one ``pwritev`` with
        the zero padding of `with_zero_padding` (descriptors held by the caller;
        blocking), their SHA1s started beside it (`herald.fragment.spool_sums`). Padding that
        does not fit on a nearly full disk is dropped, not the append: only the
        bodies must fit. A failed write leaves the running SHA1 as it was."""
        size = sum(map(len, contents))
        at = self.end - self.begin + self._delta
        buffers = self.with_zero_padding(contents, at, size)
        # A sync round's groups are mostly small: no call to find that out per group.
        self._hashing = hashing = GroupSums.start(self._sha1, contents) if size >= PARALLEL_HASH_BYTES else None
        try:
            self._pwrite_padded(buffers, contents, at)
        except BaseException:
            if hashing is not None:
                self._hashing, self._sha1 = None, hashing.abandon()
            raise
        self._delta += size

    def _pwrite_padded(self, buffers: Sequence[bytes], contents: Sequence[bytes], at: int) -> None:
        try:
            pwrite_all(self._fd, buffers, at)
        except OSError as err:
            self._padded_write_failed(buffers, contents, at, err)

    def _padded_write_failed(self, buffers: Sequence[bytes], contents: Sequence[bytes], at: int,
                             err: OSError) -> None:
        """A write of ``contents`` and their padding (``buffers``) failed with ``err``:
        on a full disk, the bodies alone (they may still fit); else raises ``err``."""
        if buffers is contents or err.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise err
        self._data_allocated = at
        pwrite_all(self._fd, contents, at)

    def with_zero_padding(self, contents: Sequence[bytes], at: int, size: int | None = None) -> Sequence[bytes]:
        """``contents`` (to be written at file offset ``at``), plus zeros ahead of
        them when they would grow the file (see below for how far).

        An fdatasync that must also journal a new file size costs several times one
        that only flushes data (measured here: p50 1.5-5 ms vs 0.4-0.7 ms), so small
        groups grow the file ahead in zeros and the next ones overwrite them. The
        zeros are past the committed end, which readers never pass and recovery
        truncates [I-FRAG-2]; `close` truncates them before the spool is persisted."""
        end = at + (sum(map(len, contents)) if size is None else size)
        if end <= self._data_allocated:
            return contents
        if end - at >= DATA_PAD_BYTES // 4:  # big groups: padding would add writes, not save syncs
            self._data_allocated = end
            return contents
        # Ahead to the next power of two of its size (4 KiB at first, steps of at most
        # DATA_PAD_BYTES): a journal appended to once costs one block, as before (10,000
        # journals must not write 10,000 x 256 KiB of zeros); a busy one grows in
        # steps, so few of its syncs journal a size change.
        step = min(DATA_PAD_BYTES, max(_PAD_FIRST_BYTES, 1 << (end - 1).bit_length()))
        target = (end // step + 1) * step
        self._data_allocated = target
        return [*contents, _ZEROS[:target - end]]

    def rollback(self, sha1_state) -> None:
        """Forget pending bytes (a failed append) [I-APPEND-2]; ``sha1_state`` from ``mark``.
        A hashing still under way updates the forgotten SHA1 object, not this one."""
        self._delta = 0
        self._sha1 = sha1_state
        self._hashing = None

    def mark(self):
        """A snapshot of the running SHA1, to roll back to if the next write fails."""
        return self._sha1.copy()

    def sync_data(self) -> None:
        """fdatasync the pending bytes without committing them (blocking)."""
        with self.holding_descriptors():
            os.fdatasync(self._fd)

    def commit(self, registers: LabelSet, now_unix: float) -> None:
        """Commit pending bytes already made durable by ``sync_data`` (blocking)."""
        line, first, fragment_sum = self._record_line(registers, now_unix)
        with self.holding_descriptors():
            self._put_record(line)
        self._advance(len(line), registers, first, fragment_sum)

    def write_pending(self, contents: Sequence[bytes]) -> list[str]:
        """Write a group after the pending bytes, neither synced nor committed; each
        body's SHA1 (blocking). `sync_precommit` makes it durable later."""
        with self.holding_descriptors():
            self.write_group(contents)
            return self._hash(contents)

    def append_group(self, contents: Sequence[bytes], registers: LabelSet, now_unix: float) -> list[str]:
        """Write a group after the committed bytes, make it durable and commit it, in
        one sync round; returns each body's SHA1 (blocking: run it in an executor).
        The steps are `GroupWrite`'s; `herald.fragment.rounds` runs many at once."""
        write = GroupWrite(self, contents, registers, now_unix)
        with self.holding_descriptors():
            write.step(write.write_data)
            write.step(write.write_record)
            return write.finish()

    def _hash(self, contents: Sequence[bytes], bodies: bool = True) -> list[str]:
        """Each body's SHA1 (`_seal`'s first half)."""
        return self._seal(contents, bodies)[0]

    def _seal(self, contents: Sequence[bytes], bodies: bool = True) -> tuple[list[str], str | None]:
        """Each body's SHA1 and the fragment's running SHA1, for the group just
        written by `write_group` (`herald.fragment.spool_sums`), and the running
        SHA1's hex digest after it where the hashing here gave it (for
        `_record_line`), else None. ``bodies=False``: the running SHA1 alone (no
        body sums) unless the sums are already being computed beside the write."""
        hashing, self._hashing = self._hashing, None
        if hashing is not None:
            return hashing.result(), None
        if bodies:
            return seal_inline(self._sha1, contents)
        for content in contents:
            self._sha1.update(content)
        return [], None

    def _record_line(self, registers: LabelSet, now_unix: float,
                     fragment_sum: str | None = None) -> tuple[bytes, float | None, str]:
        """The commit line of the pending bytes, the first-append time it sets, and
        the fragment's SHA1 once they commit (``fragment_sum``, if `_seal` gave it)."""
        first = now_unix if self.first_append_unix is None and self._delta else None
        fragment_sum = fragment_sum or self._sha1.hexdigest()
        return encode_record(self.end + self._delta, registers, fragment_sum, first), first, fragment_sum

    def _line_affixes(self, registers: LabelSet, now_unix: float) -> tuple[bytes, bytes, float | None]:
        """`_record_line`'s line for the pending bytes, split around its SHA1
        (`herald.fragment.commits.record_affixes`), and the first-append time it sets:
        for the C seal (`herald.fragment.group_write.GroupWrite.write_logged`)."""
        first = now_unix if self.first_append_unix is None and self._delta else None
        cached = self._registers_json
        if cached[0] is not registers:  # a spool's registers change rarely: kept as JSON
            cached = self._registers_json = (registers, registers_json(registers))
        return (*record_affixes(self.end + self._delta, cached[1], first), first)

    def _put_record(self, line: bytes, sync: bool = True, at: int | None = None) -> None:
        """Write and fdatasync one commit line at the end of the preallocated commits
        file (descriptors held by the caller); the position advances in `_advance`.

        The file is preallocated so that fdatasync need not journal a size change:
        measured here, that halves the cost of syncing each commit record.
        """
        at = self._commits_pos if at is None else at
        if at + len(line) > self._commits_allocated:
            self._grow_commits(len(line))
        pwrite_all(self._commits_fd, [line], at)
        if sync:
            os.fdatasync(self._commits_fd)

    def _grow_commits(self, line_bytes: int, durable: bool = True) -> None:
        """Preallocate the commits file a step further, for a ``line_bytes`` line at least
        (descriptors held). ``durable``: fsync'd, size included, so the lines' own
        fdatasyncs need not journal it; lines the commit log holds need no sync until
        its checkpoint syncs the file (`herald.fragment.rounds`): no round waits."""
        step = min(max(self._commits_allocated, COMMITS_FIRST_PREALLOC_BYTES), COMMITS_PREALLOC_BYTES)
        grow = max(step, line_bytes)
        # Zeros written, not fallocate'd: an unwritten extent turns written at the
        # line's fdatasync, which journals metadata like a size change would.
        pwrite_all(self._commits_fd, [bytes(grow)], self._commits_allocated)
        self._commits_allocated += grow
        if durable:
            os.fsync(self._commits_fd)

    def _erase_record(self, length: int) -> None:
        """Zero a commit line whose group failed: the next line is written over it,
        and a restart must not find it (its data may reach the disk later from the
        page cache) [I-APPEND-2]. Best effort: a disk that fails this fails the spool."""
        if length:
            with contextlib.suppress(OSError):
                os.pwrite(self._commits_fd, bytes(length), self._commits_pos)

    def _advance(self, line_bytes: int, registers: LabelSet, first_append_unix: float | None,
                 fragment_sum: str, fragment: Fragment | None = None) -> None:
        """The pending bytes are committed: move the write head past them.
        ``fragment``: `fragment()` as it is now, if built ahead (`fragment_after`)."""
        self._committed_sum = fragment_sum
        self._fragment = fragment
        self._commits_pos += line_bytes
        self.end += self._delta
        self.registers = registers
        self._delta = 0
        if first_append_unix is not None:
            self.first_append_unix = first_append_unix

    # -- views ----------------------------------------------------------------------

    def pending_sha1_hex(self) -> str:
        """The fragment's SHA1 as it will be once the pending bytes commit."""
        return self._sha1.hexdigest()

    def fragment(self) -> Fragment:
        """The committed fragment, as readers and the index see it: built once per
        commit (a frozen dataclass costs some 3 us to make, and a round of many
        journals asks for one per group, on the loop)."""
        fragment, end = self._fragment, self.end  # the end first: `_advance` moves it last
        if fragment is None or fragment.end != end:
            sha1_hex = self._sha1_of_committed() if end > self.begin else "0" * 40
            fragment = self._fragment = Fragment(journal=self.journal, begin=self.begin, end=end,
                                                 sum=sha1_hex, codec=self.codec)
        return fragment

    def fragment_after(self, fragment_sum: str) -> Fragment:
        """`fragment()` as it will be once the pending bytes commit with the running
        SHA1 ``fragment_sum``: built ahead by a sync round while its log syncs
        (`herald.fragment.rounds`), then handed to `_advance`."""
        # Positional (journal, begin, end, sum, codec): a frozen dataclass's keywords
        # cost ~1 us more per group here, at 16 journals about one per append.
        return Fragment(self.journal, self.begin, self.end + self._delta, fragment_sum, self.codec)

    def _sha1_of_committed(self) -> str:
        # Kept at each commit (it is the commit record's sum): no digest per call.
        return self._committed_sum

    def close(self) -> None:
        """Release the spool's descriptors for good (it is rolled or its journal
        closed); idempotent. Cuts the zero padding past the committed end, so the
        file holds exactly the fragment's bytes when it is persisted."""
        self._pool.forget(self)
        self.close_descriptors()
        if self._data_allocated > self.content_length and self._created:
            with contextlib.suppress(FileNotFoundError):
                os.truncate(self.path, self.content_length)
            self._data_allocated = self.content_length

    def remove_files(self) -> None:
        """Delete both files once the fragment is safely in a store."""
        self.close()
        for path in (self.path, self.commits_path):
            path.unlink(missing_ok=True)

