"""The allocator converges, on real brokers and a real etcd: after its leader was
paused past its lease, and when one round's changes exceed an etcd transaction."""

from __future__ import annotations

import os
import signal

import httpx
import pytest

from herald import testing
from herald.client import BrokerClient
from herald.testing import apply_specs, journal_spec
from tests.broker import test_cluster
from tests.broker.test_cluster import _append_until_accepted, listed_route, member_key, wait_for_route

cluster = test_cluster.cluster  # three brokers in zones a/b/c over one etcd prefix

pytestmark = pytest.mark.slow


def _members(url: str) -> set[str]:
    doc = httpx.post(f"{url}/v1/members/list", json={}, timeout=10).json()
    return {f"{m['zone']}#{m['suffix']}" for m in doc["members"]}


def test_allocator_leader_paused_past_its_lease_is_assigned_back(cluster):
    journal = "leader/journal"
    leader, survivor, _ = cluster.values()  # a#ba started first: the oldest member leads
    apply_specs(leader.url, dict(journal_spec(journal), replication=3))
    primary = member_key(wait_for_route(leader.url, journal, 3)["members"][0])
    os.killpg(leader.proc.pid, signal.SIGSTOP)
    try:
        if primary != "a#ba":  # in flight, it answers once the route drops the paused broker
            resp = httpx.put(f"{cluster[primary].url}/{journal}", content=b"during\n", timeout=60)
            assert resp.status_code in (204, 421, 503), resp.text
        testing.wait_until(lambda: "a#ba" not in _members(survivor.url), "a#ba's lease to expire", 30)
    finally:
        os.killpg(leader.proc.pid, signal.SIGCONT)  # it re-joins under a new lease, no longer oldest
    route = wait_for_route(survivor.url, journal, 3)
    assert "a#ba" in map(member_key, route["members"]), route
    _append_until_accepted(f"{survivor.url}/{journal}", b"after\n")
    assert "a#ba" in map(member_key, listed_route(leader.url, journal)["members"])


def test_more_changes_than_one_etcd_transaction_are_assigned_over_rounds(cluster):
    """60 journals × 3 replicas is 180 puts: etcd refuses a transaction of more than
    128 operations, so one round of them all failed, again and again, forever."""
    url = next(iter(cluster.values())).url
    names = [f"burst/{i:02d}" for i in range(60)]
    apply_specs(url, *(dict(journal_spec(name), replication=3) for name in names))

    def all_assigned() -> bool:
        with BrokerClient(url, timeout_s=10) as client:
            infos = client.list("prefix=burst/")
        return len(infos) == len(names) and all(
            i.route.get("primary") == 0 and len(i.route.get("members", [])) == 3 for i in infos)
    testing.wait_until(all_assigned, "every burst/ journal assigned to three brokers", 60)
