"""``herald.spark.register(spark)`` makes Spark's Python workers able to import Herald,
or fails at once naming the fix — run in a Spark session whose workers lack Herald."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from herald.testing import Producer, make_journals

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CHILD = Path(__file__).resolve().parent / "register_child.py"


def test_register_ships_herald_to_workers_that_lack_it_or_names_the_missing_dependency(broker, client):
    [journal] = make_journals(broker, "register/a")
    Producer(client).committed(journal, *[{"n": i} for i in range(5)])
    env = {k: v for k, v in os.environ.items() if k != "HERALD_TEST_HIDDEN_MODULES"}
    done = subprocess.run([sys.executable, str(CHILD), broker.url, journal], capture_output=True, text=True,
                          timeout=300, env=env, cwd=Path(__file__).resolve().parents[2])
    lines = {ln.split(":", 1)[0]: ln.split(":", 1)[1].strip() for ln in done.stdout.splitlines() if ":" in ln}
    assert done.returncode == 0, done.stderr[-2000:]
    assert lines["unregistered"] == "No module named 'herald'"  # the failure register prevents
    assert lines["missing dependency"].startswith("WorkersCannotImportError PYSPARK_PYTHON: Spark's Python "
                                                  "workers") and "cannot import 'orjson'" in lines["missing dependency"]
    assert "pip install 'herald[spark]'" in lines["missing dependency"]
    assert lines["registered"] == "5"
