"""Test helpers as a product (a pytest plugin users can load too).

``herald.testing.plugin`` provides fixtures: ``broker`` (a real ``herald serve``
process on a free loopback port, in a temp data dir) and ``broker_factory`` for
tests that need to kill, restart or share a fragment root, and ``powercut`` (a FUSE
file system whose `PowerCut.cut` drops what was never fsynced), ``spark`` (one
local session) and ``spark_cluster`` (a standalone master and two workers as
separate processes, apps submitted with ``spark-submit``: `herald.testing.spark_cluster`). `make_journals` and
`Producer` set up journals and messages; every wait (`wait_until`,
`wait_persisted`, `wait_for_route`) has a deadline and fails loudly.
"""

from herald.testing.broker import (
    READY_PREFIX,
    BrokerProcess,
    apply_specs,
    journal_spec,
    journals_state,
    seed_journal,
)
from herald.testing.messages import Producer, make_journals
from herald.testing.powercut import CutReport, PowerCut
from herald.testing.waiting import wait_for_route, wait_persisted, wait_until

__all__ = ["READY_PREFIX", "BrokerProcess", "CutReport", "PowerCut", "Producer", "apply_specs", "journal_spec",
           "journals_state", "make_journals", "seed_journal", "wait_for_route", "wait_persisted", "wait_until"]
