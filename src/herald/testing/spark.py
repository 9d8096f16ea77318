"""A session-wide local Spark for tests (one JVM for the whole pytest run).

``getOrCreate`` costs 5–11 s and a JVM ≈400 MB (spark-facts), so every Spark test
shares one session: ``local[2,3]`` (2 cores; a failed task is retried up to 3
times, which the sink's exactly-once tests rely on), no UI, 2 shuffle
partitions, workers running this interpreter, format ``herald`` registered.
"""

from __future__ import annotations

import os
import sys

import pytest

__all__ = ["make_spark_session", "spark"]


def make_spark_session(master: str = "local[2,3]", app_name: str = "herald-tests"):  # noqa: ANN201
    """A configured local SparkSession with format ``herald`` registered."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import herald.spark

    session = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.streaming.stopTimeout", "30s")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    herald.spark.register(session)
    return session


@pytest.fixture(scope="session")
def spark():
    """The shared SparkSession (stopped at the end of the test session)."""
    pytest.importorskip("pyspark")
    session = make_spark_session()
    yield session
    session.stop()
