"""Mappings: which journal of a selected partition list a message goes to.

Gazette's three (gazette-facts §3.1): random, modulo of a 32-bit FNV-1a key
hash, and rendezvous (highest random weight) hashing, which moves few keys when
journals are added or removed. Partition lists are label-selected journal
names, ordered by name as a List response returns them, so modulo is stable
for a fixed set. Randomness is an argument (``rnd``) to keep this pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from herald.protocol.errors import HeraldError, Status, ValidationError

if TYPE_CHECKING:
    import random

__all__ = ["MAPPINGS", "Mapping", "NoJournalsError", "fnv1a32", "mapping_by_name", "modulo_mapping",
           "random_mapping", "rendezvous_mapping"]

#: The mapping names a publisher, the Spark sink and ``journals append`` accept.
MAPPINGS = ("modulo", "rendezvous", "random")
#: ``(key, journals) -> journal``.
Mapping = Callable[[bytes, Sequence[str]], str]

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


class NoJournalsError(HeraldError):
    """The partition list is empty: the selector matched no journals (Gazette's
    ErrEmptyListResponse)."""

    def __init__(self) -> None:
        super().__init__(Status.JOURNAL_NOT_FOUND, "the partition selector matched no journals (empty list)",
                         "journals")


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


def mapping_by_name(name: str, rnd: random.Random, field: str = "mapping") -> Mapping:
    """The mapping called ``name`` (one of `MAPPINGS`) as ``(key, journals) -> journal``;
    ``random`` ignores the key and draws from ``rnd``. Raises ValidationError naming
    ``field`` for any other name."""
    if name == "modulo":
        return modulo_mapping
    if name == "rendezvous":
        return rendezvous_mapping
    if name == "random":
        return lambda _key, journals: random_mapping(journals, rnd)
    raise ValidationError(field, f"must be one of {', '.join(MAPPINGS)} ({name!r})")
