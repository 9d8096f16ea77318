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
        resumed_at = time.monotonic()
        wait_until(lambda: appended(proc.url, b"after pause\n"), "appends after the broker re-joined", 60)
        print(f"figures: paused {2 * LEASE_S}s, re-joined and appending {time.monotonic() - resumed_at:.1f}s "
              "after SIGCONT")  # docs/reliability.md quotes these (-s)
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
        n, last_ack_after = 1, 0.0

        def refused() -> bool:
            nonlocal n, last_ack_after
            body = f"{n}\n".encode()
            if appended(proc.url, body):
                acked.append(body)
                n += 1
                last_ack_after = time.monotonic() - killed_at
                return False
            return True
        wait_until(refused, "appends to be refused once the lease may have expired", 30)
        refused_after = time.monotonic() - killed_at
        committed = b"".join(acked)
        assert read_all(proc.url) == committed  # reads of what is committed go on
        etcd.start()  # same data dir and ports: etcd still holds the broker's lease, or not
        restarted_at = time.monotonic()
        wait_until(lambda: appended(proc.url, b"healed\n"), "appends after etcd came back", 60)
        print(f"figures: etcd down {restarted_at - killed_at:.1f}s; {len(acked)} appends acknowledged, the last "
              f"{last_ack_after:.1f}s after etcd died, the first refused at {refused_after:.1f}s; appends again {time.monotonic() - restarted_at:.1f}s after "
              "etcd restarted")
        acked.append(b"healed\n")
        assert proc.proc.poll() is None
        assert read_all(proc.url) == b"".join(acked)
        # Acknowledgements stopped at the lease, not after a grace (the slack covers the
        # fsync and the response of a group checked just before the lease ran out).
        assert last_ack_after < LEASE_S + 3
        assert no_tracebacks(proc), "".join(proc.stderr_lines[-30:])
    finally:
        proc.kill()
        etcd.stop()


def test_a_zombie_primary_resumed_after_a_takeover_acknowledges_nothing_stale(etcd, tmp_path):
    """Gazette's guarantee: a primary paused for twice its lease, replaced, then sent
    appends the moment it resumes, acknowledges none that the current route lacks."""
    import threading

    from herald.client import BrokerClient
    from herald.testing import wait_for_route

    prefix = "/herald/test/zombie"
    brokers = [BrokerProcess(tmp_path / f"d{z}", tmp_path / "store", "--etcd", etcd.url, "--etcd.prefix", prefix,
                             "--zone", z, "--id", f"b{z}", "--etcd.lease", f"{LEASE_S}s").start() for z in "abc"]
    by_member = {f"{z}#b{z}": b for z, b in zip("abc", brokers)}
    try:
        apply_specs(brokers[0].url, dict(journal_spec(JOURNAL), replication=2))
        with BrokerClient(brokers[0].url) as client:
            route = wait_for_route(client, JOURNAL, 2)
        zombie = by_member[f"{route['members'][0]['zone']}#{route['members'][0]['suffix']}"]
        spare = next(b for b in brokers if b is not zombie)
        acked: list[tuple[int, bytes]] = []  # (begin offset, body) of every 204
        lock, stop = threading.Lock(), threading.Event()

        def put(url: str, body: bytes) -> None:
            resp = append(url, body)
            if resp is not None and resp.status_code == 204:
                with lock:
                    acked.append((int(resp.headers["X-Commit-Begin"]), body))

        def writer() -> None:
            n = 0
            while not stop.is_set():
                put(spare.url, f"spare {n}\n".encode())
                n += 1
        thread = threading.Thread(target=writer)
        thread.start()
        os.kill(zombie.proc.pid, signal.SIGSTOP)
        time.sleep(LEASE_S * 2 + 1)  # wait-ok: the fault is the pause itself, twice the lease
        with BrokerClient(spare.url) as client:
            wait_until(lambda: client.list(f"name={JOURNAL}")[0].route.get("primary") == 0
                       and route["members"][0] not in client.list(f"name={JOURNAL}")[0].route["members"],
                       "a new primary to take over")
        os.kill(zombie.proc.pid, signal.SIGCONT)
        direct = [threading.Thread(target=put, args=(zombie.url, f"zombie {i}\n".encode())) for i in range(8)]
        for t in direct:
            t.start()
        for t in direct:
            t.join()
        stop.set()
        thread.join()
        with BrokerClient(spare.url) as client:
            final = wait_for_route(client, JOURNAL, 2, deadline_s=60)
        members = [by_member[f"{m['zone']}#{m['suffix']}"] for m in final["members"]]
        head = max(begin + len(body) for begin, body in acked)
        contents = [httpx.get(f"{m.url}/{JOURNAL}", params={"block": "true", "end_offset": head},
                              headers={"X-Herald-Proxied": "1"}, timeout=60).content for m in members]
        for begin, body in acked:  # every acknowledged append, at its acknowledged offset
            assert contents[0][begin:begin + len(body)] == body
            assert contents[0].count(body) == 1
        assert contents[0] == contents[1]  # replicas byte-identical
        print(f"figures: {len(acked)} appends acknowledged "
              f"({sum(b.startswith(b'zombie') for _, b in acked)} of 8 sent to the resumed zombie), 0 lost")
        assert zombie.proc.poll() is None and no_tracebacks(zombie)
    finally:
        for b in brokers:
            b.kill()
