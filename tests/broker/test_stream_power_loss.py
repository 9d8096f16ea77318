"""Streamed appends across power cuts [I-APPEND-3] [I-FRAG-2].

A streamed body's commit line is written and synced as soon as its SHA1 is whole,
beside its data's sync, and its pages are sent to the device while it arrives
(`herald.fragment.spool_stream`). On `herald.testing.powercut`, which drops every
write not fsynced, a writer streams large bodies; the broker is stopped wherever it
is (or the power cut during its next write), the broker killed and restarted: every
acknowledged body must be there, once, where its ack said, and nothing after the
last one but bodies that were under way (never acknowledged) [I-APPEND-2].
"""

from __future__ import annotations

import threading

import httpx
import pytest

from herald.testing import BrokerProcess, apply_specs, journal_spec
from tests.broker.power_cycles import cut_under
from tests.broker.test_append_stream import body, content, streamed

pytestmark = pytest.mark.slow

JOURNAL = "power/stream"
CYCLES = 3
ACKS_PER_CYCLE = 12
#: Streamed (over 256 KiB), and large enough that its write-back starts before its
#: last piece arrives.
BODY_BYTES = 1 << 20


class StreamingWriter:
    """A thread appending `BODY_BYTES` bodies until its broker dies; ``acks`` holds each
    acknowledged one as ``(begin, end, body)``."""

    def __init__(self, url: str, cycle: int) -> None:
        self.url, self.cycle = url, cycle
        self.acks: list[tuple[int, int, bytes]] = []
        self.enough = threading.Event()
        self.refused: list[str] = []
        self.cutting = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as http:
            for seq in range(1_000_000):
                data = body(f"c{self.cycle} s{seq}", BODY_BYTES)
                try:
                    resp = http.put(f"/{JOURNAL}", content=data)
                except httpx.TransportError:
                    return  # the broker was stopped or killed: this one may or may not have landed
                if resp.status_code != 204:
                    if not self.cutting.is_set():
                        self.refused.append(f"{resp.status_code} {resp.text}")
                    return
                self.acks.append((int(resp.headers["X-Commit-Begin"]), int(resp.headers["X-Commit-End"]), data))
                if len(self.acks) >= ACKS_PER_CYCLE:
                    self.enough.set()

    def join(self) -> None:
        self._thread.join(60)
        assert not self._thread.is_alive(), "the writer did not stop after its broker was killed"


def test_acknowledged_streamed_appends_survive_power_cuts(powercut):
    broker = BrokerProcess(powercut.mount / "data", powercut.mount / "fragments")
    acks: list[tuple[int, int, bytes]] = []
    try:
        broker.start()
        apply_specs(broker.url, journal_spec(JOURNAL, length=64 << 20))
        assert httpx.put(f"{broker.url}/{JOURNAL}", content=b"seed\n", timeout=30).status_code == 204
        for cycle in range(CYCLES):
            writer = StreamingWriter(broker.url, cycle)
            assert writer.enough.wait(120), f"cycle {cycle}: appends stalled {writer.refused}"
            assert streamed(broker, "committed") > 0, "no body was streamed: this proved nothing"
            # Odd cycles: the cut lands during its next write (a body's piece, a line
            # written ahead…).
            report = cut_under(broker, powercut, cycle, writer)
            assert not writer.refused
            acks += writer.acks
            print(f"cycle {cycle}: acks={len(writer.acks)} dropped {report}")
            powercut.start()
            broker.start()  # on what the disk kept
            kept = content(broker, JOURNAL)
            lost = [(begin, end) for begin, end, data in acks if kept[begin:end] != data]
            assert not lost, f"{len(lost)} acknowledged streamed appends lost, first at {lost[0]}"
            assert kept.count(b"seed\n") == 1 and len(kept) >= max(end for _, end, _ in acks)
    finally:
        broker.kill()
    assert any(r.unsynced_bytes for r in powercut.reports), "the cuts dropped nothing: this proved nothing"
