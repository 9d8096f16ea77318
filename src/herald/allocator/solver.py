"""The allocator's pure solver: which brokers should serve each journal.

Given live members, each journal's desired replication and its current
assignments, ``solve`` returns a desired peerset per journal, primary first.
Preferences, in order (as Gazette's allocator expresses with max-flow arcs):

1. keep current assignments (moving a replica costs a catch-up from the store);
2. spread a journal's replicas over as many zones as there are (≥2 when possible);
3. balance load: a member over its fair share gives up a replica to one under it;
4. break ties by rendezvous hash of (journal, member), so every leader agrees.

Members that are exiting get nothing new and shed what they have. Pure: no I/O.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from dataclasses import dataclass

from herald.keyspace.routes import Assignment, Member, MemberId


@dataclass(frozen=True, slots=True)
class Desired:
    """A journal's target peerset (primary first)."""

    journal: str
    members: tuple[MemberId, ...]


def _score(journal: str, member: MemberId) -> int:
    return zlib.crc32(f"{journal}|{member}".encode())


def solve(members: dict[MemberId, Member], replication: dict[str, int],
          current: dict[str, list[Assignment]]) -> dict[str, Desired]:
    """Desired peersets for every journal in ``replication`` (sorted, deterministic)."""
    live = {m for m, spec in members.items() if not spec.exiting}
    if not live:
        return {j: Desired(j, ()) for j in replication}
    total = sum(min(r, len(live)) for r in replication.values())
    fair = math.ceil(total / len(live))
    load: Counter[MemberId] = Counter()
    for journal in replication:
        for a in current.get(journal, []):
            if a.member in live:
                load[a.member] += 1
    return {journal: _solve_one(journal, min(replication[journal], len(live)), live, members,
                                current.get(journal, []), load, fair)
            for journal in sorted(replication)}


def _solve_one(journal: str, want: int, live: set[MemberId], members: dict[MemberId, Member],
               assigned: list[Assignment], load: Counter, fair: int) -> Desired:
    ordered = [a.member for a in sorted(assigned, key=lambda a: a.slot) if a.member in live]
    keep = list(dict.fromkeys(ordered))
    while len(keep) > want:  # a surplus (e.g. mid-move): the most crowded, most loaded goes
        zones = Counter(m.zone for m in keep)
        drop = max(keep, key=lambda m: (zones[m.zone], load[m], keep.index(m)))
        keep.remove(drop)
        load[drop] -= 1
    keep = _shed_overloaded(keep, live, load, fair)
    while len(keep) < want:
        pick = _best_candidate(journal, keep, live, load)
        keep.append(pick)
        load[pick] += 1
    return Desired(journal, tuple(_primary_first(keep, assigned)))


def _shed_overloaded(keep: list[MemberId], live: set[MemberId], load: Counter,
                     fair: int) -> list[MemberId]:
    """Move one replica off a member above its fair share, if a clearly less loaded
    member can take it without narrowing the journal's zone spread."""
    for member in sorted(keep, key=lambda m: -load[m]):
        if load[member] <= fair:
            break
        zones_kept = {m.zone for m in keep if m != member}
        if any(load[c] + 1 < load[member] and (c.zone == member.zone or c.zone not in zones_kept)
               for c in live - set(keep)):
            load[member] -= 1
            return [m for m in keep if m != member]
    return keep


def _best_candidate(journal: str, keep: list[MemberId], live: set[MemberId],
                    load: Counter) -> MemberId:
    zones = Counter(m.zone for m in keep)
    candidates = sorted(live - set(keep),
                        key=lambda m: (zones[m.zone], load[m], -_score(journal, m), m))
    return candidates[0]


def _primary_first(keep: list[MemberId], assigned: list[Assignment]) -> list[MemberId]:
    """Keep the current primary; else promote a replica that already holds data."""
    primary = next((a.member for a in assigned if a.slot == 0 and a.member in keep), None)
    if primary is None:
        holders = [a.member for a in sorted(assigned, key=lambda a: a.slot) if a.member in keep]
        primary = holders[0] if holders else (keep[0] if keep else None)
    if primary is None:
        return keep
    return [primary] + [m for m in keep if m != primary]
