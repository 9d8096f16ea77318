"""Members, assignments and routes: who serves which journal (pure).

Key layout in etcd (Gazette's, with ``#`` as separator so key order is entity order):

    <root>/items/<journal>                      -> JournalSpec (JSON)
    <root>/members/<zone>#<suffix>              -> MemberSpec (JSON), under the member's lease
    <root>/assign/<journal>#<zone>#<suffix>#<slot> -> advertised Route (JSON) or "",
                                                   under the assigned member's lease
    <root>/peer-secret                          -> 32 random bytes (keyspace/etcd.py)

Slot 0 is the primary. A journal's route is its assignments in slot order.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

SEPARATOR = "#"


@dataclass(frozen=True, slots=True, order=True)
class MemberId:
    zone: str
    suffix: str

    def __str__(self) -> str:
        return f"{self.zone}{SEPARATOR}{self.suffix}"

    @classmethod
    def parse(cls, text: str) -> MemberId:
        zone, _, suffix = text.partition(SEPARATOR)
        return cls(zone, suffix)


@dataclass(frozen=True, slots=True)
class Member:
    """A live broker: where it listens and the lease its keys live under."""

    id: MemberId
    endpoint: str
    lease_id: int = 0
    journal_limit: int = 1024
    exiting: bool = False
    create_revision: int = 0

    def to_json(self) -> bytes:
        return orjson.dumps({"endpoint": self.endpoint, "lease_id": self.lease_id,
                             "journal_limit": self.journal_limit, "exiting": self.exiting})

    @classmethod
    def from_json(cls, member_id: MemberId, raw: bytes, create_revision: int) -> Member:
        d = orjson.loads(raw)
        return cls(member_id, d["endpoint"], d.get("lease_id", 0), d.get("journal_limit", 1024),
                   d.get("exiting", False), create_revision)


@dataclass(frozen=True, slots=True)
class Assignment:
    """One member's slot in a journal's peerset, with the route it last advertised."""

    journal: str
    member: MemberId
    slot: int
    value: bytes = b""
    mod_revision: int = 0
    lease_id: int = 0

    def key_suffix(self) -> str:
        return SEPARATOR.join((self.journal, self.member.zone, self.member.suffix, str(self.slot)))

    @classmethod
    def parse_key(cls, suffix: str) -> tuple[str, MemberId, int]:
        journal, zone, member, slot = suffix.rsplit(SEPARATOR, 3)
        return journal, MemberId(zone, member), int(slot)


@dataclass(frozen=True, slots=True)
class Route:
    """A journal's peerset in slot order; ``primary`` indexes it (−1: no primary)."""

    members: tuple[MemberId, ...] = ()
    primary: int = -1
    endpoints: tuple[str, ...] = ()

    @property
    def primary_member(self) -> MemberId | None:
        return self.members[self.primary] if self.primary >= 0 else None

    @property
    def primary_endpoint(self) -> str | None:
        return self.endpoints[self.primary] if self.primary >= 0 else None

    def to_dict(self) -> dict:
        return {"members": [{"zone": m.zone, "suffix": m.suffix} for m in self.members],
                "primary": self.primary, "endpoints": list(self.endpoints)}

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_dict())


def route_of(assignments: list[Assignment], members: dict[MemberId, Member]) -> Route:
    """The route a journal's assignments describe (slot order; members must be live)."""
    ordered = sorted((a for a in assignments if a.member in members), key=lambda a: a.slot)
    ids = tuple(a.member for a in ordered)
    primary = 0 if ordered and ordered[0].slot == 0 else -1
    return Route(ids, primary, tuple(members[m].endpoint for m in ids))


def is_consistent(assignments: list[Assignment], route: Route) -> bool:
    """Every replica advertises the current route (safe to drop a surplus replica)."""
    want = route.to_json()
    return bool(assignments) and all(a.value == want for a in assignments)
