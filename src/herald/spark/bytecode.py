"""Herald's bytecode written beside its sources, so the Python processes Spark starts load it, not compile it.

Spark starts a fresh Python process for every streaming query's source runner
(and sink runner), and forks workers that import Herald on their first task.
Python compiles a module from source whenever its ``__pycache__`` holds no
up-to-date ``.pyc``, and writes none back when ``PYTHONDONTWRITEBYTECODE`` is set
(as in our sessions and many containers) or the tree is only ever imported by
such processes: then every one of them compiles Herald again. Measured here:
importing ``herald.spark.source`` after the runner's own imports took 92-112 ms
of CPU from source, 49-56 ms from bytecode — ≈ 45 ms of each query's start-up
(`pyspark_zip` does the same for PySpark's own zip).

`precompile` runs on the driver at ``herald.spark.register``: it writes the
``.pyc`` of every module whose cached one is missing or stale (timestamp-checked,
exactly as the interpreter checks it, so an edited source is never run stale),
and does nothing where the package is not writable (an installed package has its
bytecode from pip). A few ms when everything is fresh.
"""

from __future__ import annotations

import compileall
import logging
import os
from pathlib import Path

__all__ = ["precompile"]

log = logging.getLogger(__name__)


def precompile(root: Path | None = None) -> bool:
    """Write missing or stale bytecode of the package at ``root`` (Herald's by
    default); False if the directory is not writable or a module failed to compile."""
    root = root or Path(__file__).resolve().parents[1]
    if not os.access(root, os.W_OK):
        return False
    try:
        return bool(compileall.compile_dir(root, quiet=2, workers=1))
    except OSError as err:  # a read-only subtree, a full disk: the processes compile as before
        log.debug("herald bytecode not written under %s: %s", root, err)
        return False
