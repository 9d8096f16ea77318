"""[I-SEQ-1]: for any at-least-once history, a read-committed reader yields every
committed message exactly once, in each producer's order, and no rolled-back one.

Histories are written with PublisherCore + NDJSON framing into one journal (a byte
string), decoded back into envelopes, and read through a Sequencer whose ring is
often smaller than a transaction (so replays from the journal happen) and which
may crash and restore from a JSON checkpoint at any step, even mid-dequeue.
"""

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from herald.message import (
    ACK_TXN,
    Checkpoint,
    Clock,
    Envelope,
    NDJSONFraming,
    ProducerID,
    PublisherCore,
    QueueOutcome,
    Sequencer,
    get_flags,
)

J = "journal/a"
NDJSON = NDJSONFraming()
N_SLOTS = 3

actions = st.lists(
    st.tuples(
        st.sampled_from(["cont", "cont", "ack", "out", "dup", "dup", "crash", "crash_after_commit", "zombie"]),
        st.integers(0, N_SLOTS - 1),
        st.integers(1, 3),  # Messages per append.
    ),
    max_size=45,
)


class History:
    """Producers appending to one journal, and the messages that truly commit."""

    def __init__(self) -> None:
        self.appends: list[bytes] = []
        self.committed: list[str] = []
        self.gen = [0] * N_SLOTS
        self.cores = [self._core(s) for s in range(N_SLOTS)]
        self.open: list[list[str]] = [[] for _ in range(N_SLOTS)]
        self.last_append: list[bytes | None] = [None] * N_SLOTS
        self.last_ack: list[bytes | None] = [None] * N_SLOTS
        self.retired: list[PublisherCore] = []
        self.n = 0

    def _core(self, slot: int) -> PublisherCore:
        pid = ProducerID.new(bytes([slot << 1, self.gen[slot], 0xAA, 3, 4, 5]))  # Distinct per instance.
        # Producers' clocks are unrelated: some start behind others.
        return PublisherCore(pid, Clock(((slot * 7 + self.gen[slot] * 3) % 5 + 1) << 20))

    def _append(self, slot: int, data: bytes) -> None:
        self.appends.append(data)
        self.last_append[slot] = data

    def _bodies(self, slot: int, count: int) -> list[str]:
        ids = []
        for _ in range(count):
            self.n += 1
            ids.append(f"s{slot}g{self.gen[slot]}m{self.n}")
        return ids

    def apply(self, kind: str, slot: int, count: int) -> None:
        core = self.cores[slot]
        if kind == "cont" or (kind == "out" and self.open[slot]):
            ids = self._bodies(slot, count)
            self._append(slot, b"".join(core.stamp_uncommitted(J, NDJSON, {"m": i}) for i in ids))
            self.open[slot] += ids
        elif kind == "out":
            ids = self._bodies(slot, count)
            self._append(slot, b"".join(core.stamp_committed(J, NDJSON, {"m": i}) for i in ids))
            self.committed += ids
        elif kind in ("ack", "crash_after_commit"):
            for intent in core.build_ack_intents():
                self._append(slot, intent.data)
                self.last_ack[slot] = intent.data
            self.committed += self.open[slot]
            self.open[slot] = []
            if kind == "crash_after_commit":
                self._retire(slot)
        elif kind == "dup" and self.last_append[slot] is not None:
            self.appends.append(self.last_append[slot])  # An append retried after an ambiguous failure.
        elif kind == "crash":
            # Recovery re-appends the last checkpointed ACK verbatim: rolls back the open txn.
            if self.last_ack[slot] is not None:
                self._append(slot, self.last_ack[slot])
            self.open[slot] = []
            self._retire(slot)
        elif kind == "zombie" and self.retired:
            # A fenced-off zombie keeps publishing uncommitted messages nobody will ACK.
            zombie = self.retired[count % len(self.retired)]
            self.appends.append(zombie.stamp_uncommitted(J, NDJSON, {"m": "zombie"}))

    def _retire(self, slot: int) -> None:
        self.retired.append(self.cores[slot])
        self.gen[slot] += 1
        self.cores[slot] = self._core(slot)
        self.last_append[slot] = self.last_ack[slot] = None


def envelopes(journal: bytes) -> list[Envelope]:
    dec = NDJSON.decoder()
    frames = dec.feed(journal, 0)
    dec.end()
    return [Envelope(J, f.begin, f.end, f.uuid, f.value) for f in frames]


def read_committed(envs: list[Envelope], ring_size: int, crash_at: set[int]) -> list[Envelope]:
    """Read the whole journal; at each step number in ``crash_at``, checkpoint,
    forget everything else, and resume from the checkpoint (as a consumer does)."""
    seq, out, steps = Sequencer(ring_size=ring_size), [], 0
    i = 0
    while i < len(envs):
        outcome = seq.queue_uncommitted(envs[i])
        i += 1
        if outcome is QueueOutcome.ACK_COMMIT_REPLAY:
            _, begin, end = seq.replay_range()
            seq.start_replay([e for e in envs if e.begin >= begin and e.end <= end])
        while True:
            steps += 1
            if steps in crash_at:
                if seq.dequeued is not None:
                    out.pop()  # Handed out but not yet processed: it is redone.
                offsets, states = seq.checkpoint(0)
                cp = Checkpoint.from_dict(orjson.loads(orjson.dumps(Checkpoint(offsets, tuple(states)).to_dict())))
                seq = Sequencer.from_checkpoint(cp, ring_size)
                i = next((k for k, e in enumerate(envs) if e.begin >= cp.offsets.get(J, 0)), len(envs))
                break
            if not seq.step():
                break
            out.append(seq.dequeued)
    return out


@settings(max_examples=400, deadline=None)
@given(actions, st.integers(1, 6), st.sets(st.integers(1, 150), max_size=3))
def test_read_committed_yields_each_committed_message_once_in_producer_order(history, ring_size, crash_at):
    h = History()
    for kind, slot, count in history:
        h.apply(kind, slot, count)
    out = read_committed(envelopes(b"".join(h.appends)), ring_size, crash_at)

    got = [orjson.loads(e.value)["m"] for e in out if get_flags(e.uuid) != ACK_TXN]
    assert sorted(got) == sorted(h.committed)  # Each committed message once; nothing else.
    for slot in range(N_SLOTS):
        for gen in range(h.gen[slot] + 1):
            mine = f"s{slot}g{gen}m"
            assert [m for m in got if m.startswith(mine)] == [m for m in h.committed if m.startswith(mine)]


def test_history_exercises_replays_rollbacks_and_duplicates():
    """Guard against a vacuous property: one fixed history hits the interesting outcomes."""
    h = History()
    for step in [("cont", 0, 3), ("cont", 1, 2), ("dup", 0, 1), ("cont", 0, 2), ("ack", 1, 1), ("ack", 0, 1),
                 ("cont", 0, 2), ("crash", 0, 1), ("zombie", 0, 1), ("out", 2, 2), ("dup", 2, 1)]:
        h.apply(*step)
    envs = envelopes(b"".join(h.appends))
    seq, outcomes = Sequencer(ring_size=2), set()
    for env in envs:
        outcome = seq.queue_uncommitted(env)
        outcomes.add(outcome)
        if outcome is QueueOutcome.ACK_COMMIT_REPLAY:
            _, b, e = seq.replay_range()
            seq.start_replay([x for x in envs if x.begin >= b and x.end <= e])
        while seq.step():
            pass
    assert {QueueOutcome.ACK_COMMIT_REPLAY, QueueOutcome.ACK_ROLLBACK, QueueOutcome.CONTINUE_TXN_CLOCK_LARGER,
            QueueOutcome.OUTSIDE_ALREADY_ACKED, QueueOutcome.OUTSIDE_COMMIT} <= outcomes
    assert read_committed(envs, 2, set()) and h.committed
