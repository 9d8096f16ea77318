"""One writer's 1 KiB append, request to answer, on the broker's loop: CPU and where the wall goes.

``python -m bench.lone_cpu [APPENDS [DATA_DIR]]`` opens a real journal (one data
dir, its commit log) on uvloop and drives `herald.broker.front.FrontConnection`
as a lone keep-alive client would: one whole 1 KiB ``PUT`` (``data_received``),
and the next as soon as the 204 is written (a transport that only records), so a
lone writer's sync round runs on the loop (`herald.broker.lone_rounds`) as it does
under ``wrk -c1``. It reports the loop's CPU µs per append and the medians of the
append's phases on the wall clock: request to the commit log's record write, that
write to the fdatasync, the fdatasync, the fdatasync to the answer's write, and
the answer's write to the end of the loop's turn (what a client waits for before
its next request is read). ``DATA_DIR`` (default: a temp dir) chooses the disk:
``/dev/shm`` for the Python alone. Not in ``make bench``: a probe for A/B runs
(``PYTHONPATH=<checkout>/src``), each checkout in turn.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

import uvloop

from bench.front_cpu import CountingTransport
from herald.broker.front import Frontage
from herald.broker.journal import Journal
from herald.broker.ratelimit import AppendRates
from herald.fragment.commit_log import CommitLog
from herald.protocol.journal import JournalSpec
from herald.testing import journal_spec

BODY = b"x" * 1023 + b"\n"
REQUEST = (b"PUT /bench/x1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/octet-stream\r\n"
           b"Content-Length: %d\r\n\r\n" % len(BODY)) + BODY
WARM = 300
_LOGGED = {"log", "sync", "synced", "answer"}
PHASES = ("request->log write", "log write->fdatasync", "fdatasync", "fdatasync->answer", "answer->turn end")


class _Clock:
    """Timestamps of one append's steps: the record's write to the log (the first
    write to the log's descriptor), its fdatasync's start and end."""

    def __init__(self, log: CommitLog) -> None:
        self.log = log
        self.marks: dict[str, float] = {}
        self._pwritev, self._fdatasync = os.pwritev, os.fdatasync

    def install(self) -> None:
        def pwritev(fd: int, buffers, offset: int, *flags: int) -> int:
            if fd == self.log._fd and "log" not in self.marks:
                self.marks["log"] = time.perf_counter()
            return self._pwritev(fd, buffers, offset, *flags)

        def fdatasync(fd: int) -> None:
            self.marks.setdefault("sync", time.perf_counter())
            self._fdatasync(fd)
            self.marks.setdefault("synced", time.perf_counter())

        os.pwritev, os.fdatasync = pwritev, fdatasync  # type: ignore[assignment]

    def remove(self) -> None:
        os.pwritev, os.fdatasync = self._pwritev, self._fdatasync  # type: ignore[assignment]


class _Transport(CountingTransport):
    """Records the answer's time; the next request is sent in the next loop turn
    (the rest of a transport as `bench.front_cpu`'s)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: _Clock, appends: int) -> None:
        super().__init__()
        self.loop, self.clock, self.left = loop, clock, appends
        self.connection = None
        self.phases: list[tuple[float, ...]] = []
        self.done = loop.create_future()
        self._sent = 0.0

    def send(self) -> None:
        marks = self.clock.marks
        if self._sent and marks.keys() >= _LOGGED:  # a logged round (else synced in place)
            ended = time.perf_counter()
            self.phases.append((marks["log"] - self._sent, marks["sync"] - marks["log"],
                                marks["synced"] - marks["sync"], marks["answer"] - marks["synced"],
                                ended - marks["answer"]))
        if self.left == 0:
            self.done.set_result(None)
            return
        self.left -= 1
        marks.clear()
        self._sent = time.perf_counter()
        self.connection.data_received(REQUEST)

    def write(self, data: bytes) -> None:
        self.clock.marks.setdefault("answer", time.perf_counter())
        if not data.startswith(b"HTTP/1.1 204"):
            raise RuntimeError(f"not acknowledged: {data[:200]!r}")
        self.loop.call_soon(self.send)



async def _measure(data: Path, appends: int) -> tuple[float, list[float], int]:
    log = CommitLog.open(data)
    journal = await Journal.open(JournalSpec.from_dict(journal_spec("bench/x1", stores=[])), data, [],
                                 commit_log=log)
    loop = asyncio.get_running_loop()
    settings = types.SimpleNamespace(max_header_bytes=8190, max_append_bytes=1 << 26, idle_timeout_s=60.0,
                                     body_timeout_s=60.0)
    broker = types.SimpleNamespace(settings=settings, auth_keys=None, stopping=asyncio.Event(),
                                   local_journal=lambda name, need_primary: journal, append_rates=AppendRates(0))
    front = Frontage(broker, lambda: None)
    clock = _Clock(log)
    try:
        for count in (WARM, appends):
            transport = _Transport(loop, clock, count)
            connection = front.protocol()
            connection.connection_made(transport)
            transport.connection = connection
            clock.install()
            cpu = time.thread_time()
            transport.send()
            await transport.done
            cpu = time.thread_time() - cpu
            clock.remove()
        phases = [statistics.median(p[i] for p in transport.phases) * 1e6 for i in range(len(PHASES))]
        return cpu / appends * 1e6, phases, journal._rounds.statistics()["rounds_here"]
    finally:
        clock.remove()
        front.close()
        await journal.close()
        log.close()


def main() -> None:
    appends = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    parent = sys.argv[2] if len(sys.argv) > 2 else None
    runs = []
    for _ in range(3):
        with tempfile.TemporaryDirectory(prefix="herald-lone-cpu-", dir=parent) as data:
            runs.append(uvloop.run(_measure(Path(data), appends)))
    cpu = statistics.median(r[0] for r in runs)
    phases = [statistics.median(r[1][i] for r in runs) for i in range(len(PHASES))]
    print(f"lone 1 KiB append: loop {cpu:.1f} us CPU (runs {', '.join(f'{r[0]:.1f}' for r in runs)}); "
          f"rounds on the loop {min(r[2] for r in runs)}/{appends + WARM}; load {os.getloadavg()[0]:.1f}")
    print("  medians (us): " + ", ".join(f"{name} {value:.1f}" for name, value in zip(PHASES, phases)))


if __name__ == "__main__":
    main()
