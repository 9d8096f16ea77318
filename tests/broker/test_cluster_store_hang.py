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
from herald.testing import apply_specs, journal_spec
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
