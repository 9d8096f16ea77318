"""``make example-word-count``: the word-count example end to end, on one machine.

Starts an embedded broker in a temp dir, then runs the very commands a newcomer
types (docs/examples/word-count.md) and prints them with their output: setup,
publish the shipped corpus, run the job to completion (available-now), start
the query service, query it. Finally it compares every count the service
serves with ``collections.Counter`` over the corpus and exits non-zero on any
difference.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from herald.examples.word_count.service import READY_PREFIX
from herald.examples.word_count.tokens import bigrams
from herald.testing.broker import BrokerProcess
from herald.testing.waiting import wait_until

CORPUS = Path(__file__).parent / "corpus"


def herald(*args: str, env: dict[str, str], cwd: Path | None = None) -> str:
    """Run and echo ``herald examples word-count <args>``; returns its stdout."""
    shown = " ".join(a if " " not in a and a else repr(a) for a in args)
    print(f"$ herald examples word-count {shown}", flush=True)
    done = subprocess.run([sys.executable, "-m", "herald.cli.main", "examples", "word-count", *args],
                          env=env, cwd=cwd, capture_output=True, text=True)
    for line in done.stdout.splitlines():
        print(f"  {line}", flush=True)
    if done.returncode:
        raise SystemExit(f"failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def start_service(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    print("$ herald examples word-count serve --port 0 &", flush=True)
    proc = subprocess.Popen([sys.executable, "-m", "herald.cli.main", "examples", "word-count", "serve",
                             "--port", "0"], env=env, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith(READY_PREFIX):
        proc.kill()
        raise SystemExit(f"the query service did not start: {line!r}")
    print(f"  {line.strip()}", flush=True)
    return proc, line[len(READY_PREFIX):].split()[0]


def served_counts(url: str, expected_bigrams: int) -> dict[str, int]:
    """All served counts, once the service has as many bigrams as expected (or 60 s passed)."""
    def fetch() -> dict[str, int]:
        doc = httpx.get(f"{url}/api/bigrams", params={"prefix": "", "limit": 100_000}, timeout=30).json()
        return {b["bigram"]: b["count"] for b in doc["bigrams"]}

    try:
        wait_until(lambda: len(fetch()) >= expected_bigrams, "the service to serve every bigram", 60)
    except AssertionError:
        pass  # Compared (and reported different) below.
    return fetch()


def run(tmp: Path) -> bool:
    broker = BrokerProcess(tmp / "data", tmp / "fragments").start()
    print(f"started an embedded broker at {broker.url} (data in {tmp})")
    env = {**os.environ, "BROKER_ADDRESS": broker.url}
    service = None
    try:
        herald("setup", "--partitions", "4", env=env)
        files = sorted(p.name for p in CORPUS.glob("*.txt"))
        print(f"$ cd {CORPUS}")
        herald("publish", *files, env=env, cwd=CORPUS)
        herald("run", "--checkpoint", str(tmp / "checkpoint"), env=env)
        service, url = start_service(env)
        env["HERALD_WORD_COUNT_SERVICE"] = url
        herald("query", "--prefix", "the city", env=env)
        herald("query", "the city", "-o", "json", env=env)
        herald("query", "--prefix", "the ", "--limit", "5", env=env)
        expected = Counter(b for f in files for b in bigrams((CORPUS / f).read_text(encoding="utf-8")))
        got = served_counts(url, len(expected))
        ok = got == dict(expected)
        print(f"{len(got)} bigrams served, {sum(got.values())} occurrences: "
              f"{'equal to' if ok else 'DIFFERENT from'} collections.Counter over the corpus")
        return ok
    finally:
        if service is not None:
            service.terminate()
            service.wait(30)
        print(f"stopped the service and the broker (exit {broker.terminate()})")


def main() -> None:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="herald-word-count-") as tmp:
        ok = run(Path(tmp))
    print(f"word-count demo {'passed' if ok else 'FAILED'} ({time.monotonic() - started:.0f} s in all)")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
