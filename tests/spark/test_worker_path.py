"""`herald.spark.register` starts Spark's Python processes with a stream source
runner's Spark files directory already on their path (`herald.spark.workers.preset_files_path`),
so PySpark's ``setup_spark_files`` finds the path unchanged and does not make
every zipimporter re-read ``pyspark.zip`` (0.2-0.4 s of a stream's source runner
start-up)."""

from __future__ import annotations

import os

import pytest

from herald.spark.workers import STREAM_JOB_DIR, preset_files_path

pytestmark = pytest.mark.spark


def _probe(_rows):
    import os
    import sys

    yield os.environ.get("PYTHONPATH", ""), list(sys.path)


def test_python_workers_start_with_the_stream_runners_files_directory_on_their_path(spark):
    root = spark.sparkContext._jvm.org.apache.spark.SparkFiles.getRootDirectory()
    [(env_path, sys_path)] = spark.sparkContext.parallelize([0], 1).mapPartitions(_probe).collect()
    stream_dir = os.path.join(root, STREAM_JOB_DIR)
    # A source runner's own directory is there from the start: its setup_spark_files
    # changes nothing. The root is left to PySpark (preset, it slowed batch reads).
    assert stream_dir in env_path.split(os.pathsep)
    assert root not in env_path.split(os.pathsep)
    assert sys_path.count(root) == 1


def test_presetting_twice_adds_nothing_and_keeps_the_users_entries(spark):
    context = spark.sparkContext
    before = context.environment.get("PYTHONPATH", "")
    try:
        context.environment["PYTHONPATH"] = os.pathsep.join(["/user/lib", before])
        assert preset_files_path(spark) == []
        assert context.environment["PYTHONPATH"].split(os.pathsep)[0] == "/user/lib"
    finally:
        context.environment["PYTHONPATH"] = before
