"""The query service's language model: the latest count of every bigram, searchable by prefix.

The job publishes a bigram's running total each time it changes, so the model
keeps the last value it read per bigram (updates of one bigram all come from one
journal, in commit order: the job maps them by bigram). Prefix search walks a
sorted list of keys from the first key ≥ the prefix; keys new since the last
search are merged in at search time (one linear merge), so applying an update is
a dict store and the initial catch-up over a large output is not quadratic.

Thread-safe: journal followers apply, HTTP handlers read, under one lock.
"""

from __future__ import annotations

import bisect
import heapq
import threading
from dataclasses import dataclass

__all__ = ["BigramCounts", "PrefixMatch"]


@dataclass(frozen=True, slots=True)
class PrefixMatch:
    """Bigrams starting with a prefix, in key order, at most ``limit`` of them."""

    bigrams: list[tuple[str, int]]
    truncated: bool


class BigramCounts:
    """bigram → latest published count."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._sorted: list[str] = []
        self._new: set[str] = set()
        self.updates = 0

    def apply(self, bigram: str, count: int) -> None:
        """Record ``count`` as the bigram's latest total."""
        with self._lock:
            if bigram not in self._counts:
                self._new.add(bigram)
            self._counts[bigram] = count
            self.updates += 1

    def count(self, bigram: str) -> int:
        """The bigram's latest count, 0 if it was never published."""
        with self._lock:
            return self._counts.get(bigram, 0)

    def with_prefix(self, prefix: str, limit: int) -> PrefixMatch:
        """Bigrams whose key starts with ``prefix`` (all, for ``""``), at most ``limit``."""
        with self._lock:
            if self._new:
                self._sorted = list(heapq.merge(self._sorted, sorted(self._new)))
                self._new.clear()
            found: list[tuple[str, int]] = []
            for key in self._sorted[bisect.bisect_left(self._sorted, prefix):]:
                if not key.startswith(prefix):
                    break
                if len(found) == limit:
                    return PrefixMatch(found, True)
                found.append((key, self._counts[key]))
            return PrefixMatch(found, False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._counts)
