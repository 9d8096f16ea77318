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

import socket
import threading

import httpx
import pytest

from herald.allocator.solver import solve
from herald.keyspace.routes import Member, MemberId
from herald.testing import apply_specs, journal_spec
from tests.broker.test_cluster import LEASE, _append_until_accepted, member_key, wait_for_route

pytestmark = pytest.mark.slow

S3_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
          "AWS_EC2_METADATA_DISABLED": "true"}


class HeldStore:
    """A TCP endpoint that takes a store's requests and answers none until
    `release`; from then on it answers each with 403 (an error no client retries).
    A broker listing a journal's store there is held inside `Journal.open` for as
    long as the test needs. `connected` is set at the first request."""

    DENIED = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.connected, self._released = threading.Event(), threading.Event()
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed at the end of the test
                return
            with self._lock:
                if self._released.is_set():
                    self._deny(conn)
                else:
                    self._held.append(conn)
            self.connected.set()

    def _deny(self, conn: socket.socket) -> None:
        try:
            conn.sendall(self.DENIED)
        except OSError:
            pass
        conn.close()

    def release(self) -> None:
        with self._lock:
            self._released.set()
            for conn in self._held:
                self._deny(conn)
            self._held.clear()

    def close(self) -> None:
        self.release()
        self._listener.close()


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
