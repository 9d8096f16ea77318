"""Power loss, as a tested property [I-APPEND-3] [I-FRAG-2] (issue 19 §5).

A broker's data dir and its file fragment store both live on `herald.testing.powercut`,
a file system that drops on a cut every write not fsynced and every directory entry
whose directory was not fsynced. Writers append; the broker is killed with ``kill -9``
and the power cut, again and again; after each cut the broker must restart on what
the disk kept and serve every acknowledged append, once, where its ack said — the
spools' bytes recovered from the broker's commit log, the one file a round syncs.
"""

from __future__ import annotations

import collections
import random
import threading
from dataclasses import dataclass

import httpx
import pytest

from herald.testing import BrokerProcess, apply_specs, journal_spec
from tests.broker.power_cycles import cut_under

pytestmark = pytest.mark.slow

JOURNALS = ["power/a", "power/b", "power/c", "power/d"]  # rounds of several groups: the commit log
WRITERS = 4
CYCLES = 5
FRAGMENT_BYTES = 8 << 10  # small fragments: spools roll, persist and are deleted throughout


@dataclass(frozen=True, slots=True)
class Ack:
    journal: str
    begin: int
    end: int
    body: bytes


class Writers:
    """Threads appending unique lines until the broker dies; ``acks`` holds every
    append the broker acknowledged (204 with its X-Commit-Begin/End)."""

    def __init__(self, url: str, cycle: int, until_acks: int) -> None:
        self.url, self.cycle, self.until_acks = url, cycle, until_acks
        self.acks: list[Ack] = []
        self.cutting = threading.Event()
        self.refused_before_cut: list[str] = []
        self.enough = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(w,), daemon=True) for w in range(WRITERS)]

    def start(self) -> Writers:
        for thread in self._threads:
            thread.start()
        return self

    def _run(self, writer: int) -> None:
        rng = random.Random(f"{self.cycle}/{writer}")
        with httpx.Client(base_url=self.url, timeout=30) as http:
            for seq in range(1_000_000):
                journal = JOURNALS[seq % len(JOURNALS)]
                body = f"c{self.cycle} w{writer} s{seq} ".encode() + b"x" * rng.randint(0, 300) + b"\n"
                try:
                    resp = http.put(f"/{journal}", content=body)
                except httpx.TransportError:
                    return  # the broker was killed: this append may or may not have landed
                if resp.status_code != 204:  # not acknowledged: fine once its disk is gone
                    if not self.cutting.is_set():
                        self.refused_before_cut.append(f"{resp.status_code} {resp.text}")
                    return
                self._record(Ack(journal, int(resp.headers["X-Commit-Begin"]),
                                 int(resp.headers["X-Commit-End"]), body))

    def _record(self, ack: Ack) -> None:
        with self._lock:
            self.acks.append(ack)
            if len(self.acks) >= self.until_acks:
                self.enough.set()

    def join(self) -> None:
        for thread in self._threads:
            thread.join(30)
            assert not thread.is_alive(), "a writer did not stop after its broker was killed"


def check_every_ack(broker: BrokerProcess, acks: list[Ack]) -> None:
    """Every acknowledged append is present at its offsets, and no line twice."""
    with broker.client() as http:
        for journal in JOURNALS:
            resp = http.get(f"/{journal}")
            content = resp.content if resp.status_code == 206 else b""
            lost = [a for a in acks if a.journal == journal and content[a.begin:a.end] != a.body]
            assert not lost, f"{journal}: {len(lost)} acknowledged appends lost, first {lost[0]}"
            twice = [line for line, n in collections.Counter(content.splitlines()).items() if n > 1]
            assert not twice, f"{journal}: appended more than once: {twice[:3]}"


def test_acknowledged_appends_survive_kill_9_and_power_cuts(powercut):
    rng = random.Random(19)
    broker = BrokerProcess(powercut.mount / "data", powercut.mount / "fragments")
    acks: list[Ack] = []
    replays: list[str] = []
    try:
        broker.start()
        apply_specs(broker.url, *(journal_spec(j, length=FRAGMENT_BYTES) for j in JOURNALS))
        for cycle in range(CYCLES):
            writers = Writers(broker.url, cycle, until_acks=rng.randint(150, 400)).start()
            assert writers.enough.wait(60), f"cycle {cycle}: appends stalled {writers.refused_before_cut}"
            # The power goes: the disk forgets what was never fsynced, then the broker
            # is gone (kill -9).
            report = cut_under(broker, powercut, cycle, writers)
            assert not writers.refused_before_cut
            acks += writers.acks
            print(f"cycle {cycle}: acks={len(writers.acks)} dropped {report}")
            powercut.start()
            broker.stderr_lines.clear()
            broker.start()     # it must start on what the disk kept…
            check_every_ack(broker, acks)  # …and have lost nothing it acknowledged
            # Rounds sync only the commit log, never the spools: the restart found
            # the acknowledged bytes by replaying it (herald.fragment.commit_log).
            replays += [line for line in broker.stderr_lines if "commit log records" in line]
    finally:
        broker.kill()
    dropped = powercut.reports
    print(f"power loss: cycles={CYCLES} acks={len(acks)} lost=0 "
          f"unsynced_bytes={[r.unsynced_bytes for r in dropped]} "
          f"unsynced_entries={[r.unsynced_entries for r in dropped]}")
    assert any(r.unsynced_bytes for r in dropped) and any(r.unsynced_entries for r in dropped), \
        "the cuts dropped nothing: this run proved nothing about fsync"
    assert replays, "no restart replayed the commit log: this run proved nothing about it"
