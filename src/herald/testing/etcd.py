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
    """One single-member etcd cluster; ``url`` is its client URL."""

    def __init__(self, data_dir: Path):
        self.data_dir = Path(data_dir)
        self.client_port, self.peer_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.client_port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "EtcdProcess":
        binary = shutil.which("etcd")
        if binary is None:
            raise RuntimeError("etcd is not installed (make test installs Debian's etcd-server)")
        peer = f"http://127.0.0.1:{self.peer_port}"
        self.proc = subprocess.Popen(
            [binary, "--name", "t", "--data-dir", str(self.data_dir),
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"t={peer}", "--log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        self._await_healthy()
        return self

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
