"""A tiny real file system to run out of: a 2 MiB tmpfs, and filling it.

Tests of a full disk (a 503 that writes nothing, zeros made ahead that must not take
the last bytes) need ENOSPC from the kernel itself, not a stand-in. Mounting needs
root: the fixture skips, saying why, where the mount is refused.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["SMALL_DISK_BYTES", "fill_disk", "small_disk"]

SMALL_DISK_BYTES = 2 << 20


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A `SMALL_DISK_BYTES` tmpfs, unmounted at the end; skipped where mounting is refused."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SMALL_DISK_BYTES}", "tmpfs", str(mount_point)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {result.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=True)


def fill_disk(disk: Path, leave: int = 0) -> Path:
    """Write a ballast file under ``disk`` until it is full, then cut ``leave`` bytes
    off it so that that much room is left; returns the ballast."""
    ballast = disk / "ballast"
    with open(ballast, "wb") as f:
        try:
            while True:
                f.write(b"\0" * (64 << 10))
                f.flush()
        except OSError as err:
            assert err.errno == errno.ENOSPC, err
    if leave:
        os.truncate(ballast, ballast.stat().st_size - leave)
    return ballast
