"""Peer endpoints (``/v1/replicate/*``) are never open, even without ``--auth-keys``.

An embedded broker has no peers and refuses them to everyone. A cluster run
without auth keys signs its replication tokens with the peer secret the first
broker created in etcd, so replication works while a caller holding only a
member id (which ``/v1/members/list`` hands out) is refused and changes nothing.
"""

from __future__ import annotations

import base64
import secrets
import time

import httpx
import pytest

from herald.auth import ALL_CAPABILITIES, AuthKeys, Capability, Claims
from herald.broker.peer_stream import frame_head
from herald.client import BrokerClient
from herald.protocol.labels import LabelSelector, LabelSet
from herald.testing import BrokerProcess, journal_spec, wait_for_route

JOURNAL = "peers/journal"
SYNC_BODY = {"end": 1 << 20, "registers": [], "fragment_begin": 1 << 20}  # would roll a replica far forward


def forged(capability: int = Capability.REPLICATE, key: bytes | None = None) -> str:
    keys = AuthKeys([key or secrets.token_bytes(32)], allows_anonymous=False)
    return keys.sign(Claims(capability, LabelSelector(), time.time() + 300))


def peer_requests(primary: str) -> list[tuple[str, dict]]:
    """A sync and a stream of one group as a primary would send them, minus its token."""
    headers = {"X-Herald-Primary": primary}
    return [("/v1/replicate/sync", {"params": {"journal": JOURNAL}, "json": SYNC_BODY, "headers": headers}),
            ("/v1/replicate/stream", {"params": {"journal": JOURNAL}, "headers": dict(headers),
                                      "content": frame_head(0, 0, 5, LabelSet()) + b"evil\n"})]


KEY = b"k" * 32


@pytest.mark.parametrize("auth_args", [(), ("--auth-keys", base64.b64encode(KEY).decode())],
                         ids=["open", "auth-keys"])
def test_embedded_broker_refuses_peer_endpoints_to_everyone(broker_factory, auth_args):
    proc = broker_factory(None, None, *auth_args)
    admin = {"Authorization": f"Bearer {forged(ALL_CAPABILITIES, KEY)}"}  # the broker's own key, every bit
    with proc.client(headers=admin) as http:
        http.post("/v1/journals/apply", json={"changes": [
            {"upsert": journal_spec(JOURNAL), "expect_mod_revision": 0}]}).raise_for_status()
        http.put(f"/{JOURNAL}", content=b"seed\n").raise_for_status()
    for token in (None, forged(), forged(ALL_CAPABILITIES, KEY)):
        for path, kw in peer_requests("local#x"):
            if token:
                kw["headers"]["Authorization"] = f"Bearer {token}"
            resp = httpx.post(f"{proc.url}{path}", timeout=10, **kw)
            assert resp.status_code == 403, (path, token, resp.text)
            assert resp.json()["status"] == "PERMISSION_DENIED" and "embedded" in resp.json()["message"]
    with proc.client(headers=admin) as http:
        assert http.get(f"/{JOURNAL}", params={"block": "false"}).content == b"seed\n"


@pytest.fixture(scope="module")
def open_cluster(etcd, tmp_path_factory):
    """Two brokers on a real etcd, no --auth-keys, one journal replicated to both."""
    root = tmp_path_factory.mktemp("open-cluster")
    brokers = [BrokerProcess(root / f"data-{zone}", root / "store", "--etcd", etcd.url,
                             "--etcd.prefix", "/herald/test/open-cluster", "--zone", zone, "--id", f"b{zone}",
                             "--etcd.lease", "4s").start() for zone in "ab"]
    with BrokerClient(brokers[0].url) as client:
        client.apply([{"upsert": dict(journal_spec(JOURNAL), replication=2), "expect_mod_revision": 0}])
        wait_for_route(client, JOURNAL, 2)
    yield brokers
    for proc in brokers:
        proc.kill()


def read_all(url: str) -> tuple[bytes, str]:
    resp = httpx.get(f"{url}/{JOURNAL}", params={"block": "false"}, timeout=30)
    return resp.content, resp.headers.get("X-Write-Head", "")


@pytest.mark.slow
def test_cluster_without_auth_keys_replicates_with_its_peer_secret(open_cluster, etcd):
    for proc in open_cluster:
        resp = httpx.put(f"{proc.url}/{JOURNAL}", content=f"via {proc.url}\n".encode(), timeout=30)
        assert resp.status_code == 204, resp.text
    contents = {read_all(proc.url)[0] for proc in open_cluster}
    assert len(contents) == 1 and contents.pop().count(b"via ") == 2
    key = base64.b64encode(b"/herald/test/open-cluster/peer-secret").decode()
    kvs = httpx.post(f"{etcd.url}/v3/kv/range", json={"key": key}, timeout=5).json()["kvs"]
    assert len(base64.b64decode(kvs[0]["value"])) == 32  # created once, by the first broker


@pytest.mark.slow
def test_cluster_refuses_a_member_id_without_a_peer_token_and_changes_nothing(open_cluster):
    members = httpx.post(f"{open_cluster[0].url}/v1/members/list", json={}, timeout=10).json()["members"]
    route = httpx.post(f"{open_cluster[0].url}/v1/journals/list", json={}, timeout=10).json()["journals"][0]["route"]
    primary = route["members"][route["primary"]]
    primary_id = f"{primary['zone']}#{primary['suffix']}"
    assert primary_id in {f"{m['zone']}#{m['suffix']}" for m in members}  # what an attacker learns
    before = [read_all(proc.url) for proc in open_cluster]
    attempts = [(None, 401), ("not-a-jwt", 401), (forged(), 401), (forged(ALL_CAPABILITIES), 401)]
    for proc in open_cluster:
        for token, expected in attempts:
            for path, kw in peer_requests(primary_id):
                if token:
                    kw["headers"]["Authorization"] = f"Bearer {token}"
                resp = httpx.post(f"{proc.url}{path}", timeout=10, **kw)
                assert resp.status_code == expected, (proc.url, path, token, resp.text)
                assert resp.json()["status"] == "UNAUTHORIZED"
    assert [read_all(proc.url) for proc in open_cluster] == before
    assert httpx.put(f"{open_cluster[1].url}/{JOURNAL}", content=b"after\n", timeout=30).status_code == 204
    contents = {read_all(proc.url)[0] for proc in open_cluster}
    assert len(contents) == 1 and contents.pop().endswith(b"after\n")  # replication still works
