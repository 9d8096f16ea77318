"""Running stream-sum: chunkers and their verifier, with or without a summer in-process.

`run_chunkers` runs ``n`` chunkers in threads against a summer that runs
anywhere (another process, a crash test's driver) and returns the run's
`Figures` once every file is verified or overdue. `run_with_summer` also runs
the summer on a local Spark in this process, for ``herald examples stream-sum
run``. Blocking; every wait is bounded by the sum timeout.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from herald.client import AppendService, BrokerClient
from herald.client.publisher import Publisher
from herald.examples.stream_sum.chunker import ChunkerSettings, run_chunker
from herald.examples.stream_sum.digest import file_digest
from herald.examples.stream_sum.messages import chunk_body
from herald.examples.stream_sum.summer import SUMS, SummerSettings, run_summer
from herald.examples.stream_sum.verify import Figures, Verifier

__all__ = ["new_nonce", "run_chunkers", "run_with_summer", "warm_up"]

WARM_UP_DEADLINE_S = 300.0  # Spark's start-up on a busy 2-core machine, with room to spare


def new_nonce() -> str:
    """A run's prefix of file ids (8 hex digits and a dash)."""
    return os.urandom(4).hex() + "-"


def run_chunkers(client: BrokerClient, chunkers: int, settings: ChunkerSettings, sum_timeout_s: float,
                 report: Callable[[str], None] = print, sums: str = SUMS,
                 verifier_ready: Callable[[Verifier], None] | None = None,
                 stop: threading.Event | None = None) -> Figures:
    """Run ``chunkers`` chunkers and verify their sums; blocks until done. ``stop``
    ends the chunkers' ``duration_s`` early (they still finish their open files)."""
    sum_journals = [info.name for info in client.list(sums)]
    verifier = Verifier(client, sum_journals, new_nonce(), sum_timeout_s, report).start()
    if verifier_ready is not None:
        verifier_ready(verifier)
    try:
        warm_up(client, verifier, settings.chunks, max(sum_timeout_s, WARM_UP_DEADLINE_S))
        return _chunk_and_verify(client, verifier, chunkers, settings, stop)
    finally:
        verifier.close()


def warm_up(client: BrokerClient, verifier: Verifier, chunks: str, deadline_s: float) -> None:
    """Publish a file of no chunks and wait for its sum: the summer is then up (its
    Spark workers started), and the chunkers' time-to-sum measures the pipeline,
    not Spark's start-up. The file is verified like any other, but not timed."""
    file_id = f"{verifier.nonce}warm-up"
    verifier.expect(file_id, file_digest(file_id, []), 0, timed=False)
    with AppendService(client) as service:
        publisher = Publisher(service, client.list(chunks), mapping="modulo")
        publisher.publish_committed(file_id.encode(), chunk_body(file_id, 0, b"", True)).result()
    if not verifier.wait_verified(file_id, deadline_s):
        verifier.violation(f"{file_id}: no sum within {deadline_s:.0f}s: is the summer running?")


def _chunk_and_verify(client: BrokerClient, verifier: Verifier, chunkers: int, settings: ChunkerSettings,
                      stop: threading.Event | None) -> Figures:
    if verifier.violations:
        return verifier.figures()

    def chunk(index: int) -> None:
        try:
            run_chunker(client, settings, index, verifier.nonce, verifier, stop)
        except Exception as err:  # noqa: BLE001 — a thread's edge: the run must fail loudly.
            verifier.violation(f"chunker {index} failed: {err!r}")

    threads = [threading.Thread(target=chunk, args=(i,), name=f"chunker {i}") for i in range(chunkers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    verifier.wait_all()
    return verifier.figures()


def run_with_summer(spark: Any, broker: str, checkpoint: Path, chunkers: int, settings: ChunkerSettings,
                    sum_timeout_s: float, report: Callable[[str], None] = print) -> Figures:
    """Run the summer on ``spark`` while the chunkers run; stop it when they are done."""
    done = threading.Event()
    result: list[Figures] = []
    verifiers: list[Verifier] = []

    def chunk_and_verify() -> None:
        try:
            with BrokerClient(broker) as client:
                result.append(run_chunkers(client, chunkers, settings, sum_timeout_s, report,
                                           verifier_ready=verifiers.append))
        finally:
            done.set()

    thread = threading.Thread(target=chunk_and_verify, name="chunkers")
    thread.start()
    try:
        run_summer(spark, SummerSettings(broker=broker, checkpoint=str(checkpoint)), report=report,
                   stop=done.is_set)
    finally:
        for verifier in verifiers:  # a failed summer: no sum will come, don't wait for one
            verifier.abandon()
        thread.join()
    return result[0]
