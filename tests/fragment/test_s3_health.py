"""Store health checks against a real SeaweedFS that goes away and comes back."""

from __future__ import annotations

import asyncio

import pytest

from herald.fragment.health import PROBE_PREFIX, health_of, probe
from herald.fragment.stores import open_store
from herald.protocol.errors import HeraldError, Status


@pytest.fixture(autouse=True)
def aws_env(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "herald-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "herald-test-secret")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


def test_probe_leaves_nothing_behind(seaweedfs, tmp_path):
    store = open_store(seaweedfs.store_url("health-probe"), tmp_path)
    probe(store, "one")
    assert store.list(PROBE_PREFIX) == []


def test_file_store_is_healthy(tmp_path):
    async def main():
        health = health_of(open_store("file:///", tmp_path))
        await health.require_healthy(10)
        state = health.statistics()
        assert state.healthy and state.checked and state.consecutive_failures == 0
        await health.stop()

    asyncio.run(main())


def test_stopped_server_is_unhealthy_then_recovers_by_itself(seaweedfs_factory, tmp_path):
    """Never a cached permanent failure: the checker keeps probing and the same
    checker reports healthy again once the server is back on its port and data."""
    server = seaweedfs_factory()
    store = open_store(server.store_url("health"), tmp_path)

    async def main():
        health = health_of(store)
        await health.require_healthy(30)
        assert health_of(store) is health  # one checker per store

        server.stop()
        assert not (await health.check_now()).healthy
        with pytest.raises(HeraldError) as err:
            await health.require_healthy(3)
        assert err.value.status is Status.FRAGMENT_STORE_UNHEALTHY
        assert store.url in err.value.message and health.statistics().last_error in err.value.message
        assert not health.is_healthy and health.statistics().consecutive_failures >= 1

        recovery = asyncio.ensure_future(health.wait_recovery(60))
        await asyncio.get_running_loop().run_in_executor(None, server.start)
        assert await recovery
        await health.require_healthy(0)
        await health.stop()

    asyncio.run(main())
