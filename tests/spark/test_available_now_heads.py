"""An availableNow run asks for write heads once, when it starts
(`StreamReader.prepareForTriggerAvailableNow` freezes them as its target): later
triggers list the journals (one round trip, no HEAD per journal) and read up to
the frozen heads, and once everything is read the closing checks ask the brokers
nothing. The driver-side reader is called directly against a real broker (plain
Python, no Spark session); requests are counted by the broker's own metrics."""

from __future__ import annotations

import re

import httpx
from pyspark.sql.streaming.datasource import ReadAllAvailable

from herald.spark.options import HeraldOptions
from herald.spark.source import StreamReader
from herald.testing import Producer, apply_specs, journal_spec, make_journals


def requests_by_op(url: str) -> dict[str, float]:
    """``herald_broker_requests_total`` summed per op (``read`` counts GETs and HEADs
    of journals, ``control`` the listings), leaving out ``meta``: this very request."""
    out: dict[str, float] = {}
    for op, n in re.findall(r'herald_broker_requests_total{op="(\w+)",status="\w+"} ([0-9.e+]+)',
                            httpx.get(f"{url}/metrics").text):
        if op != "meta":
            out[op] = out.get(op, 0.0) + float(n)
    return out


def _reader(broker, tmp_path) -> StreamReader:
    opts = {"broker": broker.url, "selector": "app=avail", "stateLocation": str(tmp_path / "state")}
    return StreamReader(HeraldOptions.parse(opts, streaming=True))


def test_an_available_now_run_reads_to_its_start_heads_with_no_head_per_trigger(broker, client, tmp_path):
    journals = make_journals(broker, "avail/a", "avail/b", "avail/c", labels={"app": "avail"})
    producer = Producer(client)
    for n, journal in enumerate(journals):
        producer.committed(journal, *[{"n": n * 10 + i} for i in range(n + 1)])
    heads = {j: client.write_head(j) for j in journals}

    reader = _reader(broker, tmp_path)
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    producer.committed(journals[0], {"n": 99})  # after the run began: not this run's
    before = requests_by_op(broker.url)
    end = reader.latestOffset(start, ReadAllAvailable())
    after = requests_by_op(broker.url)
    assert start == dict.fromkeys(journals, 0) and end == heads
    assert after.get("read", 0) == before.get("read", 0)  # no HEAD: the target is the run's heads
    assert after.get("control", 0) == before.get("control", 0) + 1  # one listing

    assert reader.latestOffset(end, ReadAllAvailable()) == end  # all read: the closing checks...
    assert requests_by_op(broker.url) == after  # ...ask nothing


def test_a_journal_that_leaves_the_selector_mid_run_keeps_its_offset(broker, client, tmp_path):
    journals = make_journals(broker, "avail2/a", "avail2/b", labels={"app": "avail"})
    producer = Producer(client)
    for journal in journals:
        producer.committed(journal, {"n": 1}, {"n": 2})
    reader = _reader(broker, tmp_path)
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    apply_specs(broker.url, journal_spec("avail2/b"))  # relabelled: no longer app=avail
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"avail2/a": client.write_head("avail2/a"), "avail2/b": 0}
