"""A real Spark standalone cluster for tests: a master and workers as separate processes.

`local[N]` runs driver and executors in one JVM and one Python world, so it
cannot show that a job works when they are apart. `SparkCluster` starts
Spark's own daemons — ``org.apache.spark.deploy.master.Master`` and
``…worker.Worker`` through the ``spark-class`` script that ships inside the
``pyspark`` package — on loopback, each in its own process group (so
`SparkCluster.kill_worker` takes a worker's executor and Python workers down
with it, as losing a machine would), with small cores and memory. Apps go in
through ``spark-submit --master spark://…`` (`SparkCluster.submit`), in client
deploy mode (the only one Spark offers Python apps on a standalone cluster).

Every wait is for a line the daemon prints (the master's URL, a worker's
registration), with a deadline that fails loudly with the log's tail.

    cluster = SparkCluster(tmp_path, workers=2).start()
    app = cluster.submit(["app.py", "arg"])
    app.wait_for_line("batch ", 120); cluster.kill_worker(0); assert app.wait(300) == 0
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from herald.testing.processes import kill_group

__all__ = ["SparkApp", "SparkCluster", "spark_cluster", "spark_home"]

START_DEADLINE_S = 90.0
DAEMON_MEMORY = "256m"  # the master's and workers' own heaps (executors get their own)
MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")


def spark_home() -> Path:
    """The Spark distribution inside the installed ``pyspark`` package."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class _Process:
    """A child in its own process group whose output lines are kept (and logged to
    a file) and can be awaited."""

    def __init__(self, args: list[str], log_path: Path, env: dict[str, str]) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 — open as long as the process runs
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        assert self.proc.stdout
        for raw in self.proc.stdout:
            self._log.write(raw)
            self._log.flush()
            self.lines.put(raw.decode(errors="replace"))
        self.lines.put("")  # EOF

    def skip_pending(self) -> None:
        """Forget lines printed so far: the next `wait_for_line` sees only new ones."""
        while True:
            try:
                if self.lines.get_nowait() == "":
                    self.lines.put("")  # keep EOF visible
                    return
            except queue.Empty:
                return

    def wait_for_line(self, pattern: str, deadline_s: float) -> re.Match:
        """The first line not yet awaited (or skipped) matching ``pattern`` (a
        regex); AssertionError with the log's tail if the process exits or the
        deadline passes first."""
        regex, end = re.compile(pattern), time.monotonic() + deadline_s
        while (left := end - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line == "":
                raise AssertionError(f"exited ({self.proc.wait()}) before {pattern!r}:\n{self.tail()}")
            if match := regex.search(line):
                return match
        raise AssertionError(f"no line {pattern!r} within {deadline_s}s:\n{self.tail()}")

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """``kill -9`` of the whole group; returns once nothing of it runs."""
        kill_group(self.proc)
        self._drainer.join(10)
        self._log.close()


class SparkApp(_Process):
    """A ``spark-submit`` run (its driver: JVM and Python, one process group)."""

    def wait(self, deadline_s: float) -> int:
        """The exit code; AssertionError (and kill) if it runs past ``deadline_s``."""
        try:
            return self.proc.wait(deadline_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"spark-submit still running after {deadline_s}s:\n{self.tail()}") from None


class SparkCluster:
    """A standalone master and ``workers`` workers (``cores`` and ``memory`` each)
    on 127.0.0.1, all under ``work_dir``. `start` blocks until every worker has
    registered with the master."""

    def __init__(self, work_dir: Path, workers: int = 2, cores: int = 1, memory: str = "640m") -> None:
        self.work_dir = Path(work_dir)
        self.worker_count, self.cores, self.memory = workers, cores, memory
        self.home = spark_home()
        self.master: _Process | None = None
        self.workers: list[_Process | None] = [None] * workers
        self.url = ""

    def env(self) -> dict[str, str]:
        """What every daemon and app runs with: this interpreter for Python workers,
        loopback, small daemon heaps, no REST submission port (a fixed 6066)."""
        return {**os.environ, "SPARK_HOME": str(self.home), "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
                "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
                "SPARK_LOG_DIR": str(self.work_dir / "logs")}

    def _spark_class(self, cls: str, *args: str, log: str) -> _Process:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        return _Process([str(self.home / "bin" / "spark-class"), cls, *args], self.work_dir / log, self.env())

    def start(self) -> SparkCluster:
        self.master = self._spark_class("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                        "--port", "0", "--webui-port", "0", log="master.log")
        self.url = self.master.wait_for_line(MASTER_URL.pattern, START_DEADLINE_S).group(1)
        self.master.wait_for_line("I have been elected leader", START_DEADLINE_S)
        for i in range(self.worker_count):
            self.start_worker(i)
        return self

    def start_worker(self, i: int) -> None:
        """Start worker ``i`` (again) and wait until the master has it."""
        worker = self._spark_class("org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0",
                                   "--webui-port", "0", "--cores", str(self.cores), "--memory", self.memory,
                                   "--work-dir", str(self.work_dir / f"worker-{i}"), self.url,
                                   log=f"worker-{i}.log")
        self.workers[i] = worker
        worker.wait_for_line("Successfully registered with master", START_DEADLINE_S)

    def kill_worker(self, i: int, *, had_executor: bool = True) -> None:
        """``kill -9`` worker ``i`` with its executors and their Python workers.
        With ``had_executor``, return once the master has told the running app it
        lost an executor (AssertionError if the worker ran none: the kill would
        prove nothing)."""
        worker, master = self.workers[i], self.master
        assert worker is not None and master is not None
        master.skip_pending()
        worker.kill()
        self.workers[i] = None
        if had_executor:
            master.wait_for_line("Telling app of lost executor", START_DEADLINE_S)

    def ensure_workers(self) -> None:
        """Restart any worker a test killed (or that died)."""
        for i, worker in enumerate(self.workers):
            if worker is None or not worker.running:
                if worker is not None:
                    worker.kill()
                self.start_worker(i)

    def submit(self, args: list[str], *, log: str = "app.log", conf: dict[str, str] | None = None) -> SparkApp:
        """``spark-submit --master <this cluster> [conf] args`` (an app file and its
        arguments), in its own process group. Executors get one core and 512 MiB
        each, so the app spreads over both workers."""
        settings = {"spark.executor.cores": "1", "spark.executor.memory": "512m",
                    "spark.cores.max": str(self.cores * self.worker_count), "spark.ui.enabled": "false",
                    "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "768m",
                    "spark.sql.shuffle.partitions": "2", **(conf or {})}
        confs = [x for k, v in settings.items() for x in ("--conf", f"{k}={v}")]
        cmd = [str(self.home / "bin" / "spark-submit"), "--master", self.url, *confs, *args]
        return SparkApp(cmd, self.work_dir / log, self.env())

    def stop(self) -> None:
        for worker in self.workers:
            if worker is not None:
                worker.kill()
        if self.master is not None:
            self.master.kill()


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    """A standalone master + two one-core workers for a test module; a test that
    kills a worker gets it back (restarted) before the next test."""
    pytest.importorskip("pyspark")
    cluster = SparkCluster(tmp_path_factory.mktemp("spark-cluster")).start()
    try:
        yield cluster
    finally:
        cluster.stop()
