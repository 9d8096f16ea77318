"""Crash test [I-SINK-1] for word-count: publish a corpus, ``kill -9`` the job's
driver (its whole process group) twice mid-run, restart it; the query service's
counts then equal ``collections.Counter`` over everything published, exactly,
and every count update was published once (each bigram's totals only grow)."""

from __future__ import annotations

import logging
import random
import time
from collections import defaultdict
from pathlib import Path

import orjson
import pytest

from herald.client import BrokerClient, is_ack, read_committed
from herald.examples.word_count.documents import publish_documents, read_documents
from herald.examples.word_count.journals import COUNTS_SELECTOR, DOCS_SELECTOR, ensure_journals
from herald.testing import wait_until
from herald.testing.processes import DriverProcess
from tests.examples.word_count_helpers import QueryService, corpus_counter, corpus_files

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(900)]
log = logging.getLogger(__name__)

KILLS = 2
BATCH_LINE_DEADLINE_S = 240.0
FINAL_RUN_DEADLINE_S = 300.0


def _driver(args: list[str], log_path: Path) -> DriverProcess:
    return DriverProcess("herald.examples.word_count.cli", ["run", *args], log_path)


def _published_totals(client: BrokerClient) -> dict[str, list[int]]:
    """Every count update the job published (read-committed), per bigram, in order."""
    totals: dict[str, list[int]] = defaultdict(list)
    for info in client.list(COUNTS_SELECTOR):
        for env in read_committed(client, info.name):
            if not is_ack(env):
                doc = orjson.loads(env.value)
                totals[doc["bigram"]].append(doc["count"])
    return totals


def test_kill_9_of_the_word_count_driver_twice_leaves_counts_exact(broker, tmp_path):
    rnd = random.Random(seed := random.randrange(1 << 30))
    log.info("crash test seed=%d", seed)
    files = corpus_files()
    with BrokerClient(broker.url, timeout_s=30) as client:
        ensure_journals(client, 2)
        publish_documents(client, DOCS_SELECTOR, read_documents(files))
        args = ["--checkpoint", str(tmp_path / "ckpt"), "--broker", broker.url, "--partitions", "2"]
        drivers: list[DriverProcess] = []
        try:
            for _ in range(KILLS):
                # Small batches, so the kill lands with more of the stream to come.
                driver = _driver([*args, "--trigger", "1s", "--max-bytes-per-trigger", "3000"], tmp_path / "driver.log")
                drivers.append(driver)
                driver.wait_for_batch_line(BATCH_LINE_DEADLINE_S)
                time.sleep(rnd.uniform(0.0, 2.0))  # wait-ok: the random point of the crash.
                driver.kill()
                publish_documents(client, DOCS_SELECTOR, read_documents(files))  # Another copy, mid-stream.
            final = _driver([*args, "--trigger", "available-now"], tmp_path / "driver.log")  # The rest at once.
            drivers.append(final)
            assert final.wait(FINAL_RUN_DEADLINE_S) == 0, final.log_tail()
        finally:  # Never leave a driver (or its JVM) running after a failure.
            for driver in drivers:
                driver.kill_if_running()
        heads = {info.name: client.write_head(info.name) for info in client.list(COUNTS_SELECTOR)}
        totals = _published_totals(client)

    expected = corpus_counter(files, copies=KILLS + 1)
    repeated = {b: t for b, t in totals.items() if any(x >= y for x, y in zip(t, t[1:]))}
    assert not repeated, f"count updates published more than once (seed {seed}): {list(repeated.items())[:5]}"
    service = QueryService(broker.url).start()
    try:
        wait_until(lambda: all(service.read_through()[j] >= h for j, h in heads.items()), "the service to catch up")
        served = service.get("/api/bigrams", prefix="", limit="100000").json()
    finally:
        service.kill()
    assert not served["truncated"]
    got = {b["bigram"]: b["count"] for b in served["bigrams"]}
    missing = {k: v for k, v in expected.items() if got.get(k) != v}
    extra = {k: v for k, v in got.items() if k not in expected}
    assert not missing and not extra, (seed, list(missing.items())[:10], list(extra.items())[:10])
    assert got["the city"] == 5 * (KILLS + 1)
