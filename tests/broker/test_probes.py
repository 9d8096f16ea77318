"""``/healthz`` and ``/readyz`` on real brokers: ready when serving, unready — with a
JSON reason — when the store fails or before the cluster's assignments settle, and
ready again by itself once the cause is gone. ``/metrics`` says the same."""

from __future__ import annotations

import os
import signal

import httpx
import pytest

from herald.testing import apply_specs, journal_spec, wait_until
from tests.broker.s3_helpers import WAIT_DEADLINE_S, put, record, s3_spec


def readyz(url: str) -> httpx.Response:
    return httpx.get(f"{url}/readyz", timeout=10)


def test_embedded_broker_is_live_and_ready_once_its_store_is_checked(broker):
    assert httpx.get(f"{broker.url}/healthz").json() == {"ok": True}
    apply_specs(broker.url, journal_spec("probes/a"))
    resp = wait_until(lambda: (r := readyz(broker.url)).status_code == 200 and r, "readyz 200")
    assert resp.json() == {"ready": True, "reasons": []}
    metrics = httpx.get(f"{broker.url}/metrics").text
    assert 'herald_broker_store_healthy{store="file:///"} 1.0' in metrics
    assert 'herald_broker_etcd_session{state="embedded"} 1.0' in metrics


def test_readyz_goes_unready_naming_the_failing_store_then_recovers(seaweedfs_factory, broker_factory, tmp_path):
    server = seaweedfs_factory()
    broker = broker_factory(tmp_path / "d1", None, env=server.env)
    apply_specs(broker.url, s3_spec(server, "probes/s3", "probes"))
    store = server.store_url("probes")
    with broker.client(timeout=60) as http:
        assert put(http, "probes/s3", record(0)).status_code == 204
        wait_until(lambda: readyz(broker.url).status_code == 200, "ready with the store up")

        server.stop()
        # Each append rolls the last spool, whose upload then fails: the store is
        # found unhealthy without waiting for the next scheduled probe.
        records = iter(range(1, 1000))

        def unready_or_append() -> httpx.Response | None:
            if (resp := readyz(broker.url)).status_code == 503:
                return resp
            put(http, "probes/s3", record(next(records)))
            return None
        unready = wait_until(unready_or_append, "readyz 503 while the store is down", WAIT_DEADLINE_S)
        reasons = unready.json()["reasons"]
        assert unready.json()["ready"] is False
        assert any(r["check"] == "stores" and store in r["message"] and "unhealthy" in r["message"]
                   for r in reasons), reasons
        assert f'herald_broker_store_healthy{{store="{store}"}} 0.0' in http.get("/metrics").text
        assert http.get("/healthz").status_code == 200  # alive all along: no restart wanted

        server.start()
        wait_until(lambda: readyz(broker.url).status_code == 200, "ready again once the store is back",
                   WAIT_DEADLINE_S)


@pytest.mark.slow
def test_cluster_broker_is_unready_until_the_allocator_assigns_its_journals(etcd, broker_factory, tmp_path, request):
    """The allocator leader (the oldest member) is paused, so a journal applied
    meanwhile has no primary: the other broker says so, then is ready once the
    leader resumes and assigns it."""
    prefix = f"/herald/test/{request.node.name}"
    args = ("--etcd", etcd.url, "--etcd.prefix", prefix, "--etcd.lease", "20s")
    leader = broker_factory(tmp_path / "a", tmp_path / "store", *args, "--zone", "a", "--id", "leader")
    other = broker_factory(tmp_path / "b", tmp_path / "store", *args, "--zone", "b", "--id", "other")
    apply_specs(other.url, journal_spec("probes/warmup"))
    wait_until(lambda: readyz(other.url).status_code == 200, "the cluster ready before the pause")
    assert 'herald_broker_etcd_session{state="valid"} 1.0' in httpx.get(f"{other.url}/metrics").text

    os.killpg(leader.proc.pid, signal.SIGSTOP)
    try:
        apply_specs(other.url, journal_spec("probes/late"))
        resp = readyz(other.url)
        assert resp.status_code == 503, resp.text
        assert any(r["check"] == "assignments" and "no primary" in r["message"] for r in resp.json()["reasons"])
        assert "probes/late" not in resp.text  # reasons count journals, never name them (probes are open)
    finally:
        os.killpg(leader.proc.pid, signal.SIGCONT)
    wait_until(lambda: readyz(other.url).status_code == 200, "ready once the leader assigned the journal")
