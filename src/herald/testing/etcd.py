"""A real etcd for tests: Debian's ``etcd`` binary on free loopback ports, in a temp dir."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

READY_DEADLINE_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EtcdProcess:
    """One etcd member (alone, or one of an ``EtcdCluster``); ``url`` is its client URL."""

    def __init__(self, data_dir: Path, name: str = "t"):
        self.data_dir = Path(data_dir)
        self.name = name
        self.client_port, self.peer_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.client_port}"
        self.peer_url = f"http://127.0.0.1:{self.peer_port}"
        self.proc: subprocess.Popen | None = None

    def start(self, initial_cluster: str | None = None, wait: bool = True) -> EtcdProcess:
        binary = shutil.which("etcd")
        if binary is None:
            raise RuntimeError("etcd is not installed (make test installs Debian's etcd-server)")
        self.proc = subprocess.Popen(
            [binary, "--name", self.name, "--data-dir", str(self.data_dir),
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url,
             "--initial-cluster", initial_cluster or f"{self.name}={self.peer_url}",
             "--initial-cluster-state", "new", "--log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        if wait:
            self._await_healthy()
        return self

    def status(self) -> dict:
        """etcd's maintenance status (member id, leader id) via its JSON gateway."""
        return httpx.post(f"{self.url}/v3/maintenance/status", json={}, timeout=5).json()

    def _await_healthy(self) -> None:
        """Poll /health until etcd answers (its start has no ready line to wait on)."""
        deadline = time.monotonic() + READY_DEADLINE_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited: {self.proc.stderr.read().decode()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).json().get("health") == "true":
                    return
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.1)  # wait-ok: etcd offers no readiness event to block on
        raise RuntimeError("etcd did not become healthy within 30 s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


class EtcdCluster:
    """A three-member etcd cluster on loopback (for losing a leader)."""

    def __init__(self, data_dir: Path, size: int = 3):
        self.members = [EtcdProcess(Path(data_dir) / f"m{i}", f"m{i}") for i in range(size)]

    def start(self) -> EtcdCluster:
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        for member in self.members:
            member.start(initial, wait=False)
        for member in self.members:
            member._await_healthy()
        return self

    def leader(self) -> EtcdProcess:
        for member in self.members:
            if member.proc and member.proc.poll() is None:
                status = member.status()
                for candidate in self.members:
                    if candidate.proc.poll() is None and candidate.status()["header"]["member_id"] == status["leader"]:
                        return candidate
        raise RuntimeError("no etcd leader")

    def stop(self) -> None:
        for member in self.members:
            member.stop()
