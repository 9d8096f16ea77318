"""The allocator's pure solver: replication, zone spread, stability, balance."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from herald.allocator.solver import solve
from herald.keyspace.routes import Assignment, Member, MemberId


def members_of(spec: list[tuple[str, str]], exiting=()) -> dict[MemberId, Member]:
    out = {}
    for i, (zone, suffix) in enumerate(spec):
        mid = MemberId(zone, suffix)
        out[mid] = Member(mid, f"http://{suffix}", create_revision=i + 1, exiting=suffix in exiting)
    return out


def as_assignments(desired) -> dict[str, list[Assignment]]:
    return {j: [Assignment(j, m, slot) for slot, m in enumerate(d.members)] for j, d in desired.items()}


clusters = st.lists(st.tuples(st.sampled_from("abc"), st.text("xyz", min_size=1, max_size=3)),
                    min_size=1, max_size=7, unique_by=lambda t: t[1])
journals = st.dictionaries(st.text("pqrs", min_size=4, max_size=6), st.integers(1, 5), max_size=12)


@settings(max_examples=300, deadline=None)
@given(clusters, journals)
def test_every_journal_gets_min_of_replication_and_members_distinct_brokers(cluster, repl):
    members = members_of(cluster)
    desired = solve(members, repl, {})
    for journal, plan in desired.items():
        assert len(plan.members) == min(repl[journal], len(members))
        assert len(set(plan.members)) == len(plan.members)


@settings(max_examples=300, deadline=None)
@given(clusters, journals)
def test_replicas_span_as_many_zones_as_they_can(cluster, repl):
    members = members_of(cluster)
    zones = {m.zone for m in members}
    for plan in solve(members, repl, {}).values():
        assert len({m.zone for m in plan.members}) == min(len(plan.members), len(zones))


@settings(max_examples=300, deadline=None)
@given(clusters, journals)
def test_rounds_converge_to_a_stable_assignment(cluster, repl):
    """The driver re-solves after each round; the plan must reach a fixpoint."""
    members = members_of(cluster)
    plan = solve(members, repl, {})
    for _ in range(len(repl) * 2 + 2):
        again = solve(members, repl, as_assignments(plan))
        if again == plan:
            return
        plan = again
    raise AssertionError(f"no fixpoint: {plan}")


def test_dead_primary_is_replaced_by_a_replica_holding_data():
    members = members_of([("a", "x1"), ("b", "y1"), ("c", "z1")])
    current = {"j/one": [Assignment("j/one", MemberId("b", "y1"), 1),
                         Assignment("j/one", MemberId("c", "z1"), 2)]}  # slot 0 died with its lease
    plan = solve(members, {"j/one": 3}, current)["j/one"]
    assert plan.members[0] == MemberId("b", "y1")
    assert set(plan.members) == set(members)


def test_exiting_members_get_nothing():
    members = members_of([("a", "x1"), ("b", "y1"), ("c", "z1")], exiting={"z1"})
    desired = solve(members, {f"j/{i:03d}": 2 for i in range(6)}, {})
    assert all(MemberId("c", "z1") not in d.members for d in desired.values())


def test_a_joining_member_takes_a_fair_share():
    two = members_of([("a", "x1"), ("b", "y1")])
    repl = {f"j/{i:03d}": 1 for i in range(8)}
    current = as_assignments(solve(two, repl, {}))
    three = members_of([("a", "x1"), ("b", "y1"), ("c", "z1")])
    for _ in range(4):  # the driver converges over rounds; each round is one solve
        current = as_assignments(solve(three, repl, current))
    load = Counter(m for d in current.values() for m in [a.member for a in d])
    assert max(load.values()) - min(load.get(m, 0) for m in three) <= 1
