"""Crash test [I-DEDUP-1] + [I-SINK-1]: ``kill -9`` the dedupe driver at random
points, restart it each time; the output holds every key exactly once."""

from __future__ import annotations

import logging
import random
import time

import orjson
import pytest

from herald.pipelines.audit import audit, committed_keys
from herald.pipelines.generate import GeneratorSettings, generate
from herald.testing.processes import DriverProcess

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(1200)]
log = logging.getLogger(__name__)

KILLS = 3  # each driver start costs ~60 s of CI time
FIRST_EVENTS = 4_000
BATCH_LINE_DEADLINE_S = 180.0
FINAL_RUN_DEADLINE_S = 600.0


def _driver(args: list[str], log_path) -> DriverProcess:
    return DriverProcess("herald.cli.pipelines", ["dedupe", *args], log_path)


def _resend(client, rnd: random.Random, n: int) -> None:
    """Retries of ``n`` random earlier events (same body), straddling the crashes."""
    keys = [k for k, _, _ in committed_keys(client, "prefix=events/", "messageId")]
    from herald.message import modulo_mapping

    names = [i.name for i in client.list("prefix=events/")]
    for key in rnd.sample(keys, n):
        body = orjson.dumps({"messageId": key, "anonymousId": "retry", "timestamp": "2017-06-26T14:38:23.264Z",
                             "type": "track"})
        client.append(modulo_mapping(key.encode(), names), body + b"\n")


def test_kill_9_of_the_dedupe_driver_loses_and_duplicates_nothing(broker, client, journals, tmp_path):
    seed = random.randrange(1 << 30)
    rnd = random.Random(seed)
    log.info("crash test seed=%d", seed)
    generate(client, "prefix=events/", GeneratorSettings(count=FIRST_EVENTS, dup_rate=0.02, retry_delay_s=1.0, seed=seed))
    args = ["--input", "prefix=events/", "--output", "prefix=deduped/", "--checkpoint", str(tmp_path / "ckpt"),
            "--broker", broker.url, "--max-bytes-per-trigger", "100000", "--partitions", "2"]
    drivers: list[DriverProcess] = []
    try:
        for i in range(KILLS):
            driver = _driver([*args, "--trigger", "1s"], tmp_path / "driver.log")
            drivers.append(driver)
            driver.wait_for_batch_line(BATCH_LINE_DEADLINE_S)
            time.sleep(rnd.uniform(0.0, 3.0))  # wait-ok: the random point of the crash.
            driver.kill()
            generate(client, "prefix=events/", GeneratorSettings(count=500, dup_rate=0.05, seed=seed + i + 1))
            _resend(client, rnd, 20)
        final = _driver([*args, "--trigger", "available-now"], tmp_path / "driver.log")
        drivers.append(final)
        assert final.wait(FINAL_RUN_DEADLINE_S) == 0, final.log_tail()
    finally:  # never leave a driver (or its JVM) running after a failure
        for driver in drivers:
            driver.kill_if_running()
    report = audit(client, "prefix=events/", "prefix=deduped/")
    assert report.ok, (seed, report)
    assert report.unique_keys == report.output_events == FIRST_EVENTS + KILLS * 500
