"""Child process of test_register.py: a Spark session of its own whose Python workers
cannot import Herald (``hidden_herald_python.py``). Prints one line per outcome."""

import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKER_PYTHON = Path(tempfile.mkdtemp(prefix="herald-test-")) / "python"
WORKER_PYTHON.write_text(f'#!/bin/sh\nexec {sys.executable} {HERE / "hidden_herald_python.py"} "$@"\n')
WORKER_PYTHON.chmod(0o755)
os.environ["PYSPARK_PYTHON"] = str(WORKER_PYTHON)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark.sql import SparkSession  # noqa: E402

import herald.spark  # noqa: E402
from herald.spark.source import HeraldDataSource  # noqa: E402

url, journal = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.memory", "512m").getOrCreate())
spark.sparkContext.setLogLevel("OFF")


def count() -> str:
    try:
        return str(spark.read.format("herald").option("broker", url).option("selector", f"name={journal}")
                   .load().count())
    except Exception as err:  # noqa: BLE001 — the outcome is what the test checks
        return "No module named 'herald'" if "No module named 'herald'" in str(err) else str(err)[-300:]


spark.dataSource.register(HeraldDataSource)  # what users did before: no shipping
print("unregistered:", count(), flush=True)
os.environ["HERALD_TEST_HIDDEN_MODULES"] = "orjson"
try:
    herald.spark.register(spark)
except Exception as err:  # noqa: BLE001
    print("missing dependency:", type(err).__name__, err, flush=True)
os.environ["HERALD_TEST_HIDDEN_MODULES"] = ""
herald.spark.register(spark)
print("registered:", count(), flush=True)
spark.stop()
