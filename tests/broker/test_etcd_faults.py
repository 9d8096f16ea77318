"""Faults beyond kill -9 in cluster mode: a broker paused past its lease, an etcd
that goes away and comes back, an apply larger than one etcd transaction. Every
broker heals by itself (no supervisor), no acknowledged append is lost, and no
traceback reaches the log."""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest
from typer.testing import CliRunner

from herald.cli.main import app
from herald.testing import BrokerProcess, apply_specs, journal_spec, wait_until
from herald.testing.etcd import EtcdProcess

pytestmark = pytest.mark.slow
LEASE_S = 3
JOURNAL = "faults/journal"


def cluster_broker(tmp_path, etcd_url: str, prefix: str) -> BrokerProcess:
    return BrokerProcess(tmp_path / "data", tmp_path / "store", "--etcd", etcd_url, "--etcd.prefix", prefix,
                         "--etcd.lease", f"{LEASE_S}s").start()


def append(url: str, body: bytes) -> httpx.Response | None:
    try:
        return httpx.put(f"{url}/{JOURNAL}", content=body, timeout=30)
    except httpx.HTTPError:
        return None


def appended(url: str, body: bytes) -> bool:
    resp = append(url, body)
    return resp is not None and resp.status_code == 204


def read_all(url: str) -> bytes:
    resp = httpx.get(f"{url}/{JOURNAL}", params={"offset": 0}, timeout=10)
    return resp.content if resp.status_code == 206 else b""


def no_tracebacks(proc: BrokerProcess) -> bool:
    return not any("Traceback" in line for line in proc.stderr_lines)


def test_an_apply_larger_than_one_etcd_transaction_is_a_400_and_max_txn_size_splits_it(etcd, tmp_path):
    proc = cluster_broker(tmp_path, etcd.url, "/herald/test/txn-limit")
    try:
        specs = [journal_spec(f"many/j{i:03d}") for i in range(200)]
        resp = httpx.post(f"{proc.url}/v1/journals/apply", timeout=30,
                          json={"changes": [{"upsert": s, "expect_mod_revision": 0} for s in specs]})
        assert resp.status_code == 400 and "128" in resp.json()["message"]
        assert "--max-txn-size" in resp.json()["message"] and resp.json()["field"] == "changes"
        assert httpx.post(f"{proc.url}/v1/journals/list", json={}, timeout=10).json()["journals"] == []
        yaml_text = "".join(f"- name: many/j{i:03d}\n  replication: 1\n  fragment:\n    length: 1048576\n"
                            f"    compression_codec: SNAPPY\n    refresh_interval: 1m0s\n" for i in range(200))
        result = CliRunner().invoke(app, ["journals", "apply", "--max-txn-size", "100", "--broker", proc.url],
                                    input=yaml_text)
        assert result.exit_code == 0, (result.output, result.exception)
        assert len(httpx.post(f"{proc.url}/v1/journals/list", json={}, timeout=10).json()["journals"]) == 200
    finally:
        proc.kill()


def test_a_broker_paused_past_its_lease_rejoins_in_process(etcd, tmp_path):
    proc = cluster_broker(tmp_path, etcd.url, "/herald/test/paused")
    try:
        apply_specs(proc.url, journal_spec(JOURNAL))
        acked = [b"before pause\n"]
        wait_until(lambda: appended(proc.url, acked[0]), "the journal to take appends")
        os.kill(proc.proc.pid, signal.SIGSTOP)
        time.sleep(LEASE_S * 2)  # wait-ok: the fault is the pause itself, past the lease
        os.kill(proc.proc.pid, signal.SIGCONT)
        wait_until(lambda: appended(proc.url, b"after pause\n"), "appends after the broker re-joined", 60)
        acked.append(b"after pause\n")
        assert proc.proc.poll() is None, "the broker exited instead of re-joining"
        assert read_all(proc.url) == b"".join(acked)
        assert no_tracebacks(proc), "".join(proc.stderr_lines[-30:])
    finally:
        proc.kill()


def test_an_etcd_outage_stops_acknowledgements_then_heals_without_a_restart(tmp_path):
    etcd = EtcdProcess(tmp_path / "etcd").start()
    proc = cluster_broker(tmp_path, etcd.url, "/herald/test/outage")
    try:
        apply_specs(proc.url, journal_spec(JOURNAL))
        acked = []
        wait_until(lambda: appended(proc.url, b"0\n"), "the journal to take appends")
        acked.append(b"0\n")
        etcd.stop()  # kill -9
        killed_at = time.monotonic()
        n = 1

        def refused() -> bool:
            nonlocal n
            body = f"{n}\n".encode()
            if appended(proc.url, body):
                acked.append(body)
                n += 1
                return False
            return True
        wait_until(refused, "appends to be refused once the lease may have expired", 30)
        refused_after = time.monotonic() - killed_at
        committed = b"".join(acked)
        assert read_all(proc.url) == committed  # reads of what is committed go on
        etcd.start()  # same data dir and ports: etcd still holds the broker's lease, or not
        wait_until(lambda: appended(proc.url, b"healed\n"), "appends after etcd came back", 60)
        acked.append(b"healed\n")
        assert proc.proc.poll() is None
        assert read_all(proc.url) == b"".join(acked)
        assert refused_after < LEASE_S + 5  # acknowledgements stopped near the lease, not after a grace
        assert no_tracebacks(proc), "".join(proc.stderr_lines[-30:])
    finally:
        proc.kill()
        etcd.stop()
