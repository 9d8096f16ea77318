"""Crash test of stream-sum in cluster mode [I-SINK-1]: while chunkers publish and
verify, ``kill -9`` the summer's driver (its whole process group), a broker and
etcd, in a loop, restarting each; every file's correct sum arrives exactly once."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import orjson
import pytest

from herald.client import BrokerClient
from herald.client.committed import read_committed, read_uncommitted
from herald.examples.stream_sum.chunker import ChunkerSettings
from herald.examples.stream_sum.journals import create_journals
from herald.examples.stream_sum.run import run_chunkers
from herald.examples.stream_sum.verify import Verifier
from herald.message import NDJSONFraming
from herald.testing import BrokerProcess, wait_for_route
from herald.testing.etcd import EtcdProcess
from herald.testing.processes import DriverProcess

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(1800)]

LEASE = "3s"
KILLS = ("broker", "driver", "etcd", "broker")  # each driver start costs ~60 s of CI time
# A deadline against a hang, not a timing assertion: a sum may wait for a driver's
# restart, which takes minutes on a machine shared with other Spark jobs. The
# figure to quote is the p99 the test prints.
SUM_TIMEOUT_S = 600.0
BATCH_DEADLINE_S = 300.0


def _summer(broker: str, checkpoint: Path, log_path: Path) -> DriverProcess:
    return DriverProcess("herald.examples.stream_sum.cli", ["summer", "--broker", broker, "--checkpoint",
                                                            str(checkpoint), "--trigger", "0.5s"], log_path,
                         checkpoint=checkpoint)


def _wait_for_batch(summer: DriverProcess, lines: list[str], brokers: list[BrokerProcess]) -> None:
    """The summer's next batch line; a timeout also says what the chunkers and the
    brokers last said (the summer's own state is in the driver's message)."""
    try:
        summer.wait_for_batch_line(BATCH_DEADLINE_S)
    except AssertionError as err:
        said = "\n".join(f"{b.url}: {line.rstrip()}" for b in brokers for line in b.stderr_lines[-15:])
        raise AssertionError(f"{err}\n--- chunkers said\n" + "\n".join(lines[-20:]) +
                             f"\n--- brokers said\n{said}") from None


def _evidence(client: BrokerClient, file_ids: set[str]) -> str:
    """Every copy of the failing files' chunks, raw and read-committed, with offsets and UUIDs."""
    out = []
    for info in client.list("prefix=stream-sum/"):
        for how, envs in (("raw", read_uncommitted(client, info.name, NDJSONFraming())),
                          ("committed", read_committed(client, info.name))):
            for env in envs:
                doc = orjson.loads(env.value) if env.value.startswith(b"{") else {}
                if doc.get("id") in file_ids:
                    doc.pop("data", None)
                    out.append(f"{how} {info.name}@{env.begin} uuid={env.uuid.hex() if env.uuid else None} {doc}")
    return "\n".join(out)


def _cluster(tmp_path: Path, etcd: EtcdProcess) -> list[BrokerProcess]:
    return [BrokerProcess(tmp_path / f"data-{z}", tmp_path / "store", "--etcd", etcd.url, "--etcd.prefix",
                          "/herald/test/stream-sum", "--zone", z, "--id", f"b{z}", "--etcd.lease", LEASE).start()
            for z in "abc"]


def test_kill_9_of_summer_broker_and_etcd_loses_and_repeats_no_sum(tmp_path):
    rnd = random.Random()
    etcd = EtcdProcess(tmp_path / "etcd").start()
    brokers = _cluster(tmp_path, etcd)
    entry = brokers[0]  # the clients' broker; the others are the ones killed
    summers: list[DriverProcess] = []
    try:
        with BrokerClient(entry.url, timeout_s=30) as client:
            for name in create_journals(entry.url, chunk_partitions=2, replication=2):
                wait_for_route(client, name, 2, deadline_s=60)
            summers.append(_summer(entry.url, tmp_path / "ckpt", tmp_path / "summer.log"))
            verifiers: list[Verifier] = []
            stop, lines, result = threading.Event(), [], []
            settings = ChunkerSettings(files=3, duration_s=3600, rate=5, max_chunks=5, max_chunk_bytes=256)
            chunkers = threading.Thread(target=lambda: result.append(run_chunkers(
                client, 2, settings, SUM_TIMEOUT_S, report=lines.append, verifier_ready=verifiers.append,
                stop=stop)))
            chunkers.start()
            _wait_for_batch(summers[-1], lines, brokers)  # the warm-up file's
            survived = 0
            for i, victim in enumerate(KILLS):
                time.sleep(rnd.uniform(1.0, 4.0))  # wait-ok: the random point of the crash.
                if victim == "driver":
                    summers[-1].kill()
                    summers.append(_summer(entry.url, tmp_path / "ckpt", tmp_path / "summer.log"))
                    _wait_for_batch(summers[-1], lines, brokers)
                elif victim == "broker":
                    brokers[1 + i % 2].restart()
                else:
                    etcd.stop()
                    time.sleep(1.0)  # wait-ok: the outage itself, shorter than the brokers' lease
                    etcd.start()
                survived += 1
            stop.set()
            chunkers.join(SUM_TIMEOUT_S + 120)
            assert not chunkers.is_alive(), "the chunkers did not finish"
            figures = result[0]
            print(f"figures: stream-sum crash test: files verified {figures.files_verified}, kills survived "
                  f"{survived} ({', '.join(KILLS)}), time-to-sum p50 {figures.p50_s:.2f}s p99 {figures.p99_s:.2f}s, "
                  f"violations {len(figures.violations)}")
            if figures.violations:  # the evidence, before the temp dirs go
                print("\n".join(figures.violations))
                print(_evidence(client, {v.split(":")[0] for v in figures.violations}))
        assert figures.violations == (), (figures, lines[-20:], summers[-1].log_tail(40))
        assert figures.files_verified == figures.files_ended > 20
    finally:
        for summer in summers:
            summer.kill()
        for broker in brokers:
            broker.kill()
        etcd.stop()
