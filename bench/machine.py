"""What machine a run was on: every figure is only comparable within one run."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["machine_info"]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return None


def _version(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None and not Path(cmd[0]).exists():
        return None
    try:
        out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else None


def _disk(path: Path) -> dict[str, Any]:
    try:
        out = subprocess.run(["df", "-T", str(path)], check=False, capture_output=True, text=True, timeout=10)
        fields = out.stdout.splitlines()[1].split()
        return {"device": fields[0], "fs": fields[1], "size_gib": round(int(fields[2]) / (1 << 20))}
    except (OSError, IndexError, ValueError, subprocess.TimeoutExpired):
        return {}


def machine_info(work_dir: Path | None = None) -> dict[str, Any]:
    """CPUs, memory, kernel, Python, the scratch disk and the peers' versions."""
    nats = Path(sys.executable).parent / "nats-server"
    return {
        "cpus": os.cpu_count(), "cpu_model": _cpu_model(), "mem_gib": _mem_gib(),
        "kernel": platform.release(), "python": platform.python_version(),
        "load_avg_1m": round(os.getloadavg()[0], 1),
        "disk": _disk(work_dir or Path("/tmp")),
        "versions": {
            "nats-server": _version([str(nats) if nats.exists() else "nats-server", "--version"]),
            "redis-server": _version(["redis-server", "--version"]),
            "wrk": _version(["wrk", "--version"]),
            "etcd": _version(["etcd", "--version"]),
            "java": _version(["java", "-version"]),
        },
    }
