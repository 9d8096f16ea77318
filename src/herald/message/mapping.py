"""Mappings: which journal of a selected partition list a message goes to.

Gazette's three (gazette-facts §3.1): random, modulo of a 32-bit FNV-1a key
hash, and rendezvous (highest random weight) hashing, which moves few keys when
journals are added or removed. Partition lists are label-selected journal
names, ordered by name as a List response returns them, so modulo is stable
for a fixed set. Randomness is an argument (``rnd``) to keep this pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random

__all__ = ["NoJournalsError", "fnv1a32", "modulo_mapping", "random_mapping", "rendezvous_mapping"]

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


class NoJournalsError(ValueError):
    """The partition list is empty: the selector matched no journals (Gazette's
    ErrEmptyListResponse)."""

    def __init__(self) -> None:
        super().__init__("journals: the partition selector matched no journals (empty list)")


def fnv1a32(data: bytes) -> int:
    """32-bit FNV-1a of ``data`` (Go's hash/fnv New32a)."""
    h = _FNV_OFFSET
    for b in data:
        h = ((h ^ b) * _FNV_PRIME) & 0xFFFFFFFF
    return h


def modulo_mapping(key: bytes, journals: Sequence[str]) -> str:
    """``journals[fnv1a32(key) % len(journals)]``."""
    if not journals:
        raise NoJournalsError()
    return journals[fnv1a32(key) % len(journals)]


_name_hashes: dict[str, int] = {}


def _name_hash(name: str) -> int:
    # Cached like Gazette caches per ListResponse; names are few and long-lived.
    h = _name_hashes.get(name)
    if h is None:
        if len(_name_hashes) > 65536:
            _name_hashes.clear()
        h = _name_hashes[name] = fnv1a32(name.encode("utf-8"))
    return h


def rendezvous_mapping(key: bytes, journals: Sequence[str]) -> str:
    """The journal with the largest ``fnv1a32(key) XOR fnv1a32(name)``; the first
    wins ties, and a score must exceed 0 to displace index 0 (as Gazette)."""
    if not journals:
        raise NoJournalsError()
    key_hash = fnv1a32(key)
    best, best_score = 0, 0
    for i, name in enumerate(journals):
        score = key_hash ^ _name_hash(name)
        if score > best_score:
            best, best_score = i, score
    return journals[best]


def random_mapping(journals: Sequence[str], rnd: random.Random) -> str:
    """A uniformly random journal, drawn from the caller's ``rnd``."""
    if not journals:
        raise NoJournalsError()
    return journals[rnd.randrange(len(journals))]
