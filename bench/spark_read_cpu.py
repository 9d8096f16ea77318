"""Interleaved A/B of the ``herald`` batch read in Spark: rows/s and CPU per row by process.

``python -m bench.spark_read_cpu ROWS ROUNDS SRC_A SRC_B [...]`` starts one broker,
fills a journal as `bench.spark` does, then one Spark session (local[2]) per
source tree (each a child process with ``PYTHONPATH=<tree>``, its Python workers
too) and takes turns: per round each child reads the journal once into ``noop``
(and, with ``--ceiling``, the Arrow-ceiling source's as many rows). Per read it
prints the wall rows/s and the CPU per row of the JVM (its own threads) and of
its Python workers (the JVM's descendants, reaped ones included), from /proc:
CPU per row is far less sensitive to a shared machine's neighbours than rows/s.
Not in ``make bench``: a probe for A/B runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.spark_parallel import ANSWER, ask

TICKS = os.sysconf("SC_CLK_TCK")
JOURNAL = "bench/spark-read"


def _stats() -> tuple[dict[int, list[int]], dict[int, tuple[float, float, str]]]:
    """Every process's children and (own CPU s, own + reaped children's CPU s, comm)."""
    children: dict[int, list[int]] = {}
    times: dict[int, tuple[float, float, str]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
        except OSError:
            continue
        fields = rest.split()
        children.setdefault(int(fields[1]), []).append(int(name))
        own = (int(fields[11]) + int(fields[12])) / TICKS
        times[int(name)] = (own, own + (int(fields[13]) + int(fields[14])) / TICKS, head.split("(", 1)[1])
    return children, times


def _cpu() -> dict[str, float]:
    """This process's JVM (own threads) and the Python processes under it (with reaped ones)."""
    children, times = _stats()
    jvm = [p for p in children.get(os.getpid(), []) if times.get(p, (0, 0, ""))[2] == "java"]
    out = {"jvm": 0.0, "python": 0.0}
    for pid in jvm:
        out["jvm"] += times[pid][0]
        stack = list(children.get(pid, []))
        while stack:
            p = stack.pop()
            out["python"] += times.get(p, (0.0, 0.0, ""))[1]
            stack += children.get(p, [])
        # Workers the JVM reaped count in its reaped-children time.
        out["python"] += times[pid][1] - times[pid][0]
    return out


def child(url: str, rows: int) -> None:
    """Reads commands (``herald``, ``ceiling``) from stdin; answers each with one JSON line."""
    from bench.spark import spark_session

    spark = spark_session("local[2]")
    reader = spark.read.format("herald").option("broker", url).option("selector", f"name={JOURNAL}")
    parts = reader.load().rdd.getNumPartitions()
    frames = {"herald": lambda: reader.load(),
              "ceiling": lambda: spark.read.format("herald-ceiling").option("rows", rows)
              .option("partitions", parts).load()}
    for name in frames:  # warm: workers started, imports done
        frames[name]().write.format("noop").mode("overwrite").save()
    try:
        for command in sys.stdin:
            df = frames[command.strip()]()
            before, wall = _cpu(), time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            wall = time.perf_counter() - wall
            after = _cpu()
            print(ANSWER + json.dumps({"rows_per_s": rows / wall,
                                       **{k: (after[k] - before[k]) / rows * 1e6 for k in after}}), flush=True)
    finally:
        spark.stop()


def main(rows: int, rounds: int, trees: list[str], ceiling: bool) -> None:
    from bench.servers import herald_broker
    from bench.spark import fill_journal

    root = str(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory(prefix="herald-read-cpu-") as tmp, herald_broker(Path(tmp)) as broker:
        fill_journal(broker.url, JOURNAL, rows, Path(tmp), text=False)
        procs = {}
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join((tree, root))}
            procs[tree] = subprocess.Popen([sys.executable, "-m", "bench.spark_read_cpu", "--child", broker.url,
                                            str(rows)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           text=True, start_new_session=True)
        try:
            for r in range(rounds):
                for tree, proc in procs.items():
                    for name in ("herald", "ceiling") if ceiling else ("herald",):
                        got = ask(proc, name)
                        load = os.getloadavg()[0]
                        print(f"round {r} {tree:22s} {name:8s} {got['rows_per_s'] / 1e6:5.2f} M rows/s  "
                              f"JVM {got['jvm']:.3f}  Python {got['python']:.3f} us/row  load {load:.1f}",
                              flush=True)
        finally:
            for proc in procs.values():
                assert proc.stdin is not None
                proc.stdin.close()
            for proc in procs.values():
                proc.wait(120)


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
    else:
        args = [a for a in sys.argv[1:] if a != "--ceiling"]
        main(int(args[0]), int(args[1]), args[2:], "--ceiling" in sys.argv)
