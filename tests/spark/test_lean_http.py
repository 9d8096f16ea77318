"""A stream query's source runner loads neither httpx nor trio for an ``http://``
broker (`herald.client.plain`), and `herald.spark.datasource.lean_http` imports
httpcore without trio (58-71 ms of a fresh process) while httpx clients still work."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from herald.testing import apply_specs, journal_spec

RUNNER = """
import json, sys
from herald.spark.datasource import HeraldDataSource
reader = HeraldDataSource({"broker": sys.argv[1], "selector": "", "stateLocation": sys.argv[2]}).streamReader(None)
reader.prepareForTriggerAvailableNow()
start = reader.initialOffset()
parts = reader.partitions(start, start)
print(json.dumps({"offsets": start, "loaded": sorted(m for m in ("httpx", "httpcore", "trio") if m in sys.modules)}))
"""

LEAN = """
import json, sys
{before}
from herald.client import BrokerClient
from herald.spark.datasource import lean_http
lean_http()
import httpcore._synchronization as sync
names = [i.name for i in BrokerClient(sys.argv[1]).list()]
loaded = "trio" in sys.modules
import trio  # still importable by whoever wants it
print(json.dumps({{"trio_in_httpcore": sync.trio is not None, "loaded": loaded, "names": names}}))
"""


def _child(code: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.splitlines()[-1])


needs_trio = pytest.mark.skipif(importlib.util.find_spec("trio") is None, reason="trio is not installed")


def test_a_source_runner_of_a_plain_broker_loads_no_httpx(broker, client, tmp_path):
    apply_specs(broker.url, journal_spec("lean/a"))
    client.append("lean/a", b'{"Msg": "hi"}\n')
    got = _child(RUNNER, broker.url, str(tmp_path))
    assert got == {"offsets": {"lean/a": 0}, "loaded": []}


@needs_trio
def test_lean_http_loads_httpcore_without_trio_and_clients_work(broker, client):
    apply_specs(broker.url, journal_spec("lean/b"))
    got = _child(LEAN.format(before=""), broker.url)
    assert got == {"trio_in_httpcore": False, "loaded": False, "names": ["lean/b"]}


@needs_trio
def test_a_process_that_loaded_trio_keeps_it_for_httpcore(broker):
    got = _child(LEAN.format(before="import trio"), broker.url)
    assert got["trio_in_httpcore"] is True
