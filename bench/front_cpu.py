"""The append fast path's own Python per append, without sockets, disk or threads.

``python -m bench.front_cpu`` drives `herald.broker.front.FrontConnection` on
uvloop as a broker would, 16 connections at a time: each gets one whole 1 KiB
``PUT`` (``data_received``), is routed to a stand-in journal whose append future
the probe resolves (a sync round's outcome), and writes its 204 to a transport
that only counts. What it reports — CPU µs per append, median of 3 — is the front
end's share of an append (framing, head lookup, routing, the answer's bytes,
metrics), the part the noisy x32 bench cannot separate from the syscalls, the
sync round and the load generator. Not in ``make bench``: a probe for A/B runs
(``PYTHONPATH=<checkout>/src``), each checkout in turn.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import types

import uvloop

from herald.broker.front import Frontage
from herald.broker.group import AppendCommit
from herald.broker.ratelimit import AppendRates
from herald.protocol.labels import LabelSet

BODY = b"x" * 1024
REQUEST = (b"PUT /bench/a HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/octet-stream\r\n"
           b"Content-Length: %d\r\n\r\n" % len(BODY)) + BODY
CONNECTIONS = 16
APPENDS = 32_000


class CountingTransport:
    """What FrontConnection calls on a transport; writes are counted, not sent."""

    def __init__(self) -> None:
        self.answers = 0

    def write(self, data: bytes) -> None:
        self.answers += 1

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Journal:
    """A journal that queues each append's answer for the probe to give."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.spec = types.SimpleNamespace(name="bench/a", flags=0, max_append_rate=0)
        self.loop, self.pending = loop, []
        self.commit = AppendCommit(0, len(BODY), "a" * 40, LabelSet(), len(BODY), None)  # type: ignore[arg-type]

    def append_nowait(self, body: bytes, answer=None):
        """Either interface: an answer called with the commit (True: queued), or a
        future returned (checkouts before `herald.broker.group.CalledAnswer`)."""
        if answer is not None:
            self.pending.append(answer)
            return True
        future = self.loop.create_future()
        self.pending.append(future.set_result)
        return future


async def _cpu_us_per_append() -> float:
    loop = asyncio.get_running_loop()
    journal = _Journal(loop)
    settings = types.SimpleNamespace(max_header_bytes=8190, max_append_bytes=1 << 26, idle_timeout_s=60.0,
                                     body_timeout_s=60.0)
    broker = types.SimpleNamespace(settings=settings, auth_keys=None, stopping=asyncio.Event(),
                                   local_journal=lambda name, need_primary: journal,
                                   append_rates=AppendRates(0))
    front = Frontage(broker, lambda: None)
    connections = []
    for _ in range(CONNECTIONS):
        connection, transport = front.protocol(), CountingTransport()
        connection.connection_made(transport)
        connections.append((connection, transport))
    rounds = APPENDS // CONNECTIONS
    started = time.process_time()
    for _ in range(rounds):
        for connection, _ in connections:
            connection.data_received(REQUEST)
        pending, journal.pending = journal.pending, []
        for answer in pending:  # the round's outcome: each append's answer is due
            answer(journal.commit)
        await asyncio.sleep(0)  # the answers' callbacks run
    spent = time.process_time() - started
    front.close()
    answered = sum(transport.answers for _, transport in connections)
    if answered != rounds * CONNECTIONS:
        raise RuntimeError(f"{answered} answers for {rounds * CONNECTIONS} appends")
    return spent / answered * 1e6


def main() -> None:
    runs = [uvloop.run(_cpu_us_per_append()) for _ in range(3)]
    print(f"front end: {statistics.median(runs):.2f} us CPU per 1 KiB append "
          f"(runs {', '.join(f'{r:.2f}' for r in runs)})")


if __name__ == "__main__":
    main()
