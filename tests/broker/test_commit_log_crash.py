"""kill -9 under concurrent appends to many journals, with the broker-wide commit log
(`herald.fragment.commit_log`) the only file a round syncs: the restart replays the
log into the spools, then every acknowledged append reads back byte-exact where its
acknowledgement said [I-FRAG-2], and nothing appears that no writer sent or that
was refused [I-APPEND-2]. Also with one writer on one journal: its rounds hold one
small group each, logged too (`herald.fragment.commit_log.LONE_BYTES`)."""

from __future__ import annotations

import collections
import threading

import httpx
import pytest

from herald.testing import apply_specs, journal_spec

JOURNALS = [f"crashlog/j{i:02d}" for i in range(16)]
WRITERS = 8


class Writers:
    """Threads appending unique lines round-robin over the journals until the broker
    dies; ``acked`` holds (journal, begin, body) of every 204, ``sent`` every body."""

    def __init__(self, url: str, until: int, journals: list[str], writers: int) -> None:
        self.url, self.until, self.journals = url, until, journals
        self.acked: list[tuple[str, int, bytes]] = []
        self.sent: set[bytes] = set()
        self.enough = threading.Event()
        self.refused: list[str] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(w,), daemon=True) for w in range(writers)]
        for thread in self._threads:
            thread.start()

    def _run(self, writer: int) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as http:
            for seq in range(1_000_000):
                journal = self.journals[(writer + seq) % len(self.journals)]
                body = f"w{writer} s{seq} ".encode() + b"x" * (seq % 97) + b"\n"
                with self._lock:
                    self.sent.add(body)
                try:
                    resp = http.put(f"/{journal}", content=body)
                except httpx.TransportError:
                    return  # killed: this one may or may not have landed
                if resp.status_code != 204:
                    self.refused.append(f"{resp.status_code} {resp.text}")
                    return
                with self._lock:
                    self.acked.append((journal, int(resp.headers["X-Commit-Begin"]), body))
                    if len(self.acked) >= self.until:
                        self.enough.set()

    def join(self) -> None:
        for thread in self._threads:
            thread.join(30)
            assert not thread.is_alive()


@pytest.mark.parametrize(("journals", "count", "until"), [(JOURNALS, WRITERS, 3000), (JOURNALS[:1], 1, 1000)],
                         ids=["many-journals", "one-writer"])
def test_kill_9_under_appends_replays_the_log(broker, journals, count, until):
    apply_specs(broker.url, *(journal_spec(j) for j in journals))
    writers = Writers(broker.url, until, journals, count)
    assert writers.enough.wait(120), f"appends stalled: {writers.refused[:3]}"
    broker.kill()  # kill -9, mid-round
    writers.join()
    assert not writers.refused
    broker.stderr_lines.clear()
    broker.start()
    assert any("replayed" in line and "commit log records" in line for line in broker.stderr_lines), \
        "the restart replayed no commit log: this run proved nothing about it"
    with broker.client() as http:
        for journal in journals:
            resp = http.get(f"/{journal}")
            content = resp.content if resp.status_code == 206 else b""
            acked = [(begin, body) for j, begin, body in writers.acked if j == journal]
            lost = [(begin, body) for begin, body in acked if content[begin:begin + len(body)] != body]
            assert not lost, f"{journal}: {len(lost)} acknowledged appends lost, first {lost[0]}"
            lines = content.splitlines(keepends=True)
            assert all(line in writers.sent for line in lines), f"{journal}: bytes nobody appended"
            twice = [line for line, n in collections.Counter(lines).items() if n > 1]
            assert not twice, f"{journal}: appended more than once: {twice[:3]}"
            assert len(lines) - len(acked) <= count  # at most each writer's append in flight
