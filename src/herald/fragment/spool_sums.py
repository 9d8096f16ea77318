"""A spool group's SHA1s: each body's (the append's ``X-Commit-SHA1-Sum``) and the
fragment's running sum (its name and each commit record's ``sum``).

The two digests start from different states, so neither can be derived from the
other, but they need not cost two passes: `update_both` feeds one bytes object to
both in one pass of interleaved SHA-NI rounds (`herald.fragment._spool_native`, a C
extension: 0.54-0.58 ms of CPU per MiB for the pair where hashlib's two passes took
0.95-0.98). Where it is not built or the CPU lacks SHA extensions, `new_sha1` is
hashlib's and `PAIRED` is False: two passes, on two threads for a large group.

For a large group the hashing runs on helper threads (both SHA1s drop the GIL),
started *before* the group's ``pwritev``, so it overlaps the page-cache copy and the
data's fdatasync rather than follows them: a 1 MiB append waits for one pass at
most, and often for none.

    started = GroupSums.start(running_sha1, bodies)   # None: small, hash inline
    ...pwritev...
    body_sums = started.result() if started else hash_inline(running_sha1, bodies)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

__all__ = ["FRAMED", "PAIRED", "PARALLEL_HASH_BYTES", "GroupSums", "hash_inline", "new_sha1", "seal_framed",
           "seal_inline", "update_both"]

new_sha1: Callable[[], Any]
try:
    from herald.fragment import _spool_native
    from herald.fragment._spool_native import SHA1 as _PairedSHA1
    from herald.fragment._spool_native import sha1 as new_sha1
    from herald.fragment._spool_native import update_both as _update_both
    PAIRED = True
    #: None where the extension was built before `seal` (a checkout not yet rebuilt
    #: by ``make``): the paired hashing above must not be lost for it.
    _seal = getattr(_spool_native, "seal", None)
    _seal_frame = getattr(_spool_native, "seal_frame", None)  # likewise, built before it
except ImportError:  # not built, or a CPU without SHA extensions: hashlib, two passes
    new_sha1, PAIRED, _seal, _seal_frame = hashlib.sha1, False, None, None


#: Whether `seal_framed` can run (the extension is built, with it).
FRAMED = _seal_frame is not None


def update_both(first, second, data) -> None:
    """Feed ``data`` to two SHA1s: in one pass where both are `new_sha1` s."""
    if PAIRED and type(first) is _PairedSHA1 and type(second) is _PairedSHA1:
        _update_both(first, second, data)
    else:
        first.update(data)
        second.update(data)


#: From this many bytes in a group, its SHA1s run on `_HASHING` beside its write
#: (a thread per core is all that can help); smaller groups hash inline, where a
#: thread hand-off would cost more than it saves.
PARALLEL_HASH_BYTES = 128 << 10
_HASHING = ThreadPoolExecutor(max_workers=2, thread_name_prefix="herald-sha1")


@dataclass(frozen=True, slots=True)
class GroupSums:
    """A large group's two SHA1 passes under way, and the running SHA1 as it was
    before them (to restore if the group's write fails)."""

    before: object
    running: Future[None]
    bodies: Future[list[str]]

    @classmethod
    def start(cls, running_sha1, contents: Sequence[bytes]) -> GroupSums | None:
        """Start the hashing if ``contents`` is large enough (else None): one paired
        pass on one thread, or hashlib's two passes on two."""
        if sum(map(len, contents)) < PARALLEL_HASH_BYTES:
            return None
        before = running_sha1.copy()
        if PAIRED:
            both = _HASHING.submit(hash_inline, running_sha1, contents)
            return cls(before, both, both)  # type: ignore[arg-type]  # waited for as either
        return cls(before, _HASHING.submit(_update, running_sha1, contents),
                   _HASHING.submit(body_sums, contents))

    def result(self) -> list[str]:
        """Each body's SHA1, once both passes are done."""
        self.running.result()
        return self.bodies.result()

    def abandon(self):
        """The group's write failed: wait out the running pass; the SHA1 as it was."""
        self.running.exception()  # waits; an update of bytes does not fail
        return self.before


def hash_inline(running_sha1, contents: Sequence[bytes]) -> list[str]:
    """Each body's SHA1, and ``running_sha1`` updated with them, here and now."""
    if not PAIRED:
        _update(running_sha1, contents)
        return body_sums(contents)
    sums = []
    for content in contents:
        body = new_sha1()
        update_both(running_sha1, body, content)
        sums.append(body.hexdigest())
    return sums


def seal_inline(running_sha1, contents: Sequence[bytes]) -> tuple[list[str], str]:
    """`hash_inline`, and the running SHA1's hex digest after it: a small group's
    seal (its body sums, and its fragment's sum for the commit line). One call
    into the C extension where the running SHA1 is its own (at 16 journals, one
    group per append: the loop of objects and digests here cost 0.5-1 us more),
    else the same in Python."""
    if _seal is not None and type(running_sha1) is _PairedSHA1:
        return _seal(running_sha1, contents)
    return hash_inline(running_sha1, contents), running_sha1.hexdigest()


def seal_framed(running_sha1: Any, contents: Sequence[bytes], directory: bytes, begin: int, data_at: int,
                line_at: int, prefix: bytes, suffix: bytes) -> tuple[list[str], str, bytes, bytes] | None:
    """`seal_inline`, the commit line ``prefix + running hex + suffix`` and the head
    of the group's commit log record (`herald.fragment.commit_log_records.frame`'s
    buffers but the bodies, as one bytes object), in one call into the C extension:
    ``(body sums, running hex, line, head)``. None where the extension (or this
    function of it) is not built or the running SHA1 is not its own: the caller
    takes the Python steps instead. At 16 journals, one small group per append:
    ~2 us of the round thread's ~4 for those steps."""
    if _seal_frame is None or type(running_sha1) is not _PairedSHA1:
        return None
    sealed: tuple[list[str], str, bytes, bytes] = _seal_frame(running_sha1, contents, directory, begin, data_at,
                                                              line_at, prefix, suffix)
    return sealed


def body_sums(contents: Sequence[bytes]) -> list[str]:
    return [hashlib.sha1(content).hexdigest() for content in contents]


def _update(running_sha1, contents: Sequence[bytes]) -> None:
    for content in contents:
        running_sha1.update(content)
