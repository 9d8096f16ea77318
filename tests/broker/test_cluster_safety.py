"""Data safety across a fail-over, on real brokers and a real etcd (Gazette's rules).

- A replica that rolled forward to the primary's head holds a hole below it until
  its store listing shows the primary's fragments; a read there is served (listing
  now, or proxied to the primary), never answered 416 below the write head.
- A peerset smaller than ``replication`` refuses appends (INSUFFICIENT_JOURNAL_BROKERS)
  rather than acknowledging them on fewer copies [I-APPEND-3].
- A store listing ending past the primary's spool moves the primary there before it
  appends (Gazette's INDEX_HAS_GREATER_OFFSET): no append lands under persisted bytes.
"""

from __future__ import annotations

import hashlib

import httpx
import pytest

from herald import testing
from herald.testing import apply_specs, journal_spec
from tests.broker import test_cluster
from tests.broker.test_cluster import listed_route, member_key, wait_for_route

cluster = test_cluster.cluster  # three brokers in zones a/b/c over one etcd prefix

pytestmark = pytest.mark.slow


def _route_keys(url: str, journal: str) -> list[str]:
    return [member_key(m) for m in listed_route(url, journal)["members"]]


def _write_head(url: str, journal: str) -> int:
    return int(httpx.head(f"{url}/{journal}", params={"offset": -1}, timeout=10).headers["X-Write-Head"])


def test_a_new_replica_serves_the_hole_below_its_head_at_once(cluster):
    journal = "hole/journal"
    urls = [b.url for b in cluster.values()]
    # GZIP and one big fragment: the primary's upload at the fail-over takes a
    # while, so the new replica's first listing (at its roll-forward) misses it.
    apply_specs(urls[0], dict(journal_spec(journal, compression_codec="GZIP", length=1 << 26), replication=2))
    members = [member_key(m) for m in wait_for_route(urls[0], journal, 2)["members"]]
    primary, replica = cluster[members[0]], cluster[members[1]]
    spare = next(b for key, b in cluster.items() if key not in members)
    body = b"".join(b"%08d a line of text that compresses\n" % i for i in range(150_000))
    resp = httpx.put(f"{primary.url}/{journal}", content=body, timeout=60)
    assert resp.status_code == 204, resp.text
    head = int(resp.headers["X-Commit-End"])
    replica.kill()  # kill -9: the spare joins the peerset and rolls forward to `head`
    key = next(k for k, b in cluster.items() if b is spare)
    testing.wait_until(lambda: key in _route_keys(primary.url, journal), "the spare in the route")
    testing.wait_until(lambda: _write_head(spare.url, journal) == head, "the spare rolled forward")
    offset, got = 0, []
    while offset < head:  # the spare itself answers (it is a member: no proxying by route)
        resp = httpx.get(f"{spare.url}/{journal}", params={"offset": offset}, timeout=60)
        assert resp.status_code == 206, (resp.status_code, resp.text[:200])
        assert resp.content, f"an empty read at {offset} below the head {head}"
        got.append(resp.content)
        offset += len(resp.content)
    assert b"".join(got) == body


def test_a_peerset_short_of_replication_refuses_appends(cluster):
    journal = "short/journal"
    urls = [b.url for b in cluster.values()]
    apply_specs(urls[0], dict(journal_spec(journal), replication=3))
    members = [member_key(m) for m in wait_for_route(urls[0], journal, 3)["members"]]
    primary, replica = cluster[members[0]], cluster[members[2]]
    assert httpx.put(f"{primary.url}/{journal}", content=b"three copies\n", timeout=30).status_code == 204
    replica.kill()  # kill -9; only two brokers are left for a journal that wants three
    testing.wait_until(lambda: len(_route_keys(primary.url, journal)) == 2, "a route of two")
    head = _write_head(primary.url, journal)

    def settled() -> httpx.Response | None:
        # Right after the route change a pipeline may still fail syncing the dead peer
        # (also 503): wait for an answer about the peerset's size, or an acknowledgement.
        resp = httpx.put(f"{primary.url}/{journal}", content=b"two copies\n", timeout=30)
        return resp if resp.status_code == 204 or "replication" in resp.text else None

    resp = testing.wait_until(settled, "an answer on the short peerset")
    assert resp.status_code == 503, "acknowledged with 2 of 3 replicas"
    assert resp.json()["status"] == "INSUFFICIENT_JOURNAL_BROKERS"
    # The aiohttp gateway (register headers) and the JSON append refuse alike.
    resp = httpx.put(f"{primary.url}/{journal}", content=b"x\n", headers={"X-Union-Registers": "kind=test"},
                     timeout=30)
    assert resp.status_code == 503 and resp.json()["status"] == "INSUFFICIENT_JOURNAL_BROKERS", resp.text
    assert _write_head(primary.url, journal) == head  # nothing was written
    replica.start()  # back with its data dir: the peerset is whole again
    testing.wait_until(lambda: len(_route_keys(primary.url, journal)) == 3, "a route of three")

    def appended() -> httpx.Response | None:
        resp = httpx.put(f"{primary.url}/{journal}", content=b"three again\n", timeout=30)
        assert resp.status_code in (204, 503), resp.text
        return resp if resp.status_code == 204 else None

    resp = testing.wait_until(appended, "appends accepted again")
    assert int(resp.headers["X-Commit-Begin"]) == head


def test_a_listing_past_the_spool_moves_the_primary_before_it_appends(cluster, tmp_path):
    journal = "greater/journal"
    urls = [b.url for b in cluster.values()]
    apply_specs(urls[0], dict(journal_spec(journal, compression_codec="NONE", refresh_interval="1s"),
                              replication=2))
    members = [member_key(m) for m in wait_for_route(urls[0], journal, 2)["members"]]
    primary, replica = cluster[members[0]], cluster[members[1]]
    resp = httpx.put(f"{primary.url}/{journal}", content=b"local\n", timeout=30)
    assert resp.status_code == 204, resp.text
    # Persisted content the spool never held (a restored backup, an earlier life of
    # the journal): the store now says the journal runs to 1000.
    restored = b"r" * 999 + b"\n"
    name = f"{0:016x}-{len(restored):016x}-{hashlib.sha1(restored).hexdigest()}.raw"
    (tmp_path / "store" / journal).mkdir(parents=True, exist_ok=True)
    (tmp_path / "store" / journal / name).write_bytes(restored)

    def listed() -> bool:
        doc = httpx.post(f"{primary.url}/v1/journals/fragments", json={"journal": journal}, timeout=10).json()
        return any(int(f["fragment"]["end"]) == len(restored) for f in doc["fragments"])

    testing.wait_until(listed, "the primary's listing of the restored fragment")
    resp = httpx.put(f"{primary.url}/{journal}", content=b"after\n", timeout=30)
    assert resp.status_code == 204, resp.text
    assert int(resp.headers["X-Commit-Begin"]) >= len(restored), "appended under persisted content"
    end = resp.headers["X-Commit-End"]
    for broker in (primary, replica):
        got = httpx.get(f"{broker.url}/{journal}", params={"offset": resp.headers["X-Commit-Begin"],
                                                            "block": "true", "end_offset": end}, timeout=30)
        assert got.content == b"after\n"
