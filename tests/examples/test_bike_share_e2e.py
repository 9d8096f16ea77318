"""bike-share end to end: the seed's load pipeline, then the Spark job killed with ``kill -9``
mid-batch twice, then paused mid-batch while another driver takes over its checkpoint.

Afterwards PostgreSQL holds exactly each bike's latest rides and the bad rows with their
offsets, the cycles journals hold exactly the planted cycles, each once, and the paused
(zombie) driver, resumed, was refused and wrote nothing."""

from __future__ import annotations

import logging
import random
import signal

import pytest

from herald.client import BrokerClient
from herald.examples.bike_share.generate import GenerateSettings, generate
from herald.examples.bike_share.specs import apply_journals
from herald.testing.processes import DriverProcess
from tests.examples.bike_share_helpers import (
    attach_uuids,
    busy_sessions,
    expected_history,
    load,
    published_cycles,
    record_at,
    start_driver,
    stored,
    wait_mid_batch,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(900)]
log = logging.getLogger(__name__)

HISTORY = 5
KILLS = 2  # issue 16: ride history exact after kill -9 mid-batch, twice (each driver start is a JVM)
RUN_DEADLINE_S = 400


def plant_bad_rows(path, rnd: random.Random) -> None:
    """Two records that parse as CSV but not as rides (a bike ID and a start time)."""
    lines = path.read_text().splitlines(keepends=True)
    template = lines[1].split(",")
    bad_bike = ",".join(template[:11] + ["x"] + template[12:])
    bad_time = ",".join(template[:1] + ['"yesterday"'] + template[2:])
    for bad in (bad_bike, bad_time):
        lines.insert(rnd.randrange(2, len(lines)), bad)
    path.write_text("".join(lines))


def pause_mid_batch(zombie: DriverProcess, checkpoint, dsn: str, after: int) -> int:
    """SIGSTOP the driver inside a rides batch, before that batch's transaction began."""
    while True:
        n = wait_mid_batch(checkpoint, after, zombie)
        zombie.signal(signal.SIGSTOP)
        ckpt = stored(dsn)["checkpoints"]
        if ckpt and ckpt[0][0] < n and busy_sessions(dsn) == 0:
            return n
        zombie.signal(signal.SIGCONT)  # inside (or past) its transaction: try the next batch
        after = n


def test_kill_9_twice_and_a_zombie_driver_leave_exact_rides_and_cycles(broker, bike_db, tmp_path):
    seed = random.randrange(1 << 30)
    rnd = random.Random(seed)
    log.info("bike-share e2e seed=%d", seed)
    with BrokerClient(broker.url, timeout_s=30) as client:
        apply_journals(client)
        raw = tmp_path / "rides.csv"
        planted = generate(raw, GenerateSettings(bikes=30, rides=600, cycles=3, seed=seed))
        plant_bad_rows(raw, rnd)
        with_uuids = tmp_path / "rides.with_uuids.csv"
        attach_uuids(raw, with_uuids)
        load(with_uuids, broker.url)

        checkpoint = tmp_path / "ckpt"
        args = ["--broker", broker.url, "--checkpoint", str(checkpoint), "--dsn", bike_db,
                "--history", str(HISTORY)]
        streaming = [*args, "--trigger", "1s", "--max-bytes-per-trigger", "12000"]
        drivers: list[DriverProcess] = []
        try:
            killed_at = -1
            for _ in range(KILLS):  # kill -9 mid-batch
                drivers.append(start_driver(streaming, tmp_path / f"driver{len(drivers)}.log"))
                killed_at = wait_mid_batch(checkpoint, killed_at, drivers[-1])
                drivers[-1].kill()
            zombie = start_driver(streaming, tmp_path / "zombie.log")
            drivers.append(zombie)
            paused_at = pause_mid_batch(zombie, checkpoint, bike_db, killed_at)
            successor = start_driver(args, tmp_path / "successor.log")  # available-now: to the end
            drivers.append(successor)
            assert successor.wait(RUN_DEADLINE_S) == 0, successor.log_tail()
            after_successor = stored(bike_db), published_cycles(client)
            zombie.signal(signal.SIGCONT)
            assert zombie.wait(RUN_DEADLINE_S) != 0, zombie.log_tail()
            # Refused by the store's fence (its rides batch resumes first), or by Spark when
            # its cycles query plans a batch the successor already wrote.
            refusal = zombie.log_path.read_text(errors="replace").lower()
            assert "fence" in refusal or "multiple streaming jobs" in refusal, zombie.log_tail()
            log.info("zombie refused by %s", "the fence" if "fence" in refusal else "Spark's offset log")
            assert (stored(bike_db), published_cycles(client)) == after_successor  # it wrote nothing
        finally:
            for started in drivers:
                started.kill_if_running()

        want_rides, bad_uuids = expected_history(with_uuids, HISTORY)
        got = stored(bike_db)
        assert got["rides"] == want_rides, (seed, len(got["rides"]), len(want_rides))
        assert got["checkpoints"][0][1] == KILLS + 2  # every driver opened the store: the successor's fence
        assert sorted(f for _, _, f in got["bad"]) == ["bikeid", "starttime"]
        assert {record_at(client, j, o).split(b",")[0].decode() for j, o, _ in got["bad"]} == set(bad_uuids)
        want_cycles = sorted((p.bike_id, p.station_ids) for p in planted)
        assert published_cycles(client) == want_cycles, seed
        log.info("paused at batch %d; %d rides kept, %d cycles", paused_at, len(want_rides), len(want_cycles))
