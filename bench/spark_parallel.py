"""The spark benchmark's parallel efficiency: the same reads under ``local[1]`` and
``local[2]``, each in its own fresh process (one SparkContext per process).

The data is its own: `JOURNALS` journals (`fill`), so that a read has work for two
cores whatever Herald's split rules are (a batch read has a partition per
fragment, a stream a slice per journal, packed into as many tasks as cores); one
journal of a quick bench's 20 MiB is one task and measures nothing but noise.
Both masters' processes stay alive and take turns read by read (the order swapped
every run), after a warm-up each: a pair of samples is seconds apart, so the
machine's other load (three other sessions here) hits both alike, and the figure
is a median over several runs, not one run against one.

`bench.spark` starts a child per master as ``python -m bench.spark_parallel MASTER
URL SELECTOR ROWS`` and sends it ``warm`` / ``read`` lines; each read answers one
JSON line: ``batch_rows_per_s`` (wall time of a batch job),
``stream_rows_per_s`` (wall time of an availableNow query, start-up included) and
``stream_batch_rows_per_s`` (the same query's rows ÷ its micro-batches' time, from
Spark's progress events: the part that can run in parallel), and ``batch_cores`` /
``stream_cores``: the CPU cores the child's process tree got on average during the
read. Efficiency is local[2] ÷ local[1] (2.0 would be perfect on two cores); the
cores say whether a second core was there to be had: on a machine the other
sessions keep busy, local[2] gets no more CPU than local[1].

The machine's own reference, read by the same children in the same turns: Spark's
``text`` source over the same bytes (the journals' content as plain files, a file
per fragment), batch and availableNow stream (``text_*`` metrics). Its local[2] ÷
local[1] says what two cores give Spark itself here, so whether Herald's goal
(≥ 1.5×) is reachable at all on this machine.

``python -m bench.spark_parallel [--quick]`` runs this case alone (a broker of its
own) and prints the samples and the pair ratios.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["JOURNALS", "MASTERS", "fill", "measure_masters", "pair_ratios"]

MASTERS = ("local[1]", "local[2]")
JOURNALS = 4
PREFIX = "bench/spark-parallel/"
ANSWER = "bench.spark_parallel: "
TICKS = os.sysconf("SC_CLK_TCK")


def fill(url: str, rows: int, scratch: Path) -> tuple[str, str]:
    """``rows`` messages over `JOURNALS` journals (as the read cases' journal);
    returns their selector and a glob of the same bytes as plain files (Spark's
    ``text`` reads it)."""
    from bench.spark import fill_journal

    for i in range(JOURNALS):
        fill_journal(url, f"{PREFIX}{i}", rows // JOURNALS, scratch / f"parallel-{i}")
    return f"prefix={PREFIX}", str(scratch / "parallel-*" / "text" / "*.json")


def measure_masters(url: str, selector: str, rows: int, runs: int,
                    text_glob: str = "") -> dict[str, dict[str, list[float]]]:
    """Samples per master: one process per master, both alive, taking turns read by
    read (the order swapped every run), so each pair of samples is seconds apart
    and a change in the machine's other load hits both alike."""
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    out: dict[str, dict[str, list[float]]] = {master: {} for master in MASTERS}
    with contextlib.ExitStack() as stack:
        logs = {master: stack.enter_context(tempfile.TemporaryFile("w+")) for master in MASTERS}
        procs = {master: stack.enter_context(_child(master, [url, selector, str(rows), text_glob], env,
                                                     logs[master]))
                 for master in MASTERS}
        for master in MASTERS:
            ask(procs[master], "warm", logs[master])  # workers and their imports, outside the timed reads
        for n in range(runs):
            for master in MASTERS if n % 2 == 0 else MASTERS[::-1]:
                for metric, value in ask(procs[master], "read", logs[master]).items():
                    out[master].setdefault(metric, []).append(value)
    return out


@contextlib.contextmanager
def _child(master: str, args: list[str], env: dict[str, str], log: Any) -> Iterator[subprocess.Popen]:
    """A child process (`main`) for ``master``; on exit its input is closed, so it
    stops its Spark session and exits (killed if it does not within 120 s)."""
    proc = subprocess.Popen([sys.executable, "-m", "bench.spark_parallel", master, *args], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        yield proc
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def pair_ratios(samples: dict[str, dict[str, list[float]]], metric: str) -> list[float]:
    """local[2] ÷ local[1] of each pair of reads taken seconds apart."""
    return [two / one for one, two in zip(samples[MASTERS[0]][metric], samples[MASTERS[1]][metric], strict=True)]


def ask(proc: subprocess.Popen, command: str, log: Any = None) -> dict[str, Any]:
    """One command to a child bench process, its answer (the line after `ANSWER`;
    anything else a library prints to stdout is skipped). ``log``: the child's
    stderr file, whose tail a child that died takes into the error."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(command + "\n")
    proc.stdin.flush()
    for line in proc.stdout:
        if line.startswith(ANSWER):
            return json.loads(line[len(ANSWER):])  # type: ignore[no-any-return]
    tail = ""
    if log is not None:
        log.seek(0)
        tail = log.read()[-2000:]
    raise RuntimeError(f"{' '.join(map(str, proc.args))} exited ({proc.wait()}) during {command!r}: {tail}")


class _Reads:
    """The reads one child times: a batch job and an availableNow stream into
    ``noop``, Herald's and (given ``text_glob``) Spark's ``text`` over the same bytes."""

    def __init__(self, spark: Any, url: str, selector: str, rows: int, text_glob: str = "") -> None:
        self.spark, self.url, self.selector, self.rows = spark, url, selector, rows
        self.text_glob = text_glob
        self.scratch = Path(tempfile.mkdtemp(prefix="herald-bench-parallel-"))
        self.n = 0

    def batch(self) -> float:
        df = self.spark.read.format("herald").option("broker", self.url).option("selector", self.selector).load()
        start = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        return self.rows / (time.perf_counter() - start)

    def cores(self, fn: Callable[[], Any]) -> tuple[Any, float]:
        """``fn()`` and the CPU cores this process tree (driver, JVM, Python workers)
        used on average while it ran: what the scheduler gave the read."""
        cpu, start = _tree_cpu_s(), time.perf_counter()
        value = fn()
        return value, (_tree_cpu_s() - cpu) / (time.perf_counter() - start)

    def stream(self) -> dict[str, float]:
        from bench.spark import stream_figures

        self.n += 1
        state = self.scratch / f"s{self.n}"
        df = (self.spark.readStream.format("herald").option("broker", self.url).option("selector", self.selector)
              .option("stateLocation", str(state)).load())
        return stream_figures(self.rows, df, state)

    def text_batch(self) -> float:
        df = self.spark.read.text(self.text_glob)
        start = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        return self.rows / (time.perf_counter() - start)

    def text_stream(self) -> dict[str, float]:
        from bench.spark import stream_figures

        self.n += 1
        return stream_figures(self.rows, self.spark.readStream.schema("value string").text(self.text_glob),
                              self.scratch / f"t{self.n}")

    def read(self) -> dict[str, float]:
        figures, stream_cores = self.cores(self.stream)
        batch, batch_cores = self.cores(self.batch)
        out = {"batch_rows_per_s": batch, "stream_rows_per_s": figures["rows_per_s"],
               "stream_batch_rows_per_s": figures["batch_rows_per_s"], "batch_cores": batch_cores,
               "stream_cores": stream_cores}
        if self.text_glob:
            text, text_stream_cores = self.cores(self.text_stream)
            out.update(text_batch_rows_per_s=self.text_batch(), text_stream_rows_per_s=text["rows_per_s"],
                       text_stream_batch_rows_per_s=text["batch_rows_per_s"], text_stream_cores=text_stream_cores)
        return out

    def warm(self) -> None:
        self.batch(), self.stream()
        if self.text_glob:
            self.text_batch(), self.text_stream()


def _tree_cpu_s() -> float:
    """CPU seconds (user + system) of this process and its descendants, from /proc: the
    live ones', and through their parents' reaped-children times those that exited
    (a stream's source runner, a Python worker that was not reused)."""
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
        times[int(name)] = sum(int(v) for v in fields[11:15]) / TICKS  # own and reaped children's time
    total, stack = 0.0, [os.getpid()]
    while stack:
        pid = stack.pop()
        total += times.get(pid, 0.0)
        stack += children.get(pid, [])
    return total


def main(argv: list[str]) -> None:
    """A child: ``MASTER URL SELECTOR ROWS [TEXT_GLOB]``; reads commands (``warm``,
    ``read``) from stdin, answers each with one JSON line; stops at end of input."""
    master, url, selector, rows, *text = argv
    from bench.spark import spark_session

    spark = spark_session(master)
    reads = _Reads(spark, url, selector, int(rows), *text)
    try:
        for command in sys.stdin:
            if command.strip() == "warm":
                reads.warm()
                print(ANSWER + json.dumps({}), flush=True)
            elif command.strip() == "read":
                print(ANSWER + json.dumps(reads.read()), flush=True)
    finally:
        spark.stop()
        shutil.rmtree(reads.scratch, ignore_errors=True)


def alone(argv: list[str]) -> None:
    """``python -m bench.spark_parallel [--quick]``: this case alone, on a broker of
    its own (the spark benchmark's sizes), printing every sample and the pair ratios."""
    from bench.runner import Config, remove_tree
    from bench.servers import herald_broker

    config = Config(quick="--quick" in argv)
    rows, runs = config.scale(800_000, 300_000), config.scale(5, 3)
    scratch = config.scratch("spark-parallel")
    try:
        with herald_broker(scratch) as broker:
            selector, text_glob = fill(broker.url, rows, scratch)
            measured = measure_masters(broker.url, selector, rows, runs, text_glob)
    finally:
        remove_tree(scratch)
    for master, samples in measured.items():
        for metric, values in samples.items():
            print(f"{master:9s} {metric:30s} " + " ".join(f"{v:12,.2f}" for v in values))
    for metric in measured[MASTERS[0]]:
        if not metric.endswith("_cores"):
            ratios = sorted(pair_ratios(measured, metric))
            print(f"local[2] / local[1] {metric:30s} median {ratios[len(ratios) // 2]:.2f} "
                  f"range {ratios[0]:.2f}-{ratios[-1]:.2f}")


if __name__ == "__main__":
    if sys.argv[1:2] and not sys.argv[1].startswith("--"):
        main(sys.argv[1:])
    else:
        alone(sys.argv[1:])
