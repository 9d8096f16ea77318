"""A broker acts on every keyspace change, even one that lands while it is still
applying the previous one (real brokers, real etcd).

A broker re-resolves its journals at each keyspace change; a pass awaits whenever
it opens or closes a journal. A change that arrived during such an await used to
be lost until some other etcd write came: a primary kept serving an old peerset,
e.g. with two of its three replicas after the third was assigned back, and every
append was refused for a minute (the flaky stopped-replica test in test_cluster).
Here a store that answers only when the test says so holds one broker's pass open
at a known point, so the change lands inside it every time.
"""

from __future__ import annotations

import httpx
import pytest

from herald.allocator.solver import solve
from herald.keyspace.routes import Member, MemberId
from herald.testing import apply_specs, journal_spec
from herald.testing.tcp import HeldStore
from tests.broker.test_cluster import LEASE, _append_until_accepted, member_key, wait_for_route

pytestmark = pytest.mark.slow

S3_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
          "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.fixture
def held_store():
    store = HeldStore()
    yield store
    store.close()


@pytest.fixture
def s3_cluster(etcd, broker_factory, tmp_path, request):
    """test_cluster's three brokers, with credentials for an s3:// store (no real one)."""
    prefix = f"/herald/test/{request.node.name}"
    return {f"{zone}#b{zone}": broker_factory(
        tmp_path / f"data-{zone}", tmp_path / "store", "--etcd", etcd.url, "--etcd.prefix", prefix,
        "--zone", zone, "--id", f"b{zone}", "--etcd.lease", LEASE, env=S3_ENV) for zone in "abc"}


def _name_placed_on(target: str, members: list[str]) -> str:
    """A journal name the solver gives to ``target`` among equally loaded ``members``."""
    ids = {MemberId.parse(m): Member(MemberId.parse(m), "") for m in members}
    for i in range(1000):
        name = f"held/{i}"
        if str(solve(ids, {name: 1}, {})[name].members[0]) == target:
            return name
    raise AssertionError(f"no journal name lands on {target}")


def test_a_change_during_a_journal_open_reaches_the_primary(s3_cluster, held_store):
    journal = "resolve/journal"
    url = next(iter(s3_cluster.values())).url
    apply_specs(url, dict(journal_spec(journal), replication=2))
    route = [member_key(m) for m in wait_for_route(url, journal, 2)["members"]]
    primary, spare = route[0], next(m for m in s3_cluster if m not in route)
    apply_specs(url, journal_spec("spare/journal"))  # on the spare: every broker now serves one
    wait_for_route(url, "spare/journal", 1)
    # A journal on the primary whose store never answers: the primary's pass that
    # opens it waits inside the open until the store is released.
    held = _name_placed_on(primary, list(s3_cluster))
    apply_specs(url, journal_spec(held, stores=[f"s3://bucket/?endpoint={held_store.url}&region=us-east-1"]))
    assert [member_key(m) for m in wait_for_route(url, held, 1)["members"]] == [primary]
    assert held_store.connected.wait(30), "the primary never listed the held store"
    # Meanwhile the journal gets a third replica: the spec and the new assignment
    # reach the primary while its pass is held.
    apply_specs(url, dict(journal_spec(journal), replication=3))
    assert spare in map(member_key, wait_for_route(url, journal, 3)["members"])
    held_store.release()
    # The primary must now write to three brokers: the spare gets the bytes.
    resp = _append_until_accepted(f"{s3_cluster[primary].url}/{journal}", b"three copies\n")
    end = resp.headers["X-Commit-End"]
    try:
        got = httpx.get(f"{s3_cluster[spare].url}/{journal}", params={"block": "true", "end_offset": end},
                        timeout=30)
    except httpx.ReadTimeout:
        log = "".join(s3_cluster[primary].stderr_lines[-20:])
        raise AssertionError(f"the primary never wrote to the spare {spare}:\n{log}") from None
    assert got.content == b"three copies\n", got.text
