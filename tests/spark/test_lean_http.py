"""`herald.spark.datasource.lean_http`: Spark's processes import httpcore without
trio (58-71 ms of a stream query's source runner), and their clients still work."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from herald.testing import apply_specs, journal_spec

CHILD = """
import json, sys
{before}
from herald.spark.datasource import HeraldDataSource
reader = HeraldDataSource({{"broker": sys.argv[1], "selector": "", "stateLocation": sys.argv[2]}}).streamReader(None)
import httpcore._synchronization as sync
loaded = "trio" in sys.modules
offsets = reader.initialOffset()
import trio  # still importable by whoever wants it
print(json.dumps({{"trio_in_httpcore": sync.trio is not None, "loaded": loaded, "offsets": offsets}}))
"""


def _child(broker_url: str, state: str, before: str = "") -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", CHILD.format(before=before), broker_url, state],
                         env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])


needs_trio = pytest.mark.skipif(importlib.util.find_spec("trio") is None, reason="trio is not installed")


@needs_trio
def test_a_source_runner_loads_no_trio_and_its_client_works(broker, client, tmp_path):
    apply_specs(broker.url, journal_spec("lean/a"))
    client.append("lean/a", b'{"Msg": "hi"}\n')
    got = _child(broker.url, str(tmp_path))
    assert got["trio_in_httpcore"] is False
    assert got["loaded"] is False
    assert got["offsets"] == {"lean/a": 0}


@needs_trio
def test_a_process_that_loaded_trio_keeps_it_for_httpcore(broker, tmp_path):
    got = _child(broker.url, str(tmp_path), before="import trio")
    assert got["trio_in_httpcore"] is True
