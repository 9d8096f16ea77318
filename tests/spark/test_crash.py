"""kill -9 a journal → journal streaming query at random points, restart it, and
the output is exactly once for read-committed readers [I-SINK-1]."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from herald.testing import Producer, make_journals
from herald.testing.processes import kill_group
from tests.spark.spark_helpers import reference_committed

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]
CHILD = Path(__file__).with_name("crash_child.py")
COMMITS_BEFORE_KILL = (0, 1, 2)  # one killed run each; each driver start costs ~30 s of CI time


def _start(broker, ck, mode: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CHILD.parent), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, str(CHILD), broker.url, str(ck), "app=crash-in", "app=crash-out", mode],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True, env=env,
                            text=True)


def _commits(ck: Path) -> int:
    return sum(1 for p in (ck / "commits").glob("*") if p.name.isdigit())


def _wait_commits(ck: Path, at_least: int, deadline_s: float = 180) -> None:
    """Until the query committed ``at_least`` batches (watching its checkpoint)."""
    stop = time.monotonic() + deadline_s
    while _commits(ck) < at_least:
        assert time.monotonic() < stop, f"no progress to {at_least} batches in {deadline_s}s"
        time.sleep(0.1)  # wait-ok: polling the checkpoint dir with a deadline


def _publish_round(client, journals, start: int, count: int) -> list[int]:
    """Half committed messages, half in transactions (one rolled back)."""
    p, t, r = Producer(client), Producer(client), Producer(client)
    for i in range(start, start + count // 2):
        p.committed(journals[i % 2], {"n": i})
    t.uncommitted(journals[0], *[{"n": i} for i in range(start + count // 2, start + count)])
    [r_ack] = (r.uncommitted(journals[1], {"n": -1}), r.ack())[1]
    r.uncommitted(journals[1], *[{"n": -2} for _ in range(20)])  # Rolled back below.
    t.ack()
    client.append(journals[1], r_ack.data)
    return list(range(start, start + count)) + [-1]


def test_kill_9_at_random_points_still_yields_exactly_once(broker, client, tmp_path):
    inputs = make_journals(broker, "crash/in-0", "crash/in-1", labels={"app": "crash-in"}, length=1024)
    outputs = make_journals(broker, "crash/out-0", "crash/out-1", labels={"app": "crash-out"})
    ck, rnd, expected = tmp_path / "ck", random.Random(os.getpid()), []
    children: list[subprocess.Popen] = []
    try:
        expected += _publish_round(client, inputs, 0, 600)  # ~10 batches of 4000 bytes
        # Each run is killed at a different depth: before its first commit, after
        # one, after two (then at a random point: planning, mid-batch, mid-commit…).
        for round_, commits in enumerate(rnd.sample(COMMITS_BEFORE_KILL, len(COMMITS_BEFORE_KILL))):
            child = _start(broker, ck, "forever")
            children.append(child)
            assert child.stdout.readline().strip() == "started"  # Spark is up, the query running.
            _wait_commits(ck, _commits(ck) + commits)
            time.sleep(rnd.uniform(0, 1.5))  # wait-ok: a random point: planning, mid-batch, mid-commit...
            kill_group(child)  # and wait until none of its JVM runs: the next one takes its checkpoint
            expected += _publish_round(client, inputs, 10_000 * (round_ + 1), 300)
        assert _commits(ck) >= 3  # The killed runs made progress between kills.
        child = _start(broker, ck, "available-now")
        children.append(child)
        assert child.wait(300) == 0
    finally:  # never leave a driver (or its JVM) running after a failure
        for child in children:
            if child.poll() is None:
                kill_group(child)
    got = sorted(json.loads(v)["n"] for j in outputs for v in reference_committed(client, j))
    assert got == sorted(expected)
