"""The loop's own CPU per append from queueing to answer, without sockets.

``python -m bench.rounds_cpu [JOURNALS APPENDS_EACH ROUNDS]`` opens real journals
(one data dir, its commit log) on uvloop, and each round queues ``APPENDS_EACH``
1 KiB appends to every journal through `Journal.append_nowait` (the fast path's
way in), then waits until all are answered: the broker's sync rounds run for real,
on their thread and the disk. What it reports — the event loop thread's CPU µs per
append, the sync round thread's (the commit log's helper and the fdatasync pool
apart), and the wall time per round, median of 3 — is the journal side of an
append (queue, group, round, publish, answer), the part the noisy x32 and scaling
benches cannot separate from the sockets and the load generator. Each thread's CPU
is its scheduler time (``/proc/self/task/<tid>/schedstat``, nanoseconds). Compare 1 x 32
(one journal's group per round) with 16 x 2 (sixteen small groups per round).
Not in ``make bench``: a probe for A/B runs (``PYTHONPATH=<checkout>/src``), each
checkout in turn. Accepts checkouts whose ``append_nowait`` returns a future.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import uvloop

from herald.broker.journal import Journal
from herald.fragment.commit_log import CommitLog
from herald.protocol.journal import JournalSpec
from herald.testing import journal_spec

BODY = b"x" * 1023 + b"\n"
WARM_ROUNDS = 20
#: The threads reported on their own, by name prefix (the rest: "others").
ROUND_THREAD = "herald-sync-round"


def _round_thread_ns() -> int:
    """CPU nanoseconds the sync round thread ran so far (0 before it started)."""
    total = 0
    for thread in threading.enumerate():
        if thread.name.startswith(ROUND_THREAD) and thread.native_id is not None:
            try:
                with open(f"/proc/self/task/{thread.native_id}/schedstat") as stat:
                    total += int(stat.read().split()[0])
            except OSError:  # not Linux, or the thread just ended
                pass
    return total


async def _measure(data: Path, journals: int, each: int, rounds: int) -> tuple[float, float, float, float]:
    log = CommitLog.open(data)
    opened = [await Journal.open(JournalSpec.from_dict(journal_spec(f"cpu/j{i:02d}", stores=[])), data, [],
                                 commit_log=log) for i in range(journals)]
    called = "answer" in inspect.signature(Journal.append_nowait).parameters
    loop = asyncio.get_running_loop()

    async def one_round() -> None:
        if not called:  # a checkout before answers were calls: one future per append
            await asyncio.gather(*(j.append_nowait(BODY) for _ in range(each) for j in opened))
            return
        left, done = journals * each, loop.create_future()

        def answer(outcome: object) -> None:
            nonlocal left
            left -= 1
            if not left:
                done.set_result(None)

        for _ in range(each):
            for journal in opened:
                journal.append_nowait(BODY, answer)
        await done

    try:
        for _ in range(WARM_ROUNDS):
            await one_round()
        cpu, process, wall, thread = time.thread_time(), time.process_time(), time.perf_counter(), _round_thread_ns()
        for _ in range(rounds):
            await one_round()
        cpu, process = time.thread_time() - cpu, time.process_time() - process
        appends = rounds * journals * each
        return (cpu / appends * 1e6, (process - cpu) / appends * 1e6, (time.perf_counter() - wall) / rounds * 1e6,
                (_round_thread_ns() - thread) / appends / 1e3)
    finally:
        for journal in opened:
            await journal.close()
        log.close()


def _run(journals: int, each: int, rounds: int) -> tuple[float, float, float, float]:
    with tempfile.TemporaryDirectory(prefix="herald-rounds-cpu-") as data:
        return uvloop.run(_measure(Path(data), journals, each, rounds))


def main() -> None:
    journals, each, rounds = (int(a) for a in sys.argv[1:4]) if len(sys.argv) >= 4 else (16, 2, 200)
    runs = [_run(journals, each, rounds) for _ in range(3)]
    cpu, others, wall, thread = (statistics.median(r[i] for r in runs) for i in range(4))
    print(f"{journals} journals x {each} appends: loop {cpu:.2f} us CPU per 1 KiB append "
          f"(runs {', '.join(f'{r[0]:.2f}' for r in runs)}), other threads {others:.2f} us "
          f"(runs {', '.join(f'{r[1]:.2f}' for r in runs)}; the round thread {thread:.2f}: "
          f"{', '.join(f'{r[3]:.2f}' for r in runs)}), {wall:.0f} us per round, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
