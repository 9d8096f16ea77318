"""What a hung driver is doing, for the message of the test that waited on it.

A crash test that waits for a Spark driver's next line and times out has only the
driver's log, which says nothing when the driver hangs quietly (CI run of
session 8: five lines of Spark's banner, then 300 s of silence). `explain_group`
collects what a CI log alone needs to say where it hung:

- the Python stack of every Python process of the driver's group (``py-spy dump``:
  the driver's main thread, PySpark's daemon and workers, a stream's source and
  commit runners);
- the JVM threads that run the query (``jstack``, cut to the threads that matter:
  the stream's execution thread, task threads, the DAG scheduler);
- the streaming checkpoints below a directory: the batches planned (``offsets/``)
  and committed (``commits/``), and the sink's intent records.

Each part is bounded in time and in length, and a tool that is missing or fails
says so in one line: a diagnosis must never be the reason a test hangs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["checkpoint_state", "explain_group", "group_processes", "jvm_threads", "python_stacks"]

TOOL_TIMEOUT_S = 30.0
MAX_STACK_CHARS = 6000  # per process: a CI log stays readable
#: JVM threads that show where a streaming query is: its micro-batch loop, task
#: threads (a Python worker's reader or writer), the scheduler handing out tasks,
#: and any thread inside streaming or Python-runner code.
JVM_THREADS = re.compile(r'^"(stream execution thread|Executor task launch worker|dag-scheduler-event-loop)')
JVM_FRAMES = ("org.apache.spark.sql.execution.streaming", "org.apache.spark.sql.execution.python",
              "org.apache.spark.api.python.PythonRunner")


def group_processes(pgid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every live process of group ``pgid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid or fields[0] == "Z":
                continue
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):  # it exited while we looked
            continue
        found.append((int(stat.parent.name), cmdline.strip()))
    return sorted(found)


def _tool(name: str) -> str | None:
    """``name`` beside this interpreter (a venv's console script) or on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def _run(args: list[str]) -> str:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"({args[0]} failed: {err!r})"
    return done.stdout if done.returncode == 0 else f"({Path(args[0]).name} exited {done.returncode}: " \
                                                    f"{done.stderr.strip()[-300:]})"


def python_stacks(pid: int) -> str:
    """``py-spy dump`` of one Python process (every thread, idle ones too)."""
    py_spy = _tool("py-spy")
    if py_spy is None:
        return "(py-spy is not installed: pip install py-spy)"
    return _run([py_spy, "dump", "--pid", str(pid)])[:MAX_STACK_CHARS]


def jvm_threads(pid: int) -> str:
    """``jstack`` of a JVM, only the threads `JVM_THREADS` names or in `JVM_FRAMES`."""
    jstack = _tool("jstack")
    if jstack is None:
        return "(jstack is not installed: a JDK's tool)"
    dump = _run([jstack, str(pid)])
    if dump.startswith("("):
        return dump
    kept = [block for block in dump.split("\n\n")
            if JVM_THREADS.match(block.strip()) or any(frame in block for frame in JVM_FRAMES)]
    return "\n\n".join(kept)[:3 * MAX_STACK_CHARS]


def checkpoint_state(root: Path) -> str:
    """Each streaming checkpoint below ``root``: its last planned and committed
    batch ids, and the sink's intent records (a batch planned but not committed
    is the one that hangs; none planned: the source never reported new data)."""
    lines = []
    for offsets in sorted(root.rglob("offsets")):
        commits = offsets.parent / "commits"
        planned = _batch_ids(offsets)
        done = _batch_ids(commits)
        intents = _batch_ids(offsets.parent / "herald" / "sink" / "intents")
        lines.append(f"{offsets.parent}: batches planned {planned[-5:]}, committed {done[-5:]}, "
                     f"sink intents recorded {intents[-5:]}")
    return "\n".join(lines) or f"(no streaming checkpoint below {root})"


def _batch_ids(directory: Path) -> list[int]:
    try:
        stems = (name.removesuffix(".json") for name in os.listdir(directory))
        return sorted(int(stem) for stem in stems if stem.isdigit())
    except OSError:
        return []


def explain_group(pgid: int, checkpoint: Path | None = None) -> str:
    """Everything above for the process group ``pgid`` (a driver's), as one text."""
    parts = []
    if checkpoint is not None:
        parts.append(f"--- checkpoints\n{checkpoint_state(checkpoint)}")
    for pid, cmdline in group_processes(pgid):
        if "java" in cmdline.split(" ", 1)[0]:
            parts.append(f"--- jstack {pid} (query threads)\n{jvm_threads(pid)}")
        elif "python" in cmdline.split(" ", 1)[0]:
            parts.append(f"--- py-spy dump {pid}: {cmdline[:200]}\n{python_stacks(pid)}")
    return "\n".join(parts)
