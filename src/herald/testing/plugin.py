"""pytest plugin: real Herald processes as fixtures (load with ``-p herald.testing.plugin``)."""

from __future__ import annotations

import os

import pytest

from herald.testing.broker import BrokerProcess
from herald.testing.powercut import PowerCut
from herald.testing.s3 import moto_s3, seaweedfs, seaweedfs_factory  # noqa: F401 — S3 servers
from herald.testing.small_disk import small_disk  # noqa: F401 — a 2 MiB tmpfs to fill
from herald.testing.spark import spark  # noqa: F401 — session-wide Spark fixture
from herald.testing.spark_cluster import spark_cluster  # noqa: F401 — standalone master + workers


@pytest.fixture
def broker_factory(tmp_path):
    """Make brokers over chosen data dirs / fragment roots; all are killed at the end."""
    started: list[BrokerProcess] = []

    def make(data_dir=None, file_root=None, *args: str, **kw) -> BrokerProcess:
        proc = BrokerProcess(data_dir or tmp_path / f"data{len(started)}",
                             file_root or tmp_path / "fragments", *args, **kw)
        started.append(proc)
        return proc.start()

    yield make
    for proc in started:
        proc.kill()


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:
    """One embedded broker on a free loopback port, in a temp data dir."""
    return broker_factory()


@pytest.fixture
def powercut(tmp_path):
    """A file system that can lose power (`herald.testing.powercut`), mounted at
    ``tmp_path/mnt`` over the disk ``tmp_path/disk``; skips where FUSE is absent."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("/dev/fuse is absent: simulating power loss needs FUSE")
    fs = PowerCut(tmp_path / "mnt", tmp_path / "disk").start()
    yield fs
    fs.close()


@pytest.fixture(scope="session")
def etcd(tmp_path_factory):
    """A real single-member etcd (Debian's etcd-server) for the whole session."""
    from herald.testing.etcd import EtcdProcess

    proc = EtcdProcess(tmp_path_factory.mktemp("etcd")).start()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server (Debian's ``postgresql``) for the whole session."""
    from herald.testing.postgres import PostgresServer

    server = PostgresServer().start()
    yield server
    server.stop()
