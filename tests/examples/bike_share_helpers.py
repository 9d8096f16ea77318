"""Helpers of the bike-share end-to-end tests: the documented load pipeline, a driver
process group to kill or pause, and what the job's outputs should hold."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import psycopg

from herald.client import BrokerClient
from herald.client.committed import is_ack, read_committed
from herald.examples.bike_share.job import CYCLES_SELECTOR, RIDES_SELECTOR
from herald.examples.bike_share.rides import BadRowError, parse_ride
from herald.testing import wait_until
from herald.testing.processes import DriverProcess

HERALD = [sys.executable, "-m", "herald.cli.main"]


def attach_uuids(csv_path: Path, out: Path) -> None:
    """``tail -n +2 rides.csv | herald attach-uuids --format csv > out`` (the seed's advice:
    UUIDs into a file first, so a failed load can be re-run without new messages)."""
    pipeline = f"tail -n +2 {csv_path} | {' '.join(HERALD)} attach-uuids --format csv > {out}"
    subprocess.run(["bash", "-o", "pipefail", "-c", pipeline], check=True)


def load(with_uuids: Path, broker_url: str) -> None:
    """The seed's pipeline: ``awk -F , '{print $13}{print}' | herald journals append --mapping modulo``."""
    pipeline = (f"awk -F , '{{print $13}}{{print}}' {with_uuids} | {' '.join(HERALD)} journals append "
                f"--broker {broker_url} -l {RIDES_SELECTOR} --framing lines --mapping modulo")
    subprocess.run(["bash", "-o", "pipefail", "-c", pipeline], check=True)


def expected_history(with_uuids: Path, history: int) -> tuple[set[str], list[str]]:
    """UUIDs of each bike's ``history`` latest rides, and the UUIDs of bad rows."""
    by_bike: dict[int, list] = defaultdict(list)
    bad = []
    with open(with_uuids, newline="") as f:
        for row in csv.reader(f):
            try:
                ride = parse_ride(row)
            except BadRowError:
                bad.append(row[0])
                continue
            by_bike[ride.bike_id].append((ride.start_time, ride.uuid))
    return {u for rides in by_bike.values() for _, u in sorted(rides)[-history:]}, bad


def stored(dsn: str) -> dict:
    with psycopg.connect(dsn) as conn:
        return {"rides": {r[0] for r in conn.execute("SELECT uuid::text FROM rides")},
                "bad": sorted(conn.execute('SELECT journal, "offset", field FROM bad_rides').fetchall()),
                "checkpoints": conn.execute("SELECT batch_id, fence FROM herald_checkpoints").fetchall()}


def published_cycles(client: BrokerClient) -> list[tuple[int, tuple[int, ...]]]:
    """Every committed cycle message: (bike, station ids), read-committed."""
    out = []
    for info in client.list(CYCLES_SELECTOR):
        for env in read_committed(client, info.name):
            if not is_ack(env):
                doc = json.loads(env.value)
                out.append((doc["BikeID"], tuple(step["StationID"] for step in doc["Steps"])))
    return sorted(out)


def record_at(client: BrokerClient, journal: str, offset: int) -> bytes:
    data = b"".join(chunk for _, chunk in client.read(journal, offset))
    return data.split(b"\n", 1)[0]


def start_driver(args: list[str], log_path: Path) -> DriverProcess:
    """``python -m herald.examples.bike_share.cli run …`` in its own process group, so
    ``kill -9`` (or SIGSTOP) takes the JVM and the Python workers with it."""
    return DriverProcess("herald.examples.bike_share.cli", ["run", *args], log_path)


def pending_batch(checkpoint: Path) -> int:
    """The rides query's batch that is planned (offsets/N) but not committed, else -1."""
    def numbers(sub: str) -> set[int]:
        d = checkpoint / "rides" / sub
        return {int(p.name) for p in d.iterdir() if p.name.isdigit()} if d.is_dir() else set()
    pending = numbers("offsets") - numbers("commits")
    return max(pending) if pending else -1


def wait_mid_batch(checkpoint: Path, after: int, driver: DriverProcess, deadline_s: float = 240) -> int:
    """Wait until the driver, its fence taken, is inside a rides batch numbered above ``after``."""
    def inside() -> int | None:
        if driver.proc.poll() is not None:
            raise AssertionError(f"driver exited ({driver.proc.returncode}):\n{driver.log_tail()}")
        n = pending_batch(checkpoint)
        return n if n > after and "rides store:" in driver.log_path.read_text(errors="replace") else None
    return wait_until(inside, f"a rides batch above {after}", deadline_s)


def busy_sessions(dsn: str) -> int:
    """Other sessions inside a statement or a transaction (a paused one would hold row locks)."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND "
                           "backend_type = 'client backend' AND state <> 'idle'").fetchone()
    return int(row[0]) if row else 0


__all__ = ["attach_uuids", "busy_sessions", "expected_history", "load", "pending_batch",
           "published_cycles", "record_at", "start_driver", "stored", "wait_mid_batch"]
