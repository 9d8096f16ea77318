"""`herald.spark.bytecode.precompile`: bytecode for every module, rewritten when a
source changes, nothing where the package cannot be written."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from herald.spark.bytecode import precompile


def test_bytecode_is_written_and_follows_an_edited_source(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    mod = pkg / "sub" / "m.py"
    mod.write_text("VALUE = 1\n")
    assert precompile(pkg)
    pyc = importlib.util.cache_from_source(str(mod))
    assert os.path.exists(pyc)
    mod.write_text("VALUE = 22\n")
    os.utime(mod, (os.stat(pyc).st_mtime + 5,) * 2)  # a later edit, whatever the clock's resolution
    assert precompile(pkg)
    header = Path(pyc).read_bytes()[:16]  # what the interpreter checks before it uses a pyc
    assert header[:4] == importlib.util.MAGIC_NUMBER
    assert (int.from_bytes(header[8:12], "little"), int.from_bytes(header[12:16], "little")) == (
        int(os.stat(mod).st_mtime), os.stat(mod).st_size)
    # A process that writes no bytecode itself runs the edited source.
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([sys.executable, "-c", "import pkg.sub.m as m; print(m.VALUE)"],
                         env=env, capture_output=True, text=True, check=True).stdout.split()
    assert out == ["22"]


def test_a_package_directory_that_is_missing_is_left_alone(tmp_path):
    assert precompile(tmp_path / "absent") is False

