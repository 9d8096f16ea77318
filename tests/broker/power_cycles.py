"""One power cut under a running broker, as the broker power-loss tests make it:
even cycles stop the broker wherever it is first (mid-append, mid-persist…), odd
ones cut the power during the next write anyone makes; then the broker is gone
(``kill -9``), as after a real outage."""

from __future__ import annotations

import os
import signal

from herald.testing import BrokerProcess
from herald.testing.powercut import CutReport, PowerCut


def cut_under(broker: BrokerProcess, powercut: PowerCut, cycle: int) -> CutReport:
    """Cut ``powercut``'s power under ``broker`` the way ``cycle`` calls for, and
    kill the broker; what the cut dropped."""
    if cycle % 2 == 0:
        os.killpg(broker.proc.pid, signal.SIGSTOP)
    report = powercut.cut(mid_write=cycle % 2 == 1)
    broker.kill()
    return report
