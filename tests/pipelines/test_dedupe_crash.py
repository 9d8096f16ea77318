"""Crash test [I-DEDUP-1] + [I-SINK-1]: ``kill -9`` the dedupe driver at random
points, restart it each time; the output holds every key exactly once."""

from __future__ import annotations

import logging
import os
import queue
import random
import subprocess
import sys
import threading
import time

import orjson
import pytest

from herald.pipelines.audit import audit, committed_keys
from herald.pipelines.generate import GeneratorSettings, generate
from herald.testing.processes import kill_group

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(1200)]
log = logging.getLogger(__name__)

KILLS = 5
BATCH_LINE_DEADLINE_S = 180.0
FINAL_RUN_DEADLINE_S = 600.0


class Driver:
    """``python -m herald.cli.pipelines dedupe …`` in its own process group
    (so ``kill -9`` takes the JVM and Python workers with it)."""

    def __init__(self, args: list[str], log_path) -> None:
        self.log_path = log_path
        self.log = open(log_path, "ab")  # noqa: SIM115 — open as long as the driver runs.
        self.proc = subprocess.Popen([sys.executable, "-m", "herald.cli.pipelines", "dedupe", *args],
                                     stdout=subprocess.PIPE, stderr=self.log, start_new_session=True,
                                     env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        for raw in self.proc.stdout:
            self.log.write(raw)
            self.lines.put(raw.decode(errors="replace"))
        self.lines.put("")  # EOF

    def wait_for_batch_line(self, deadline_s: float) -> str:
        end = time.monotonic() + deadline_s
        while (left := end - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line.startswith("batch "):
                return line
            if line == "":
                raise AssertionError(f"driver exited ({self.proc.wait()}) before a batch:\n{self.log_tail()}")
        raise AssertionError(f"no batch line before the deadline:\n{self.log_tail()}")

    def log_tail(self, lines: int = 60) -> str:
        """The end of the driver's log, for a failure message."""
        self.log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def kill(self) -> None:
        """kill -9 the whole group, and return once none of it runs: the next driver
        must not meet the JVM of this one still holding the checkpoint's state."""
        kill_group(self.proc)

    def wait(self, deadline_s: float) -> int:
        return self.proc.wait(deadline_s)


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
    generate(client, "prefix=events/", GeneratorSettings(count=8_000, dup_rate=0.02, retry_delay_s=1.0, seed=seed))
    args = ["--input", "prefix=events/", "--output", "prefix=deduped/", "--checkpoint", str(tmp_path / "ckpt"),
            "--broker", broker.url, "--max-bytes-per-trigger", "100000", "--partitions", "2"]
    drivers: list[Driver] = []
    try:
        for i in range(KILLS):
            driver = Driver([*args, "--trigger", "1s"], tmp_path / "driver.log")
            drivers.append(driver)
            driver.wait_for_batch_line(BATCH_LINE_DEADLINE_S)
            time.sleep(rnd.uniform(0.0, 3.0))  # wait-ok: the random point of the crash.
            driver.kill()
            generate(client, "prefix=events/", GeneratorSettings(count=500, dup_rate=0.05, seed=seed + i + 1))
            _resend(client, rnd, 20)
        final = Driver([*args, "--trigger", "available-now"], tmp_path / "driver.log")
        drivers.append(final)
        assert final.wait(FINAL_RUN_DEADLINE_S) == 0, (tmp_path / "driver.log").read_text()[-3000:]
    finally:  # never leave a driver (or its JVM) running after a failure
        for driver in drivers:
            if driver.proc.poll() is None:
                driver.kill()
    report = audit(client, "prefix=events/", "prefix=deduped/")
    assert report.ok, (seed, report)
    assert report.unique_keys == report.output_events == 8_000 + KILLS * 500
