"""Cluster mode on a real etcd: replication, proxying, fail-over [I-APPEND-3]."""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest

from herald import testing
from herald.client import BrokerClient
from herald.client.transient import Backoff
from herald.testing import apply_specs, journal_spec
from tests.broker.acked_writers import AckedWriters

pytestmark = pytest.mark.slow
LEASE = "4s"  # short for fast fail-over, long enough for a loaded CI machine


@pytest.fixture
def cluster(etcd, broker_factory, tmp_path, request):
    """Three brokers in zones a/b/c over one etcd prefix (unique per test) and one store."""
    prefix = f"/herald/test/{request.node.name}"
    brokers = {}
    for zone in "abc":
        brokers[f"{zone}#b{zone}"] = broker_factory(
            tmp_path / f"data-{zone}", tmp_path / "store", "--etcd", etcd.url, "--etcd.prefix", prefix,
            "--zone", zone, "--id", f"b{zone}", "--etcd.lease", LEASE)
    _diagnostic_brokers[:] = brokers.values()
    return brokers


def listed_route(url: str, journal: str) -> dict:
    doc = httpx.post(f"{url}/v1/journals/list", json={"selector": f"name={journal}"}, timeout=10).json()
    return doc["journals"][0]["route"] if doc["journals"] else {"members": [], "primary": -1}


def wait_for_route(url: str, journal: str, size: int, deadline_s: float = 30) -> dict:
    """`herald.testing.wait_for_route`, printing the brokers' logs if it times out."""
    try:
        with BrokerClient(url, timeout_s=10) as client:
            return testing.wait_for_route(client, journal, size, deadline_s)
    except AssertionError:
        _dump_logs()
        raise


def _dump_logs() -> None:
    """Print the cluster's broker logs (pytest shows them with the failure)."""
    for proc in _diagnostic_brokers:
        print("=====", proc.url, "".join(proc.stderr_lines[-40:]))


_diagnostic_brokers = []


def member_key(member: dict) -> str:
    return f"{member['zone']}#{member['suffix']}"


def test_replicated_appends_through_every_broker_read_the_same_everywhere(cluster):
    urls = [b.url for b in cluster.values()]
    spec = dict(journal_spec("cluster/journal"), replication=3)
    apply_specs(urls[0], spec)
    route = wait_for_route(urls[0], "cluster/journal", 3)
    assert {m["zone"] for m in route["members"]} == {"a", "b", "c"}  # spread over zones
    bodies = [f"via broker {i}\n".encode() for i in range(len(urls))]
    for url, body in zip(urls, bodies):  # two of three are proxied to the primary
        resp = httpx.put(f"{url}/cluster/journal", content=body, timeout=30)
        assert resp.status_code == 204, resp.text
    for url in urls:
        assert httpx.get(f"{url}/cluster/journal", timeout=30).content == b"".join(bodies)
    members = httpx.post(f"{urls[0]}/v1/members/list", json={}).json()["members"]
    assert sorted(m["zone"] for m in members) == ["a", "b", "c"]
    assert sum(m["primary_journals"] for m in members) == 1
    assert sum(m["replica_journals"] for m in members) == 2


def whole_journal(url: str, journal: str) -> bytes:
    """Every byte to the write head: a plain GET answers one fragment at a time (206
    Partial Content where a broker rolled a new spool, as at a fail-over)."""
    with BrokerClient(url) as client:
        return b"".join(chunk for _, chunk in client.read(journal, 0))


def test_kill_9_of_primary_loses_no_acknowledged_byte(cluster):
    urls = [b.url for b in cluster.values()]
    # Two replicas of three brokers: the spare joins the peerset when the primary dies
    # (a peerset short of `replication` refuses appends), and must then serve the
    # range below its head that it rolled forward over.
    apply_specs(urls[0], dict(journal_spec("failover/journal"), replication=2))
    route = wait_for_route(urls[0], "failover/journal", 2)
    primary = cluster[member_key(route["members"][0])]
    survivors = [b for b in cluster.values() if b is not primary]
    with AckedWriters(f"{survivors[0].url}/failover/journal") as writers:
        writers.wait_for(50, 60, "appends did not start")
        primary.kill()
        writers.wait_for(len(writers.acked) + 50, 30, "appends did not resume after fail-over")
    acked = writers.acked
    contents = [whole_journal(b.url, "failover/journal") for b in survivors]
    assert contents[0] == contents[1]  # identical on every replica
    for begin, body in acked:
        assert contents[0][begin:begin + len(body)] == body
    begins = [b for b, _ in acked]
    assert begins == sorted(begins)  # acknowledged in order


def test_stopped_replica_never_lets_an_append_be_acknowledged_without_it(cluster):
    urls = [b.url for b in cluster.values()]
    apply_specs(urls[0], dict(journal_spec("partition/journal"), replication=3))
    route = wait_for_route(urls[0], "partition/journal", 3)
    primary = cluster[member_key(route["members"][0])]
    replica = cluster[member_key(route["members"][1])]
    assert httpx.put(f"{primary.url}/partition/journal", content=b"before\n").status_code == 204
    log_mark, stopped_at = len(primary.stderr_lines), time.monotonic()
    os.killpg(replica.proc.pid, signal.SIGSTOP)
    try:
        resp = httpx.put(f"{primary.url}/partition/journal", content=b"during\n", timeout=60)
        # Either it failed cleanly (replica unreachable), or it waited until the stopped
        # replica's lease expired and a new peerset formed without it.
        assert resp.status_code in (204, 421, 503), resp.text
        if resp.status_code == 204:
            now = listed_route(primary.url, "partition/journal")
            assert member_key(route["members"][1]) not in map(member_key, now["members"])
    finally:
        os.killpg(replica.proc.pid, signal.SIGCONT)
    stopped_s = time.monotonic() - stopped_at
    warnings = sum("WARNING" in line for line in primary.stderr_lines[log_mark:])
    print(f"figures: replica stopped {stopped_s:.1f}s, the primary logged {warnings} warnings "
          f"({warnings / stopped_s:.2f}/s), the append answered {resp.status_code}")
    assert warnings / stopped_s < 5, "".join(primary.stderr_lines[log_mark:][-20:])  # paced, not 600/s
    resp = _append_until_accepted(f"{primary.url}/partition/journal", b"after\n")  # appends resume
    # A blocking read up to the acknowledged end waits out any hole a roll-forward left
    # while the replica that got ahead persists its fragment.
    end = resp.headers["X-Commit-End"]
    content = httpx.get(f"{primary.url}/partition/journal", params={"block": "true", "end_offset": end},
                        timeout=60).content
    assert content.startswith(b"before\n") and content.endswith(b"after\n")


def test_members_list_and_journals_list_primary_show_the_cluster(cluster):
    from typer.testing import CliRunner

    from herald.cli.main import app

    url = next(iter(cluster.values())).url
    apply_specs(url, dict(journal_spec("cli/journal"), replication=2))
    route = wait_for_route(url, "cli/journal", 2)
    runner = CliRunner()
    members = runner.invoke(app, ["members", "list", "--broker", url])
    assert members.exit_code == 0, members.output
    for zone in "abc":
        assert f"b{zone}" in members.output
    listed = runner.invoke(app, ["journals", "list", "--primary", "--broker", url])
    assert listed.exit_code == 0, listed.output
    assert route["members"][0]["suffix"] in listed.output


def test_restarted_replica_rejoins_and_serves_every_byte(cluster):
    urls = [b.url for b in cluster.values()]
    apply_specs(urls[0], dict(journal_spec("rejoin/journal"), replication=3))
    route = wait_for_route(urls[0], "rejoin/journal", 3)
    replica = cluster[member_key(route["members"][2])]
    first = b"".join(f"before {i}\n".encode() for i in range(20))
    resp = httpx.put(f"{urls[0]}/rejoin/journal", content=first, timeout=30)
    assert resp.status_code == 204, resp.text
    replica.kill()
    replica.start()  # same data dir, a new port: it recovers its spool, re-announces, is re-assigned
    # The route of 3 members right after the kill is the stale one (the killed
    # broker's lease outlives it): wait for the member at its new endpoint.
    _wait_for_endpoint(urls[0], "rejoin/journal", member_key(route["members"][2]), replica.url)
    resp = _append_until_accepted(f"{replica.url}/rejoin/journal", b"after\n")
    end = resp.headers["X-Commit-End"]
    got = httpx.get(f"{replica.url}/rejoin/journal", params={"block": "true", "end_offset": end},
                    timeout=60).content
    assert got == first + b"after\n"


def _wait_for_endpoint(url: str, journal: str, member: str, endpoint: str, deadline_s: float = 30) -> dict:
    """The journal's route once ``member`` is in it at ``endpoint`` (a route has no
    watch event: re-checked with a deadline, logs printed if it passes)."""
    def rejoined() -> dict | None:
        route = listed_route(url, journal)
        where = dict(zip(map(member_key, route["members"]), route.get("endpoints", [])))
        return route if where.get(member, "").rstrip("/") == endpoint.rstrip("/") else None
    try:
        return testing.wait_until(rejoined, f"{member} in the route of {journal} at {endpoint}", deadline_s)
    except AssertionError:
        _dump_logs()
        raise


def _append_until_accepted(url: str, content: bytes, deadline_s: float = 60) -> httpx.Response:
    """PUT ``content`` until it is acknowledged (a peerset short, re-syncing or on a
    route on its way refuses it meanwhile), with the clients' backoff and a deadline.
    Refusals used to be retried at once (and, in one test, forever): on a loaded
    machine that spin took the CPU the brokers needed to converge, and a test ran
    into pytest's timeout instead of failing with the brokers' logs."""
    backoff, deadline = Backoff(), time.monotonic() + deadline_s
    while (resp := httpx.put(url, content=content, timeout=60)).status_code != 204:
        if time.monotonic() > deadline:
            _dump_logs()
            raise AssertionError(f"appends to {url} still refused after {deadline_s}s: {resp.text}")
        backoff.wait()
    return resp


def test_replicas_persist_identical_fragments(cluster, tmp_path):
    urls = [b.url for b in cluster.values()]
    apply_specs(urls[0], dict(journal_spec("frag/journal", length=1024), replication=3))
    wait_for_route(urls[0], "frag/journal", 3)
    payload = [f"{i:04d} ".encode() * 100 + b"\n" for i in range(6)]
    for i, body in enumerate(payload):
        assert httpx.put(f"{urls[i % 3]}/frag/journal", content=body, timeout=30).status_code == 204
    for proc in cluster.values():
        assert proc.terminate() == 0
    names = sorted(p.name for p in (tmp_path / "store" / "frag" / "journal").iterdir())
    spans = [tuple(int(x, 16) for x in name.split("-")[:2]) for name in names]
    assert spans == sorted(spans)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))  # no overlaps, no gaps
    assert spans[0][0] == 0 and spans[-1][1] == sum(map(len, payload))


def test_losing_the_etcd_leader_loses_no_acknowledged_byte(broker_factory, tmp_path):
    """Brokers on a 3-member etcd: kill -9 the etcd leader under a continuous writer."""
    from herald.testing.etcd import EtcdCluster

    etcds = EtcdCluster(tmp_path / "etcd").start()
    try:
        brokers = [broker_factory(tmp_path / f"d{i}", tmp_path / "store", "--etcd", m.url,
                                  "--zone", zone, "--id", f"e{zone}", "--etcd.lease", LEASE)
                   for i, (m, zone) in enumerate(zip(etcds.members, "abc"))]
        # Two replicas of three brokers: the broker whose etcd member dies loses its
        # lease, and a peerset short of `replication` refuses appends until a spare joins.
        apply_specs(brokers[0].url, dict(journal_spec("etcd/journal"), replication=2))
        wait_for_route(brokers[0].url, "etcd/journal", 2)
        leader = etcds.leader()
        writer_broker = next(b for b, m in zip(brokers, etcds.members) if m is not leader)
        acked = []
        for i in range(200):
            if i == 50:
                leader.stop()  # kill -9 of the etcd leader mid-stream
            body = f"rec {i}\n".encode()

            def appended(body=body):
                resp = httpx.put(f"{writer_broker.url}/etcd/journal", content=body, timeout=30)
                assert resp.status_code in (204, 421, 503), resp.text  # retryable while routes move
                return resp if resp.status_code == 204 else None
            resp = testing.wait_until(appended, f"append {i} acknowledged", deadline_s=90)
            acked.append((int(resp.headers["X-Commit-Begin"]), body))
        assert len(acked) == 200
        end = max(b + len(body) for b, body in acked)
        content = httpx.get(f"{writer_broker.url}/etcd/journal",
                            params={"block": "true", "end_offset": end}, timeout=60).content
        for begin, body in acked:
            assert content[begin:begin + len(body)] == body
    finally:
        etcds.stop()


def test_a_cluster_member_keeps_a_lone_writers_rounds_off_its_event_loop(etcd, broker_factory, tmp_path, request):
    """`herald.broker.lone_rounds` runs an embedded broker's lone-writer rounds on its
    event loop; a cluster member never does (`SyncRounds.rounds_on_loop`): that loop
    keeps its etcd lease, and a disk stall inside one fdatasync must not hold it up.
    One writer's sequential appends on one connection are all acknowledged, with no
    round counted on the loop."""
    broker = broker_factory(tmp_path / "data", tmp_path / "store", "--etcd", etcd.url,
                            "--etcd.prefix", f"/herald/test/{request.node.name}", "--etcd.lease", LEASE)
    apply_specs(broker.url, journal_spec("cluster/lone"))
    wait_for_route(broker.url, "cluster/lone", 1)
    with httpx.Client(base_url=broker.url, timeout=30) as http:
        for i in range(40):
            assert http.put("/cluster/lone", content=b"%d\n" % i).status_code == 204
        metrics = http.get("/debug/metrics").text
    assert _sample(metrics, "herald_broker_sync_rounds_total") >= 40
    assert _sample(metrics, "herald_broker_sync_rounds_on_loop_total") == 0
    assert httpx.get(f"{broker.url}/cluster/lone", timeout=30).content == b"".join(b"%d\n" % i for i in range(40))


def _sample(metrics: str, name: str) -> float:
    """One unlabelled Prometheus sample of ``metrics`` (it must be there)."""
    values = [float(line.split()[1]) for line in metrics.splitlines() if line.startswith(name + " ")]
    assert len(values) == 1, f"{name} not exported"
    return values[0]
