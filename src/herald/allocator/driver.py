"""The allocator's etcd driver: the leader turns the solver's plan into assignments.

Every broker runs ``Allocator.run``; only the leader — the member whose key has the
oldest create revision — writes. Each round is one etcd transaction guarded by the
leader's own member key and the mod revision of every key it touches, so a stale
leader or a racing write loses cleanly and the next round starts over.

Convergence is incremental and never drops data: new replicas are added first; a
surplus replica is removed only while the journal stays fully replicated and
consistent (every replica advertises the current route); a missing primary is
replaced by promoting a replica that holds the journal's data.
"""

from __future__ import annotations

import asyncio
import logging

from herald.allocator.solver import Desired, solve
from herald.keyspace.etcd import EtcdKeySpace
from herald.keyspace.routes import Assignment, Member, MemberId, is_consistent, route_of
from herald.protocol.errors import HeraldError

log = logging.getLogger(__name__)

DEBOUNCE_S = 0.05
RETRY_S = 0.5


class Allocator:
    """Runs the allocation loop for one member (acting only while it leads)."""

    def __init__(self, keyspace: EtcdKeySpace, self_id: MemberId):
        self.keyspace = keyspace
        self.self_id = self_id
        self._changed = asyncio.Event()
        keyspace.on_change(lambda _rev: self._changed.set())

    def is_leader(self) -> bool:
        members = self.keyspace.members()
        if not members:
            return False
        return min(members.values(), key=lambda m: m.create_revision).id == self.self_id

    async def run(self) -> None:
        self._changed.set()
        while True:
            await self._changed.wait()
            await asyncio.sleep(DEBOUNCE_S)  # batch a burst of watch events into one round
            self._changed.clear()
            if self.is_leader():
                try:
                    await self.converge()
                except HeraldError as err:
                    log.info("allocation round lost a race (%s); retrying", err.message)
                    self._changed.set()
                except Exception as err:  # process edge: one bad round must not end allocation
                    if type(err).__module__.startswith("aetcd") or isinstance(err, (OSError, TimeoutError)):
                        log.warning("allocation round failed: etcd unreachable (%s); retrying", type(err).__name__)
                    else:
                        log.exception("allocation round failed; retrying")
                    await asyncio.sleep(RETRY_S)
                    self._changed.set()

    async def converge(self) -> bool:
        """One round: returns True if it wrote anything."""
        ks = self.keyspace
        members, entries, current = ks.members(), ks.entries(), ks.assignments()
        desired = solve(members, {n: e.spec.replication for n, e in entries.items()}, current)
        tx = ks.client.transactions
        ops, compares = [], []
        for journal, assigned in current.items():
            if journal not in desired:  # the journal was deleted: its assignments go
                for a in assigned:
                    _delete(ks, tx, a, ops, compares)
        for journal, plan in desired.items():
            _plan_journal(ks, tx, plan, current.get(journal, []), members, ops, compares)
        if not ops:
            return False
        leader_key = ks.member_key(self.self_id).encode()
        compares.append(tx.create(leader_key) == members[self.self_id].create_revision)
        await ks.txn(compares, ops, "assignments changed during the allocation round")
        log.info("allocator applied %d changes", len(ops))
        return True


def _plan_journal(ks: EtcdKeySpace, tx, plan: Desired, assigned: list[Assignment],
                  members: dict[MemberId, Member], ops: list, compares: list) -> None:
    held = {a.member: a for a in assigned}
    has_primary = any(a.slot == 0 for a in assigned)
    next_slot = max((a.slot for a in assigned), default=0) + 1
    for member in plan.members:
        if member in held:
            continue
        slot = 0 if (member == plan.members[0] and not has_primary) else next_slot
        next_slot += slot != 0
        has_primary = has_primary or slot == 0
        _put(ks, tx, Assignment(plan.journal, member, slot), members[member].lease_id, ops, compares)
    surplus = [a for a in assigned if a.member not in plan.members]
    route = route_of(assigned, members)
    removable = (surplus and len(assigned) - len(surplus) >= len(plan.members)
                 and is_consistent(assigned, route))
    for a in surplus if removable else []:
        _delete(ks, tx, a, ops, compares)
    primary_left = any(a.slot == 0 for a in assigned if not (removable and a in surplus))
    if not primary_left and plan.members and plan.members[0] in held:
        promoted = held[plan.members[0]]  # a consistent replica: it holds the journal's data
        _delete(ks, tx, promoted, ops, compares)
        _put(ks, tx, Assignment(plan.journal, promoted.member, 0), members[promoted.member].lease_id,
             ops, compares)


def _put(ks, tx, a: Assignment, lease_id: int, ops: list, compares: list) -> None:
    key = ks.assignment_key(a).encode()
    compares.append(tx.version(key) == 0)
    ops.append(tx.put(key, b"", lease_id or None))


def _delete(ks, tx, a: Assignment, ops: list, compares: list) -> None:
    key = ks.assignment_key(a).encode()
    compares.append(tx.mod(key) == a.mod_revision)
    ops.append(tx.delete(key))
