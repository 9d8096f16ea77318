"""A fragment store that accepts connections and never answers delays no other
journal (real broker on real etcd; the store is a real TCP server that holds every
request, `HeldStore`).

A broker opening a journal lists its store; the open waited inside that listing (an
S3 endpoint that hangs: 60 s read timeout, retried), and the resolver pass that
opens journals waited for every open, so every other journal's role change on the
broker — a new journal, a fail-over to it — waited too. Now an open waits for its
listing a bounded time, the journal is then served "unlisted": appends are refused
with FRAGMENT_STORE_UNHEALTHY naming the store (a primary must not append before it
knows the persisted head, gazette-facts §8.2), so are reads the index cannot place,
and the listing is retried with back-off.
"""

from __future__ import annotations

import subprocess
import threading
import time

import httpx
import pytest

from herald.client.transient import Backoff
from herald.fragment.health import APPEND_WAIT_S
from herald.testing import apply_specs, journal_spec
from herald.testing.tcp import TcpProxy
from tests.broker.test_cluster import _append_until_accepted, listed_route, member_key, wait_for_route
from tests.broker.test_cluster_resolver import S3_ENV, held_store  # noqa: F401 — the fixture

pytestmark = pytest.mark.slow
LEASE_S = 10


def test_a_hanging_store_delays_no_other_journal_on_the_broker(etcd, broker_factory, tmp_path, request,
                                                               held_store):  # noqa: F811
    broker = broker_factory(tmp_path / "data", tmp_path / "store", "--etcd", etcd.url,
                            "--etcd.prefix", f"/herald/test/{request.node.name}",
                            "--etcd.lease", f"{LEASE_S}s", env=S3_ENV)
    hung = journal_spec("hang/a", stores=[f"s3://bucket/?endpoint={held_store.url}&region=us-east-1"])
    # The apply returns once the broker served the journal; on a broker held by the
    # store it never would, so it runs beside the test.
    applied_a = threading.Thread(target=_apply_quietly, args=(broker.url, hung), daemon=True)
    applied_a.start()
    assert held_store.connected.wait(30), "the broker never listed the held store"

    # Journal B, on the same broker, is writable within the lease time.
    deadline = time.monotonic() + LEASE_S
    try:
        apply_specs_within(broker.url, journal_spec("hang/b"), LEASE_S)
        resp = _append_until(f"{broker.url}/hang/b", b"not held\n", deadline)
    except httpx.TimeoutException as err:
        raise AssertionError(f"journal B waited on journal A's store: {err!r}") from None
    assert resp.status_code == 204, f"journal B not writable within {LEASE_S}s: {resp.text}"

    # Journal A is served, and refuses appends and reads saying why (never hangs).
    resp = httpx.put(f"{broker.url}/hang/a", content=b"x\n", timeout=LEASE_S)
    assert resp.status_code == 503, resp.text
    assert resp.json()["status"] == "FRAGMENT_STORE_UNHEALTHY"
    assert held_store.url in resp.json()["message"] and "not been listed" in resp.json()["message"]
    read = httpx.get(f"{broker.url}/hang/a", params={"offset": 0}, timeout=LEASE_S)
    assert read.status_code == 503 and held_store.url in read.json()["message"], read.text
    applied_a.join(LEASE_S)
    assert not applied_a.is_alive(), "the apply of the held journal never returned"

    # A listing still held by the store keeps no broker from stopping (and so from
    # restarting): its thread is abandoned, not joined at exit.
    stopping = time.monotonic()
    try:
        code = broker.terminate(timeout_s=LEASE_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the broker did not stop within {LEASE_S}s of SIGTERM: a held listing "
                             "kept it running") from None
    assert code == 0 and time.monotonic() - stopping < LEASE_S


def _apply_quietly(url: str, spec: dict) -> None:
    try:
        apply_specs(url, spec)
    except httpx.HTTPError:
        pass  # on a broker held by the store (the bug): the test fails on journal B


def apply_specs_within(url: str, spec: dict, timeout_s: float) -> None:
    resp = httpx.post(f"{url}/v1/journals/apply", timeout=timeout_s,
                      json={"changes": [{"upsert": spec, "expect_mod_revision": -1}]})
    resp.raise_for_status()


def _append_until(url: str, content: bytes, deadline: float) -> httpx.Response:
    """PUT until acknowledged or ``deadline`` (monotonic) passes, with the clients' back-off."""
    backoff = Backoff()
    while True:
        resp = httpx.put(url, content=content, timeout=max(deadline - time.monotonic(), 0.1))
        if resp.status_code == 204 or time.monotonic() > deadline:
            return resp
        backoff.wait()


FAILOVER = "hang/failover"


def test_fail_over_to_a_primary_whose_store_hangs(etcd, broker_factory, tmp_path, request, moto_s3):
    """The primary is killed (kill -9) while the journal's store accepts connections
    and never answers (S3 behind a proxy that holds every request). Its replica takes
    over within the lease, and — as Gazette's append preconditions say (gazette-facts
    §8.2: the first remote index refresh and first-store health) — refuses appends
    with FRAGMENT_STORE_UNHEALTHY naming the store, each within APPEND_WAIT_S, never
    hanging on it; once the store answers again it takes appends, and every
    acknowledged byte reads back [I-APPEND-3]."""
    proxy = TcpProxy(moto_s3.port)
    request.addfinalizer(proxy.close)
    brokers = {f"{zone}#b{zone}": broker_factory(
        tmp_path / f"data-{zone}", tmp_path / "files", "--etcd", etcd.url,
        "--etcd.prefix", f"/herald/test/{request.node.name}", "--zone", zone, "--id", f"b{zone}",
        "--etcd.lease", f"{LEASE_S}s", env=moto_s3.env) for zone in "abc"}
    url = next(iter(brokers.values())).url
    store = moto_s3.store_url(request.node.name).replace(moto_s3.endpoint, proxy.url)
    apply_specs(url, dict(journal_spec(FAILOVER, stores=[store], length=1024), replication=2))
    route = wait_for_route(url, FAILOVER, 2)
    primary = brokers[member_key(route["members"][0])]
    survivor = brokers[member_key(route["members"][1])]
    before = [b"%04d %s\n" % (i, b"x" * 600) for i in range(4)]  # rolls: fragments reach the store
    for body in before:
        _append_until_accepted(f"{survivor.url}/{FAILOVER}", body)

    proxy.hold()
    primary.kill()
    killed = time.monotonic()
    _wait_for_primary(survivor.url, killed + 3 * LEASE_S)
    asked = time.monotonic()
    refused = httpx.put(f"{survivor.url}/{FAILOVER}", content=b"refused\n", timeout=3 * APPEND_WAIT_S)
    assert time.monotonic() - asked < 2 * APPEND_WAIT_S
    assert refused.status_code == 503, refused.text
    assert refused.json()["status"] == "FRAGMENT_STORE_UNHEALTHY" and proxy.url in refused.json()["message"]
    assert "first probe has had no answer" in refused.json()["message"], refused.text  # the store, not us

    proxy.restore()  # the store answers again: the new primary takes appends
    resp = _append_until_accepted(f"{survivor.url}/{FAILOVER}", b"after the fail-over\n", deadline_s=120)
    end = int(resp.headers["X-Commit-End"])
    read = httpx.get(f"{survivor.url}/{FAILOVER}", params={"offset": 0, "end_offset": end}, timeout=30)
    assert read.content == b"".join(before) + b"after the fail-over\n"


def _wait_for_primary(url: str, deadline: float) -> None:
    """Until the broker at ``url`` is the journal's primary (its lease-bound take-over)."""
    backoff = Backoff()
    while True:
        route = listed_route(url, FAILOVER)
        if route["primary"] >= 0 and route["endpoints"][route["primary"]] == url:
            return
        assert time.monotonic() < deadline, f"{url} never became primary: {route}"
        backoff.wait()
