"""Helpers for the word-count tests: the query service as a real process, and the CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx
from typer.testing import CliRunner

from herald.cli.main import app
from herald.examples.word_count.service import READY_PREFIX
from herald.examples.word_count.tokens import bigrams
from herald.protocol.errors import HeraldError

START_DEADLINE_S = 30.0
CORPUS = Path(__file__).resolve().parents[2] / "src" / "herald" / "examples" / "word_count" / "corpus"


def corpus_files() -> list[str]:
    return sorted(str(p) for p in CORPUS.glob("*.txt"))


def corpus_counter(paths: list[str], copies: int = 1) -> Counter[str]:
    """collections.Counter of every bigram of every document, ``copies`` times over."""
    counts: Counter[str] = Counter()
    for path in paths:
        counts.update(bigrams(Path(path).read_text(encoding="utf-8")))
    return Counter({k: v * copies for k, v in counts.items()})


@dataclass(frozen=True)
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def word_count(*args: str) -> CliResult:
    """``herald examples word-count <args>`` in-process; a HeraldError becomes the
    ``error: …`` line and exit code 1 that `herald.cli.main.run` prints for it."""
    result = CliRunner().invoke(app, ["examples", "word-count", *args])
    if isinstance(result.exception, HeraldError):
        return CliResult(1, result.stdout, f"error: {result.exception}\n")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return CliResult(result.exit_code, result.stdout, result.stderr)


def word_count_cli(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    """``herald examples word-count <args>`` as a process (its exit code and error line as a user sees them)."""
    return subprocess.run([sys.executable, "-m", "herald.cli.main", "examples", "word-count", *args],
                          capture_output=True, text=True, timeout=timeout_s)


class QueryService:
    """``… word-count serve --port 0`` in its own process group; `start` blocks until it is ready."""

    def __init__(self, broker_url: str, *extra: str) -> None:
        self.args = [sys.executable, "-m", "herald.examples.word_count.cli", "serve", "--port", "0",
                     "--broker", broker_url, *extra]
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> QueryService:
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_DEADLINE_S)
        if not line or not line[0].startswith(READY_PREFIX):
            self.kill()
            raise RuntimeError(f"service did not start: {line!r}\n{self.proc.stderr.read()[-3000:]}")
        self.url = line[0][len(READY_PREFIX):].split()[0]
        return self

    def get(self, path: str, **params) -> httpx.Response:
        return httpx.get(f"{self.url}{path}", params=params, timeout=30)

    def read_through(self) -> dict[str, int]:
        doc = self.get("/api/status").json()
        return {name: j["read_through"] for name, j in doc["journals"].items()}

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
