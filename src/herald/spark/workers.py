"""Making Herald importable by Spark's Python workers (`herald.spark.register`).

Spark runs a data source's code in Python worker processes — planner workers next
to the driver and task workers on executors — that unpickle ``herald.spark.source``
by module name. A worker whose interpreter cannot import ``herald`` fails deep in a
task with ``No module named 'herald'``. `ensure_importable` prevents that:

- in local mode it asks the workers' interpreter (``PYSPARK_PYTHON``) itself, in a
  subprocess, whether ``herald.spark.source`` imports; if only ``herald`` is
  missing, it ships this process's Herald as a zip (``SparkContext.addPyFile``) and
  checks again; a missing dependency (``orjson``, ``pyarrow`` …) is an error at once,
  naming the module and the fix;
- on a cluster (any other master) it ships the zip: what the remote interpreters
  have cannot be asked from here, and a shipped copy also keeps driver and workers
  on the same Herald. Dependencies there are the cluster's to install.

The zip must be added *before* the data source is registered: Spark captures the
Python includes of a data source when it is registered, and its environment, where
`preset_files_path` puts the Spark files directories so that each fresh Python
process Spark starts for a query skips re-reading ``pyspark.zip``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from herald.protocol.errors import HeraldError, Status

__all__ = ["WorkersCannotImportError", "ensure_importable", "package_zip", "preset_files_path"]

log = logging.getLogger(__name__)

PROBE = "import herald.spark.source"
PROBE_TIMEOUT_S = 60.0
_zips: dict[Path, Path] = {}
#: The job artifact directory (under Spark's files root) that Spark 4's
#: ``PythonStreamingSourceRunner`` hands a stream's source runner.
STREAM_JOB_DIR = "streaming_job"
#: (worker Python, PYTHONPATH) already seen importing Herald unaided: a pipeline
#: registers the format for every query it starts, and each probe is a fresh
#: interpreter importing PySpark (≈0.6 s CPU, seconds on a busy machine).
_imports_plainly: set[tuple[str, str]] = set()


class WorkersCannotImportError(HeraldError):
    """Spark's Python workers cannot import what Herald needs; the message says what to install."""

    def __init__(self, python: str, missing: str) -> None:
        super().__init__(Status.INVALID_ARGUMENT,
                         f"Spark's Python workers ({python}) cannot import {missing!r}, which Herald needs: "
                         f"install it there (`{python} -m pip install 'herald[spark]'`), or point "
                         "PYSPARK_PYTHON at an interpreter that has Herald's dependencies", "PYSPARK_PYTHON")


def package_zip() -> Path:
    """This process's ``herald`` package as a zip of its ``.py`` files (built once)."""
    root = Path(__file__).resolve().parents[1]
    if root not in _zips or not _zips[root].exists():
        fd, name = tempfile.mkstemp(prefix="herald-", suffix=".zip")
        os.close(fd)
        with zipfile.ZipFile(name, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(root.rglob("*.py")):
                zf.write(path, path.relative_to(root.parent).as_posix())
        _zips[root] = Path(name)
    return _zips[root]


def _missing_module(python: str, extra_path: Path | None) -> str | None:
    """The module ``python`` cannot import for `PROBE` (None: it imports)."""
    env = dict(os.environ)
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(extra_path), env.get("PYTHONPATH", "")) if p)
    try:
        done = subprocess.run([python, "-c", PROBE], env=env, capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S)
    except OSError as err:
        raise HeraldError(Status.INVALID_ARGUMENT, f"cannot run Spark's worker Python {python!r} ({err}); "
                          "set PYSPARK_PYTHON to an interpreter", "PYSPARK_PYTHON") from None
    if done.returncode == 0:
        return None
    for line in reversed(done.stderr.splitlines()):
        if "No module named" in line:
            return line.split("No module named", 1)[1].strip(" '\"")
    raise HeraldError(Status.INVALID_ARGUMENT, f"Spark's worker Python {python!r} fails to import Herald: "
                      f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}",
                      "PYSPARK_PYTHON")


def _ship(spark: Any) -> None:
    path = package_zip()
    spark.sparkContext.addPyFile(str(path))
    log.info("shipped %s to Spark's Python workers", path)


def ensure_importable(spark: Any, ship: bool | None = None) -> bool:
    """Make ``herald`` importable by ``spark``'s Python workers (driver side, blocks
    up to a few seconds in local mode). ``ship``: True always ships the zip, False
    never does, None decides as the module docstring says. Returns whether it
    shipped; raises `WorkersCannotImportError` naming a missing dependency."""
    context = spark.sparkContext
    python = context.pythonExec or "python3"
    local = str(context.master or "").startswith("local")
    if ship is None and not local:
        ship = True
    if ship is None:
        probe_key = (python, os.environ.get("PYTHONPATH", ""))
        if probe_key in _imports_plainly:
            return False
        missing = _missing_module(python, None)
        if missing is None:
            _imports_plainly.add(probe_key)
            return False
        if missing.split(".")[0] != "herald":
            raise WorkersCannotImportError(python, missing)
        missing = _missing_module(python, package_zip())
        if missing is not None:
            raise WorkersCannotImportError(python, missing)
        ship = True
    if ship:
        _ship(spark)
    return bool(ship)


def preset_files_path(spark: Any) -> list[str]:
    """Put the Spark files directories PySpark's processes on the driver get (and
    the Python includes in them, e.g. a shipped Herald zip) on the ``PYTHONPATH``
    of the processes Spark starts for functions registered from now on; returns
    the entries added.

    Why: each such process (a stream's fresh source runner, once per query; a
    task worker's first task) runs PySpark's ``setup_spark_files``, which adds
    its directory to ``sys.path`` and, the path having changed, calls
    ``importlib.invalidate_caches()``. On Python 3.11 that makes every
    zipimporter in the cache — one per PySpark package imported from
    ``pyspark.zip``, 17 by then — re-read the zip's directory (~2,800 entries, in
    pure Python): 0.2-0.4 s of a source runner's 0.6-0.9 s start-up, measured
    here, on a stream's critical path before its first batch. A directory already
    on the path changes nothing, and nothing is re-read. The directory is
    Spark's files root, or under it the job's artifact directory: a source
    runner's is `STREAM_JOB_DIR`. Only processes that get the driver's
    directories benefit (all in local mode; a cluster's executors have their
    own); the entries are harmless elsewhere.

    Only a source runner's directory is preset, not the files root that task
    workers add: with the root preset too, the batch read fell from 1.58-1.63 M
    to 1.34-1.45 M rows/s (bench spark --quick, 3 pairs, load ~2), while
    presetting the stream job's directory alone kept the stream's gain (738 k ->
    772 k rows/s, local[2]/local[1] 1.10 -> 1.19) and the batch read (1.58 M
    both)."""
    context = spark.sparkContext
    root = context._jvm.org.apache.spark.SparkFiles.getRootDirectory()
    wanted = [path for base in (os.path.join(root, STREAM_JOB_DIR),)
              for path in (base, *(os.path.join(base, name) for name in context._python_includes))]
    parts = [p for p in context.environment.get("PYTHONPATH", "").split(os.pathsep) if p]
    added = [p for p in wanted if p not in parts]
    if added:
        context.environment["PYTHONPATH"] = os.pathsep.join(parts + added)
    return added
