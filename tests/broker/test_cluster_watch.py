"""The broker's etcd mirror applies each etcd revision whole, and its watch resumes
exactly (real etcd; the mirror is `EtcdKeySpace`, the one brokers run).

One etcd transaction is one revision of several events. The mirror used to
advance its revision — waking observers (the resolver, the allocator) and
``wait_for_revision`` — at the first event of a revision, so they could read a
half-applied transaction; and a watch that broke between those events resumed at
``revision + 1``, losing the rest for good. A watch that came back after etcd had
compacted the history it asked for retried that revision for ever: the mirror, and
so every route the broker knew, froze.
"""

from __future__ import annotations

import asyncio

import aetcd
import httpx
import orjson
import pytest

from herald.keyspace.etcd import EtcdKeySpace
from herald.keyspace.routes import Assignment, Member, MemberId
from herald.protocol.journal import JournalSpec
from herald.testing import journal_spec
from herald.testing.etcd import EtcdProcess
from herald.testing.tcp import TcpProxy

pytestmark = pytest.mark.slow
KEYS = [f"items/watch/k{i}" for i in range(5)]


@pytest.fixture
def own_etcd(tmp_path):
    """An etcd of this test's own: compacting it must not touch other tests' history."""
    proc = EtcdProcess(tmp_path / "etcd").start()
    yield proc
    proc.stop()


async def _put_all(etcd_url: str, prefix: str, value: bytes, keys: list[str] = KEYS) -> int:
    """Write every key of ``keys`` in one transaction (one revision); its revision."""
    host, port = etcd_url.removeprefix("http://").split(":")
    async with aetcd.Client(host=host, port=int(port)) as client:
        tx = client.transactions
        ok, responses = await client.transaction(
            compare=[], success=[tx.put(f"{prefix}/{k}".encode(), value) for k in keys], failure=[])
        assert ok
        return responses[0].response_put.header.revision


def _mirrored(keyspace: EtcdKeySpace, value: bytes) -> list[str]:
    return [k for k in KEYS if (kv := keyspace._kv.get(keyspace._key(k))) is not None and kv.value == value]


def test_observers_and_revision_waiters_see_a_transaction_whole(etcd):
    async def run() -> None:
        keyspace = EtcdKeySpace(etcd.url, "/herald/test/watch-whole")
        await keyspace.start()
        seen: list[tuple[int, int]] = []
        keyspace.on_change(lambda rev: seen.append((rev, len(_mirrored(keyspace, b"v1")))))
        try:
            revision = await _put_all(etcd.url, keyspace.prefix, b"v1")
            await keyspace.wait_for_revision(revision)
            assert _mirrored(keyspace, b"v1") == KEYS
            assert seen == [(revision, len(KEYS))], "an observer saw a half-applied transaction"
        finally:
            await keyspace.close()
    asyncio.run(run())


def test_a_watch_broken_inside_a_revision_loses_none_of_it(etcd):
    """An observer failing at a revision's first event broke the watch there: the
    mirror resumed at the next revision without the rest of the transaction."""
    async def run() -> None:
        keyspace = EtcdKeySpace(etcd.url, "/herald/test/watch-broken")
        await keyspace.start()
        failed = asyncio.Event()

        def fail_once(_revision: int) -> None:
            if not failed.is_set():
                failed.set()
                raise RuntimeError("observer failed")
        keyspace.on_change(fail_once)
        try:
            revision = await _put_all(etcd.url, keyspace.prefix, b"v1")
            await failed.wait()
            marker = await _put_all(etcd.url, keyspace.prefix, b"v1", ["items/watch/marker"])
            await keyspace.wait_for_revision(marker)
            assert revision < marker
            assert _mirrored(keyspace, b"v1") == KEYS, "the rest of the broken revision was lost"
        finally:
            await keyspace.close()
    asyncio.run(run())


def _compact(etcd: EtcdProcess, revision: int) -> None:
    resp = httpx.post(f"{etcd.url}/v3/kv/compaction", json={"revision": str(revision), "physical": True},
                      timeout=10)
    assert resp.status_code == 200, resp.text


@pytest.mark.parametrize("compacted", [False, True], ids=["resumed", "compacted"])
def test_a_cut_watch_catches_up_with_the_transactions_it_missed(own_etcd, compacted, caplog):
    """Cut from etcd while a multi-key transaction lands, the mirror comes back to
    exactly etcd's state: by resuming at its revision + 1, or, when etcd compacted
    that history meanwhile, by reloading the prefix."""
    async def run(proxy: TcpProxy) -> None:
        keyspace = EtcdKeySpace(proxy.url, "/herald/test/watch-cut")
        await keyspace.start()
        await keyspace.wait_for_revision(await _put_all(own_etcd.url, keyspace.prefix, b"v1"))
        revisions: list[int] = []
        keyspace.on_change(revisions.append)
        try:
            proxy.cut()
            revision = await _put_all(own_etcd.url, keyspace.prefix, b"v2")
            marker = await _put_all(own_etcd.url, keyspace.prefix, b"m", ["items/watch/marker"])
            if compacted:  # past the revision the watch resumes from
                _compact(own_etcd, marker)
            proxy.restore()
            await keyspace.wait_for_revision(marker, timeout_s=30)
            assert _mirrored(keyspace, b"v2") == KEYS
            assert revisions == ([marker] if compacted else [revision, marker])
            assert "etcd watch broke" in caplog.text  # the cut did break the stream
        finally:
            await keyspace.close()
    _run_through_proxy(own_etcd, run)


def _run_through_proxy(etcd: EtcdProcess, run) -> None:
    """``asyncio.run(run(proxy))`` with a `TcpProxy` to ``etcd``, closed after."""
    proxy = TcpProxy(etcd.client_port)
    try:
        asyncio.run(run(proxy))
    finally:
        proxy.close()


def test_a_half_open_etcd_link_is_noticed_and_the_watch_resumes(own_etcd):
    """A link that goes silent without a reset (no FIN, no RST: a partition dropping
    packets) used to leave the watch waiting for ever, the mirror and every route
    stale; gRPC keepalive on the etcd channel notices it and the watch resumes on a
    fresh connection."""
    async def run(proxy: TcpProxy) -> None:
        keyspace = EtcdKeySpace(proxy.url, "/herald/test/watch-silent")
        await keyspace.start()
        await keyspace.wait_for_revision(await _put_all(own_etcd.url, keyspace.prefix, b"v1"))
        try:
            connections = proxy.accepted
            proxy.silence()
            revision = await _put_all(own_etcd.url, keyspace.prefix, b"v2")
            await keyspace.wait_for_revision(revision, timeout_s=60)
            assert _mirrored(keyspace, b"v2") == KEYS
            assert proxy.accepted > connections, "the mirror caught up without a new connection"
        finally:
            await keyspace.close()
    _run_through_proxy(own_etcd, run)


def test_routes_follow_each_revision_of_the_mirror(etcd):
    """Routes are computed from views built once per revision (a pass over 1,000
    journals x 3 replicas used to rescan the mirror per journal: 5 s on the loop);
    each new revision must drop them, or a broker would route by a stale peerset."""
    async def run() -> None:
        keyspace = EtcdKeySpace(etcd.url, "/herald/test/watch-routes")
        await keyspace.start()
        host, port = etcd.url.removeprefix("http://").split(":")
        ids = [MemberId.parse(f"zone-a/broker-{i}") for i in range(3)]
        slots = [Assignment("routes/j", m, slot, b"", 0, 0) for slot, m in enumerate(ids)]
        try:
            async with aetcd.Client(host=host, port=int(port)) as client:
                tx = client.transactions
                puts = [tx.put(keyspace.member_key(m).encode(), Member(m, f"http://127.0.0.1:{9000 + i}", 0).to_json())
                        for i, m in enumerate(ids)]
                puts += [tx.put(keyspace.assignment_key(a).encode(), b"") for a in slots]
                ok, responses = await client.transaction(compare=[], success=puts, failure=[])
                await keyspace.wait_for_revision(responses[0].response_put.header.revision)
                assert keyspace.route("routes/j").members == tuple(ids)
                assert keyspace.route("routes/j").primary == 0
                # The primary's assignment goes: no primary, two replicas left.
                ok, responses = await client.transaction(
                    compare=[], success=[tx.delete(keyspace.assignment_key(slots[0]).encode())], failure=[])
                assert ok and responses[0].response_delete_range.deleted == 1
                await keyspace.wait_for_revision(responses[0].response_delete_range.header.revision)
                route = keyspace.route("routes/j")
                assert route.members == tuple(ids[1:]) and route.primary == -1
                assert [a.member for a in keyspace.assignments()["routes/j"]] == ids[1:]
        finally:
            await keyspace.close()
    asyncio.run(run())


def test_specs_follow_each_update_and_recreation(etcd):
    """Specs are parsed once per version and reused by later passes: an update, a
    delete and a re-creation must each show, never the spec last parsed."""
    async def run() -> None:
        keyspace = EtcdKeySpace(etcd.url, "/herald/test/watch-specs")
        await keyspace.start()
        key = keyspace._key("items/specs/j").encode()
        host, port = etcd.url.removeprefix("http://").split(":")

        async def put(replication: int) -> None:
            spec = JournalSpec.from_dict({**journal_spec("specs/j"), "replication": replication})
            await keyspace.wait_for_revision(await _txn(client, [client.transactions.put(
                key, orjson.dumps(spec.to_dict()))]))

        try:
            async with aetcd.Client(host=host, port=int(port)) as client:
                await put(1)
                assert keyspace.entries()["specs/j"].spec.replication == 1
                await put(2)
                assert keyspace.entries()["specs/j"].spec.replication == 2
                assert keyspace.get("specs/j").spec.replication == 2
                await keyspace.wait_for_revision(await _txn(client, [client.transactions.delete(key)]))
                assert "specs/j" not in keyspace.entries() and keyspace.get("specs/j") is None
                await put(3)
                assert keyspace.entries()["specs/j"].spec.replication == 3
        finally:
            await keyspace.close()
    asyncio.run(run())


async def _txn(client: aetcd.Client, ops: list) -> int:
    ok, responses = await client.transaction(compare=[], success=ops, failure=[])
    assert ok
    response = responses[0]
    return (response.response_put if response.HasField("response_put") else response.response_delete_range).header.revision
