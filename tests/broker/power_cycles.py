"""One power cut under a running broker, as the broker power-loss tests make it:
even cycles stop the broker wherever it is first (mid-append, mid-persist…), odd
ones cut the power during the next write anyone makes; then the broker is gone
(``kill -9``), as after a real outage."""

from __future__ import annotations

import os
import signal
import threading
from typing import Protocol

from herald.testing import BrokerProcess
from herald.testing.powercut import CutReport, PowerCut


class Writers(Protocol):
    """A test's appending threads: told that the cut comes (their refusals from then
    on are expected), and joined once the broker is gone."""

    cutting: threading.Event

    def join(self) -> None: ...


def cut_under(broker: BrokerProcess, powercut: PowerCut, cycle: int, writers: Writers) -> CutReport:
    """Cut ``powercut``'s power under ``broker`` while ``writers`` append, the way
    ``cycle`` calls for, kill the broker and join the writers; what the cut dropped."""
    writers.cutting.set()
    if cycle % 2 == 0:
        os.killpg(broker.proc.pid, signal.SIGSTOP)
    report = powercut.cut(mid_write=cycle % 2 == 1)
    broker.kill()
    writers.join()
    return report
