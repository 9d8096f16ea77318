"""`pwrite_each` (`herald.fragment.whole_writes`): every job written in full, each
one's errno, a failed job leaving the others written; the C extension's one call
and the Python loop used where it is not built give the same answers."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from herald.fragment.whole_writes import IOV_MAX, pwrite_each

SCRIPT = """
import json, os, sys
if sys.argv[1] == "python":
    sys.modules["herald.fragment._spool_native"] = None  # as if never built: importing it raises ImportError
from herald.fragment import whole_writes
assert (whole_writes._pwrite_each is None) == (sys.argv[1] == "python")
first, second = (os.open(path, os.O_RDWR | os.O_CREAT) for path in sys.argv[2:4])
bad = os.open(sys.argv[4], os.O_RDONLY | os.O_CREAT)
many = [bytes([i % 251]) * 3 for i in range(whole_writes.IOV_MAX + 5)]  # more than one pwritev
print(json.dumps(whole_writes.pwrite_each([(first, [b"head", memoryview(b"-tail")], 2), (bad, [b"x"], 0),
                                           (second, many, 0), (first, [], 100)])))
"""


@pytest.mark.parametrize("side", ["extension", "python"])
def test_each_job_is_written_whole_and_a_failed_one_stops_no_other(tmp_path, side):
    if side == "extension":
        pytest.importorskip("herald.fragment._spool_native", reason="the C extension is not built here")
    paths = [tmp_path / name for name in ("first", "second", "read-only")]
    out = subprocess.run([sys.executable, "-c", SCRIPT, side, *map(str, paths)], capture_output=True, text=True,
                         check=False, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"[0, {errno.EBADF}, 0, 0]"
    assert paths[0].read_bytes() == b"\0\0head-tail"
    assert paths[1].read_bytes() == b"".join(bytes([i % 251]) * 3 for i in range(IOV_MAX + 5))
    assert paths[2].read_bytes() == b""


def test_no_jobs_no_writes():
    assert pwrite_each([]) == []
