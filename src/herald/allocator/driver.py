"""The allocator's etcd driver: the leader turns the solver's plan into assignments.

Every broker runs ``Allocator.run``; only the leader — the member whose key has the
oldest create revision — writes. Each round is one etcd transaction guarded by the
leader's own member key, the member key of every broker it assigns to, and the mod
revision of every key it touches, so a stale leader, a member that re-joined under
a new lease or a racing write loses cleanly and the next round starts over. A round
writes at most what one transaction may hold (etcd's --max-txn-ops); after every
round that wrote, the leader waits for its write to reach the mirror and runs
another, until a round finds nothing to change.

Convergence is incremental and never drops data: new replicas are added first; a
surplus replica is removed only while the journal stays fully replicated and
consistent (every replica advertises the current route); a missing primary is
replaced by promoting a replica that holds the journal's data.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from herald.allocator.solver import Desired, solve
from herald.keyspace.etcd import MAX_TXN_OPS, EtcdKeySpace
from herald.keyspace.routes import Assignment, Member, MemberId, is_consistent, route_of
from herald.protocol.errors import HeraldError

log = logging.getLogger(__name__)

DEBOUNCE_S = 0.05
RETRY_S = 0.5
WRITE_WAIT_S = 10.0  # how long a round waits for the watch to deliver its own write


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
        """Run rounds while leading: at each keyspace change, and again after every
        round that wrote — once the mirror holds what it wrote — until a round finds
        nothing to change (as Gazette's allocator waits through its txn's revision).
        The event is cleared before a round reads the mirror, so a change that lands
        during a round runs the next one."""
        self._changed.set()
        while True:
            await self._changed.wait()
            await asyncio.sleep(DEBOUNCE_S)  # batch a burst of watch events into one round
            self._changed.clear()
            if self.is_leader():
                await self._round()

    async def _round(self) -> None:
        try:
            revision = await self.converge()
        except HeraldError as err:
            log.info("allocation round lost a race (%s); retrying", err.message)
            self._changed.set()
            return
        except Exception as err:  # process edge: one bad round must not end allocation
            if type(err).__module__.startswith("aetcd") or isinstance(err, (OSError, TimeoutError)):
                log.warning("allocation round failed: etcd unreachable (%s); retrying", type(err).__name__)
            else:
                log.exception("allocation round failed; retrying")
            await asyncio.sleep(RETRY_S)
            self._changed.set()
            return
        if revision:
            try:
                await self.keyspace.wait_for_revision(revision, WRITE_WAIT_S)
            except TimeoutError:
                log.warning("the keyspace watch is %.0f s behind the allocator's write; re-checking",
                            WRITE_WAIT_S)
            self._changed.set()

    async def converge(self) -> int:
        """One round: the revision it wrote at, or 0 if it found nothing to change.

        A round writes at most one etcd transaction's worth (etcd refuses more than
        MAX_TXN_OPS compares or operations): the journals past it wait for the next
        round, which a writing round always runs."""
        ks = self.keyspace
        members, entries, current = ks.members(), ks.entries(), ks.assignments()
        desired = solve(members, {n: e.spec.replication for n, e in entries.items()}, current)
        batch = _Batch(ks, members, self.self_id)
        deleted = [assigned for journal, assigned in current.items() if journal not in desired]
        for assigned in deleted:  # the journal was deleted: its assignments go
            if not batch.take(lambda assigned=assigned: [batch.delete(a) for a in assigned]):
                break
        for plan in desired.values() if not batch.full else ():
            if not batch.take(lambda plan=plan: _plan_journal(batch, plan, current.get(plan.journal, []), members)):
                break
        if not batch.ops:
            if batch.full:
                log.error("one journal's changes exceed an etcd transaction (%d operations)", MAX_TXN_OPS)
            return 0
        revision = await ks.txn(batch.compares(), batch.ops, "assignments changed during the allocation round")
        log.info("allocator applied %d changes", len(batch.ops))
        return revision


class _Batch:
    """One round's transaction: puts and deletes, each guarded by its key's revision,
    plus the create revision of our own member key (still leader) and of every member
    given an assignment — a member that re-joined since the mirror was read has a new
    lease, and a put under its old one must lose as a race, not fail in etcd."""

    def __init__(self, ks: EtcdKeySpace, members: dict[MemberId, Member], leader: MemberId):
        self.ks, self.tx, self.members = ks, ks.client.transactions, members
        self.ops: list = []
        self._compares: list = []
        self._leased: set[MemberId] = {leader}
        self.full = False

    def take(self, plan: Callable[[], object]) -> bool:
        """Run ``plan`` (one journal's changes, which must land together) and keep
        what it added if the transaction still fits; else drop it, mark the round
        full and return False (the rest waits for the next round)."""
        ops, compares, leased = len(self.ops), len(self._compares), set(self._leased)
        plan()
        if max(len(self.ops), len(self._compares) + len(self._leased)) <= MAX_TXN_OPS:
            return True
        del self.ops[ops:], self._compares[compares:]
        self._leased, self.full = leased, True
        return False

    def compares(self) -> list:
        return self._compares + [self.tx.create(self.ks.member_key(m).encode()) == self.members[m].create_revision
                                 for m in sorted(self._leased)]

    def put(self, a: Assignment) -> None:
        key = self.ks.assignment_key(a).encode()
        self._compares.append(self.tx.version(key) == 0)
        self.ops.append(self.tx.put(key, b"", self.members[a.member].lease_id or None))
        self._leased.add(a.member)

    def delete(self, a: Assignment) -> None:
        key = self.ks.assignment_key(a).encode()
        self._compares.append(self.tx.mod(key) == a.mod_revision)
        self.ops.append(self.tx.delete(key))


def _plan_journal(batch: _Batch, plan: Desired, assigned: list[Assignment],
                  members: dict[MemberId, Member]) -> None:
    held = {a.member: a for a in assigned}
    has_primary = any(a.slot == 0 for a in assigned)
    next_slot = max((a.slot for a in assigned), default=0) + 1
    for member in plan.members:
        if member in held:
            continue
        slot = 0 if (member == plan.members[0] and not has_primary) else next_slot
        next_slot += slot != 0
        has_primary = has_primary or slot == 0
        batch.put(Assignment(plan.journal, member, slot))
    surplus = [a for a in assigned if a.member not in plan.members]
    route = route_of(assigned, members)
    removable = (surplus and len(assigned) - len(surplus) >= len(plan.members)
                 and is_consistent(assigned, route))
    for a in surplus if removable else []:
        batch.delete(a)
    primary_left = any(a.slot == 0 for a in assigned if not (removable and a in surplus))
    if not primary_left and plan.members and plan.members[0] in held:
        promoted = held[plan.members[0]]  # a consistent replica: it holds the journal's data
        batch.delete(promoted)
        batch.put(Assignment(plan.journal, promoted.member, 0))
