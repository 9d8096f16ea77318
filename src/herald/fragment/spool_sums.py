"""A spool group's SHA1s: each body's (the append's ``X-Commit-SHA1-Sum``) and the
fragment's running sum (its name and each commit record's ``sum``).

Both are two passes over every byte. For a large group they run on two helper
threads (hashlib drops the GIL), started *before* the group's ``pwritev``, so they
overlap the page-cache copy and the data's fdatasync rather than follow them: a
1 MiB append waits for one SHA1 pass at most, and often for none.

    started = GroupSums.start(running_sha1, bodies)   # None: small, hash inline
    ...pwritev...
    body_sums = started.result() if started else hash_inline(running_sha1, bodies)
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

__all__ = ["PARALLEL_HASH_BYTES", "GroupSums", "hash_inline"]

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
        """Start both passes if ``contents`` is large enough (else None)."""
        if sum(map(len, contents)) < PARALLEL_HASH_BYTES:
            return None
        return cls(running_sha1.copy(), _HASHING.submit(_update, running_sha1, contents),
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
    """A small group's SHA1s, here and now."""
    _update(running_sha1, contents)
    return body_sums(contents)


def body_sums(contents: Sequence[bytes]) -> list[str]:
    return [hashlib.sha1(content).hexdigest() for content in contents]


def _update(running_sha1, contents: Sequence[bytes]) -> None:
    for content in contents:
        running_sha1.update(content)
