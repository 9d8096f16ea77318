"""`herald.spark.pyspark_zip`: PySpark's zip gains bytecode that Python really uses,
with tracebacks still naming the zip, and a second run changes nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from herald.spark.pyspark_zip import installed_zip, installed_zips, precompile

ZIP = installed_zip()
pytestmark = pytest.mark.skipif(ZIP is None, reason="this PySpark has no pyspark.zip")


@pytest.fixture
def zip_copy(tmp_path):
    """A pristine copy: the sources only, as pip installs it."""
    path = tmp_path / "pyspark.zip"
    with zipfile.ZipFile(ZIP) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            if not info.filename.endswith(".pyc"):
                out.writestr(info, src.read(info))
    return path


def _import_from(zip_path, code: str) -> str:
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(zip_path)!r}); {code}"],
                         capture_output=True, text=True, timeout=120)
    return out.stdout + out.stderr


def test_every_source_gains_bytecode_that_imports_use(zip_copy):
    sources = [n for n in zipfile.ZipFile(zip_copy).namelist() if n.endswith(".py")]
    assert precompile(zip_copy) == len(sources) > 100
    names = set(zipfile.ZipFile(zip_copy).namelist())
    assert all(n + "c" in names for n in sources)
    out = _import_from(zip_copy, "import pyspark.worker as w; print(w.__file__)")
    assert out.strip().endswith("pyspark.zip/pyspark/worker.pyc"), out


def test_a_traceback_names_the_zip_and_a_second_run_adds_nothing(zip_copy):
    precompile(zip_copy)
    before = zip_copy.read_bytes()
    assert precompile(zip_copy) == 0
    assert zip_copy.read_bytes() == before
    out = _import_from(zip_copy, "import pyspark.sql.types as t; t.StructType.fromJson({})")
    assert f"{zip_copy}/pyspark/sql/types.py" in out, out


def test_the_command_line_names_what_it_did(zip_copy):
    copy = zip_copy.with_name("other.zip")
    shutil.copy(zip_copy, copy)
    first = subprocess.run([sys.executable, "-m", "herald.spark.pyspark_zip", str(copy)],
                           capture_output=True, text=True, check=True).stdout
    again = subprocess.run([sys.executable, "-m", "herald.spark.pyspark_zip", str(copy)],
                           capture_output=True, text=True, check=True).stdout
    assert "modules precompiled" in first and "already precompiled" in again, (first, again)


def test_a_file_that_is_not_a_zip_is_one_error_line_and_left_alone(tmp_path):
    bogus = tmp_path / "pyspark.zip"
    bogus.write_bytes(b"not a zip at all")
    out = subprocess.run([sys.executable, "-m", "herald.spark.pyspark_zip", str(bogus)],
                         capture_output=True, text=True)
    assert out.returncode == 1 and out.stderr.startswith("error: pyspark.zip:") and "Traceback" not in out.stderr
    assert bogus.read_bytes() == b"not a zip at all"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyspark.zip"]  # no temp file left


def test_every_zip_spark_puts_on_the_path_is_covered():
    """Both of PySpark's zips (its own and py4j's) are found, and a copy of py4j's
    gains bytecode that its import uses."""
    names = [p.name for p in installed_zips()]
    assert "pyspark.zip" in names and any(n.startswith("py4j-") for n in names), names


def test_py4j_zip_gains_bytecode(tmp_path):
    py4j = next(p for p in installed_zips() if p.name.startswith("py4j-"))
    copy = tmp_path / py4j.name
    with zipfile.ZipFile(py4j) as src, zipfile.ZipFile(copy, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            if not info.filename.endswith(".pyc"):
                out.writestr(info, src.read(info))
    assert precompile(copy) > 0
    out = _import_from(copy, "import py4j.java_gateway as g; print(g.__file__)")
    assert out.strip().endswith("/py4j/java_gateway.pyc"), out
