"""Every Spark query starts fresh Python processes (the source runner, the sink's
commit runner, the workers) and each imports Herald: what they import must be
what they use. Each check runs in a fresh interpreter and reads ``sys.modules``
(issue 15; docs/spark.md, "what a stream query pays outside its batches")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

#: Never needed to plan, read or commit a Spark stream: read offload loads the
#: fragment stores on a fragment's first read, the rest belongs to the broker and CLI.
NOT_IN_SPARK_PROCESSES = ("herald.fragment", "fsspec", "crc32c", "zstandard", "asyncio", "herald.broker",
                          "herald.cli", "typer", "rich", "click", "pygments", "prometheus_client",
                          "hypothesis", "yaml")


def _modules_after(statement: str) -> set[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    return set(json.loads(out.stdout))


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m in names or m.startswith(tuple(f"{n}." for n in names)))


@pytest.mark.parametrize("module", ["herald.spark.source", "herald.spark.sink", "herald.spark.sink_tasks",
                                    "herald.spark.reading"])
def test_spark_process_modules_import_no_stores_broker_or_cli(module):
    loaded = _loaded(_modules_after(f"import {module}"), NOT_IN_SPARK_PROCESSES)
    assert not loaded, f"{module} imports {loaded}"


def test_the_stream_source_runner_loads_no_pandas_or_read_side_modules():
    """A stream query's source runner is a fresh process that only plans: importing
    its reader and building its client load neither pandas (pyarrow loads it on its
    first conversion of a Python value: 0.17-0.33 s) nor what only ``read`` needs."""
    modules = _modules_after("import herald.spark.source\nfrom herald.client import BrokerClient\n"
                             "BrokerClient('http://127.0.0.1:1').close()")
    assert not _loaded(modules, ("pandas", "pyarrow.compute", "pyarrow.json", "herald.spark.keys",
                                 "herald.spark.fields"))


def test_the_broker_client_alone_imports_no_publisher_sequencer_or_stores():
    modules = _modules_after("from herald.client import BrokerClient")
    assert not _loaded(modules, ("numpy", "herald.message", "herald.client.publisher", "herald.client.retry")
                       + NOT_IN_SPARK_PROCESSES)


def test_package_imports_load_nothing_until_a_name_is_used():
    modules = _modules_after("import herald, herald.client")
    assert not _loaded(modules, ("httpx._client", "numpy", "herald.message", "herald.client.broker"))


@pytest.mark.parametrize("package", ["herald", "herald.client"])
def test_every_public_name_resolves(package):
    code = (f"import json, {package} as p\n"
            f"exec('from {package} import ' + ', '.join(p.__all__))\n"
            "assert sorted(dir(p)) == sorted(p.__all__)\n"
            "print(json.dumps({n: getattr(p, n).__module__ for n in p.__all__ if n != '__version__'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    defined_in = json.loads(out.stdout)
    assert defined_in and all(m.startswith("herald.") for m in defined_in.values())


def test_an_unknown_name_is_an_attribute_error():
    import herald.client

    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        herald.client.NoSuchName  # noqa: B018 - the lookup is the test


def test_the_sink_commit_side_imports_no_numpy_or_pyarrow():
    """The sink's commit runners unpickle the data source and its writer and append
    ACK intents: the data source, its options and the sink's commit side load
    neither numpy nor pyarrow (the task side, `herald.spark.sink_tasks`, does)."""
    modules = _modules_after("import herald.spark.datasource, herald.spark.sink, herald.spark.options")
    assert not _loaded(modules, ("numpy", "pyarrow", "pandas", "herald.spark.sink_tasks", "herald.spark.source",
                                 "herald.message.publisher", "herald.message.sequencer") + NOT_IN_SPARK_PROCESSES)


def test_a_pickled_data_source_unpickles_without_its_readers():
    """What Spark ships to each of its Python processes: the data source instance."""
    import pickle

    from herald.spark.datasource import HeraldDataSource

    data = pickle.dumps(HeraldDataSource({"broker": "http://127.0.0.1:1"}))
    modules = _modules_after(f"import pickle\npickle.loads({data!r})")
    assert "herald.spark.datasource" in modules
    assert not _loaded(modules, ("numpy", "pyarrow", "herald.spark.source", "herald.spark.sink_tasks"))
