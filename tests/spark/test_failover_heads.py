"""A stream's driver rides out a fail-over: while a journal has no primary, the
source's write heads are retried (`herald.spark.offsets.selected_heads`), not a
failed query. Real etcd and brokers; the allocator leader is paused so a journal
applied meanwhile has no primary (no Spark session needed: the driver-side reader
is plain Python)."""

from __future__ import annotations

import os
import re
import signal
import threading

import httpx
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from herald.spark.options import HeraldOptions
from herald.spark.source import StreamReader
from herald.testing import apply_specs, journal_spec, wait_until


def refusals(url: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    found = re.findall(r'herald_broker_requests_total{op="\w+",status="(?:NO_JOURNAL_PRIMARY_BROKER|'
                       r'INSUFFICIENT_JOURNAL_BROKERS)"} ([0-9.e+]+)', text)
    return sum(float(n) for n in found)


@pytest.mark.slow
def test_write_heads_are_retried_while_a_journal_has_no_primary(etcd, broker_factory, tmp_path, request):
    prefix = f"/herald/test/{request.node.name}"
    args = ("--etcd", etcd.url, "--etcd.prefix", prefix, "--etcd.lease", "20s")
    leader = broker_factory(tmp_path / "a", tmp_path / "store", *args, "--zone", "a", "--id", "leader")
    other = broker_factory(tmp_path / "b", tmp_path / "store", *args, "--zone", "b", "--id", "other")
    apply_specs(other.url, journal_spec("heads/warm"))
    reader = StreamReader(HeraldOptions.parse({"broker": other.url, "selector": "prefix=heads/",
                                               "stateLocation": str(tmp_path / "state")}, streaming=True))
    wait_until(lambda: reader.latestOffset({}, ReadAllAvailable()) == {"heads/warm": 0}, "the warm journal served")

    os.killpg(leader.proc.pid, signal.SIGSTOP)
    outcome: dict = {}
    try:
        apply_specs(other.url, journal_spec("heads/late"))
        before = refusals(other.url)

        def plan() -> None:
            try:
                outcome["end"] = reader.latestOffset({}, ReadAllAvailable())
            except Exception as err:  # noqa: BLE001 - the test reports it
                outcome["error"] = err

        planner = threading.Thread(target=plan, daemon=True)
        planner.start()
        wait_until(lambda: "error" in outcome or refusals(other.url) >= before + 2,
                   "the driver retrying a journal without a primary")
        assert "error" not in outcome, outcome
    finally:
        os.killpg(leader.proc.pid, signal.SIGCONT)
    planner.join(90)
    assert outcome == {"end": {"heads/warm": 0, "heads/late": 0}}
