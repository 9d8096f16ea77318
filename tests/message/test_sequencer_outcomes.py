"""Sequencer decision table and ring, ported in spirit from Gazette's
sequencer_test.go (gazette-facts §2): each case asserts outcomes, dequeued
envelopes, offsets and the tracked producer state."""

import pytest

from herald.message.checkpoint import Checkpoint, ProducerState
from herald.message.sequencer import Envelope, ReplayError, Sequencer
from herald.message.sequencer import QueueOutcome as Q
from herald.message.uuid import ACK_TXN as ACK
from herald.message.uuid import CONTINUE_TXN as CONT
from herald.message.uuid import OUTSIDE_TXN as OUT
from herald.message.uuid import ZERO_UUID, build_uuid, duration_to_clock, get_clock

J = "test/journal"
A, B, C = (bytes([0x01, 0, 0, 0, 0, n]) for n in (0xA, 0xB, 0xC))


class Gen:
    """Envelopes 100 bytes long with 2 bytes of dead space between them: the
    Sequencer must not assume contiguous envelopes."""

    def __init__(self) -> None:
        self.offset = 0

    def __call__(self, producer: bytes, clock: int, flags: int, uuid: bytes | None = b"") -> Envelope:
        u = build_uuid(producer, clock, flags) if uuid == b"" else uuid
        env = Envelope(J, self.offset, self.offset + 100, u, str(clock).encode())
        self.offset += 102
        return env


def queue(seq, *envs):
    return [seq.queue_uncommitted(e) for e in envs]


def partials(seq):
    """{producer: (begin, ring_start, ring_stop, min_clock, max_clock)}."""
    return {k[1]: (p.begin, p.ring_start, p.ring_stop, p.min_clock, p.max_clock) for k, p in seq._partials.items()}


def clock_of(env):
    return 0 if env.uuid is None else get_clock(env.uuid)


def expect_deque(seq, *expect):
    for i, env in enumerate(expect):
        assert seq.step() is True
        assert seq.dequeued == env
        assert seq._emit.begin == env.begin
        if i > 0:
            assert seq._emit.min_clock == clock_of(expect[i - 1])
    assert seq.step() is False
    assert seq.dequeued is None
    last = expect[-1]
    if clock_of(last):
        # The producer is ready for its next sequence.
        assert partials(seq)[last.producer] == (-1, -1, -1, clock_of(last), clock_of(last))
    assert seq.offsets[J] == last.end  # Read through the ACK only now.


def expect_replay(seq, begin, end, *envs):
    assert seq.replay_range() == (J, begin, end)
    seq.start_replay(list(envs))


def test_ring_add_and_evict_follows_per_producer_links():
    seq, gen = Sequencer(ring_size=5), Gen()
    e = {n: gen(A if n in (1, 3, 4) else B, n * 100, CONT) for n in range(1, 12)}
    assert not seq.has_pending()

    assert queue(seq, e[1]) == [Q.CONTINUE_BEGIN_SPAN]
    assert (seq._ring, seq._next, seq._head) == ([e[1], None, None, None, None], [-1] * 5, 1)
    assert partials(seq) == {A: (e[1].begin, 0, 0, 99, 100)}
    assert seq.has_pending() and seq.offsets == {J: e[1].end}

    assert queue(seq, e[2], e[3], e[4], e[5]) == [Q.CONTINUE_BEGIN_SPAN] + [Q.CONTINUE_EXTEND_SPAN] * 3
    assert seq._ring == [e[1], e[2], e[3], e[4], e[5]]
    assert seq._next == [2, 4, 3, -1, -1] and seq._head == 0
    assert len(seq._pending) == 2

    assert queue(seq, e[6]) == [Q.CONTINUE_EXTEND_SPAN]  # Evicts e1: A's span starts at e3.
    assert seq._ring == [e[6], e[2], e[3], e[4], e[5]] and seq._next == [-1, 4, 3, -1, 0]
    assert partials(seq) == {A: (e[1].begin, 2, 3, 99, 400), B: (e[2].begin, 1, 0, 199, 600)}

    queue(seq, e[7], e[8], e[9])  # e9 evicts A's last entry; its begin is still tracked.
    assert seq._ring == [e[6], e[7], e[8], e[9], e[5]] and seq._next == [1, 2, 3, -1, 0]
    assert partials(seq) == {A: (e[1].begin, -1, -1, 99, 400), B: (e[2].begin, 4, 3, 199, 900)}

    queue(seq, e[10], e[11])
    assert seq._ring == [e[11], e[7], e[8], e[9], e[10]] and seq._next == [-1, 2, 3, 4, 0]
    assert partials(seq) == {A: (e[1].begin, -1, -1, 99, 400), B: (e[2].begin, 1, 0, 199, 1100)}
    assert seq.offsets == {J: e[11].end}


def test_txn_sequence_cases():
    seq, gen = Sequencer(ring_size=3), Gen()

    # Duplicates inside a span are served from the ring once.
    a1, a2, a1d, a2d, a3ack = gen(A, 1, CONT), gen(A, 2, CONT), gen(A, 1, CONT), gen(A, 2, CONT), gen(A, 3, ACK)
    assert queue(seq, a1, a2, a1d, a2d, a3ack) == [
        Q.CONTINUE_BEGIN_SPAN, Q.CONTINUE_EXTEND_SPAN, Q.CONTINUE_TXN_CLOCK_LARGER,
        Q.CONTINUE_TXN_CLOCK_LARGER, Q.ACK_COMMIT_RING]
    expect_deque(seq, a1, a2, a3ack)
    assert not seq.has_pending()

    # An ACK without preceding CONTINUEs commits just itself.
    a4ack = gen(A, 4, ACK)
    assert queue(seq, a4ack) == [Q.ACK_EMPTY]
    expect_deque(seq, a4ack)

    # A partial ACK: a7 has a larger clock than the ACK and is dropped.
    a5, a7, a6ack = gen(A, 5, CONT), gen(A, 7, CONT), gen(A, 6, ACK)
    assert queue(seq, a5, a7, a6ack) == [Q.CONTINUE_BEGIN_SPAN, Q.CONTINUE_EXTEND_SPAN, Q.ACK_COMMIT_RING]
    expect_deque(seq, a5, a6ack)

    # Rollback (ACK clock == last ACK) with producer B interleaved.
    b1, a7r, a8r, b2, a6abort = gen(B, 1, CONT), gen(A, 7, CONT), gen(A, 8, CONT), gen(B, 2, CONT), gen(A, 6, ACK)
    assert queue(seq, a7r, b1, a7r, a8r, b2, a6abort) == [
        Q.CONTINUE_BEGIN_SPAN, Q.CONTINUE_BEGIN_SPAN, Q.CONTINUE_TXN_CLOCK_LARGER,
        Q.CONTINUE_EXTEND_SPAN, Q.CONTINUE_EXTEND_SPAN, Q.ACK_ROLLBACK]
    assert seq.step() is False and seq.has_pending()  # Nothing to dequeue; B still open.
    assert partials(seq) == {A: (-1, -1, -1, 6, 6), B: (b1.begin, 1, 1, 0, 2)}

    # B's ACK needs a replay: b1 fell out of the ring.
    b3ack = gen(B, 3, ACK)
    assert queue(seq, b3ack) == [Q.ACK_COMMIT_REPLAY]
    expect_replay(seq, b1.begin, b2.begin, b1, a7r, a8r)
    expect_deque(seq, b1, b2, b3ack)

    # Replay with duplicates from before and inside the span, in replay and ring.
    b4, b1d, b4d, b5, b6, b2d, b7, b8ack = (
        gen(B, 4, CONT), gen(B, 1, CONT), gen(B, 4, CONT), gen(B, 5, CONT),
        gen(B, 6, CONT), gen(B, 2, CONT), gen(B, 7, CONT), gen(B, 8, ACK))
    assert queue(seq, b4, b1d, b4d, b5, b6, b2d, b7, b8ack) == [
        Q.CONTINUE_BEGIN_SPAN, Q.CONTINUE_ALREADY_ACKED, Q.CONTINUE_TXN_CLOCK_LARGER, Q.CONTINUE_EXTEND_SPAN,
        Q.CONTINUE_EXTEND_SPAN, Q.CONTINUE_ALREADY_ACKED, Q.CONTINUE_EXTEND_SPAN, Q.ACK_COMMIT_REPLAY]
    expect_replay(seq, b4.begin, b6.begin, b4, b1d, b4d, b5)
    expect_deque(seq, b4, b5, b6, b7, b8ack)

    # Partial rollback where every ring entry is skipped.
    b9, b11n, b12n, b13n, b10ack = gen(B, 9, CONT), gen(B, 11, CONT), gen(B, 12, CONT), gen(B, 13, CONT), gen(B, 10, ACK)
    assert queue(seq, b9, b11n, b12n, b13n, b10ack) == [Q.CONTINUE_BEGIN_SPAN] + [Q.CONTINUE_EXTEND_SPAN] * 3 + [
        Q.ACK_COMMIT_REPLAY]
    expect_replay(seq, b9.begin, b12n.begin, b9, b11n)
    expect_deque(seq, b9, b10ack)

    # Interleaved ACKs, each needing its own replay: no head-of-line blocking.
    b11, a7, a8, b12, a9ack, b13ack = (
        gen(B, 11, CONT), gen(A, 7, CONT), gen(A, 8, CONT), gen(B, 12, CONT), gen(A, 9, ACK), gen(B, 13, ACK))
    assert queue(seq, b11, a7, a8, b12, a9ack) == [
        Q.CONTINUE_BEGIN_SPAN, Q.CONTINUE_BEGIN_SPAN, Q.CONTINUE_EXTEND_SPAN, Q.CONTINUE_EXTEND_SPAN,
        Q.ACK_COMMIT_REPLAY]
    expect_replay(seq, a7.begin, a8.begin, a7)
    expect_deque(seq, a7, a8, a9ack)
    assert seq.has_pending()
    assert queue(seq, b13ack) == [Q.ACK_COMMIT_REPLAY]
    expect_replay(seq, b11.begin, b12.begin, b11, a7, a8)
    expect_deque(seq, b11, b12, b13ack)
    assert not seq.has_pending()

    # An ACK below the last ACK resets the producer (loss of exactly-once), then clocks are reused.
    b8reset, b9reuse, b10reuse = gen(B, 8, ACK), gen(B, 9, CONT), gen(B, 10, ACK)
    assert queue(seq, b8reset, b9reuse, b10reuse) == [Q.ACK_ROLLBACK, Q.CONTINUE_BEGIN_SPAN, Q.ACK_COMMIT_RING]
    expect_deque(seq, b9reuse, b10reuse)


def test_ring_of_zero_size_replays_everything():
    seq, gen = Sequencer(ring_size=0), Gen()
    a1, a2, b1, a1d, a2d, a3ack, b2, b3ack = (
        gen(A, 1, CONT), gen(A, 2, CONT), gen(B, 1, CONT), gen(A, 1, CONT), gen(A, 2, CONT),
        gen(A, 3, ACK), gen(B, 2, CONT), gen(B, 3, ACK))
    assert queue(seq, a1, a2, b1, a1d, a2d, a3ack) == [
        Q.CONTINUE_BEGIN_SPAN, Q.CONTINUE_EXTEND_SPAN, Q.CONTINUE_BEGIN_SPAN,
        Q.CONTINUE_TXN_CLOCK_LARGER, Q.CONTINUE_TXN_CLOCK_LARGER, Q.ACK_COMMIT_REPLAY]
    expect_replay(seq, a1.begin, a3ack.begin, a1, a2, b1, a1d, a2d)
    expect_deque(seq, a1, a2, a3ack)
    assert seq.has_pending()
    assert queue(seq, b2, b3ack) == [Q.CONTINUE_EXTEND_SPAN, Q.ACK_COMMIT_REPLAY]
    expect_replay(seq, b1.begin, b3ack.begin, b1, a1d, a2d, a3ack, b2)
    expect_deque(seq, b1, b2, b3ack)


def test_outside_txn_cases():
    seq, gen = Sequencer(ring_size=0), Gen()
    a1, a2 = gen(A, 1, OUT), gen(A, 2, OUT)
    assert queue(seq, a1) == [Q.OUTSIDE_COMMIT]
    assert seq.offsets == {}  # Not read through until dequeued.
    expect_deque(seq, a1)
    assert queue(seq, a2) == [Q.OUTSIDE_COMMIT]
    expect_deque(seq, a2)

    a1d, a2d = gen(A, 1, OUT), gen(A, 2, OUT)
    assert queue(seq, a1d, a2d) == [Q.OUTSIDE_ALREADY_ACKED] * 2
    assert seq.step() is False and seq.offsets == {J: a2d.end}

    # An OUTSIDE_TXN clobbers an open CONTINUE span.
    a3, a4, a5 = gen(A, 3, CONT), gen(A, 4, CONT), gen(A, 5, OUT)
    assert queue(seq, a3, a4, a5) == [Q.CONTINUE_BEGIN_SPAN, Q.CONTINUE_EXTEND_SPAN, Q.OUTSIDE_COMMIT]
    expect_deque(seq, a5)
    assert not seq.has_pending()

    # Unknown flags are handled as OUTSIDE_TXN.
    a6, a7bad, a7bad_dup = gen(A, 6, CONT), gen(A, 7, 0x100), gen(A, 7, 0x100)
    assert queue(seq, a6, a7bad) == [Q.CONTINUE_BEGIN_SPAN, Q.OUTSIDE_COMMIT]
    expect_deque(seq, a7bad)
    assert queue(seq, a7bad_dup) == [Q.OUTSIDE_ALREADY_ACKED]

    # Zero UUIDs (or none at all) always dequeue and are not tracked.
    z1, z2 = gen(A, 0, 0, uuid=ZERO_UUID), gen(A, 0, 0, uuid=None)
    assert queue(seq, z1) == [Q.OUTSIDE_COMMIT]
    expect_deque(seq, z1)
    assert queue(seq, z2) == [Q.OUTSIDE_COMMIT]
    expect_deque(seq, z2)
    assert partials(seq) == {A: (-1, -1, -1, 7, 7)}
    assert seq.offsets == {J: z2.end}


def sorted_states(states):
    return sorted(states, key=lambda s: s.producer)


def test_producer_states_round_trip_through_checkpoint():
    seq1, gen = Sequencer(ring_size=12), Gen()
    a1, a2, b1, b2, c1ack = gen(A, 1, CONT), gen(A, 2, CONT), gen(B, 1, CONT), gen(B, 2, CONT), gen(C, 1, ACK)
    b3ack, c2, c1rollback, a3ack, z1 = gen(B, 3, ACK), gen(C, 2, CONT), gen(C, 1, ACK), gen(A, 3, ACK), gen(A, 0, 0, None)
    assert queue(seq1, a1, a2, b1, b2, c1ack) == [Q.CONTINUE_BEGIN_SPAN, Q.CONTINUE_EXTEND_SPAN,
                                                 Q.CONTINUE_BEGIN_SPAN, Q.CONTINUE_EXTEND_SPAN, Q.ACK_EMPTY]
    expect_deque(seq1, c1ack)
    assert queue(seq1, z1) == [Q.OUTSIDE_COMMIT]
    expect_deque(seq1, z1)

    assert seq1.has_pending()
    offsets, states = seq1.checkpoint(0)
    assert not seq1.has_pending()
    # Through the JSON-able form, as Spark stores it.
    restored = Checkpoint.from_dict(Checkpoint(offsets, tuple(states)).to_dict())
    seq2 = Sequencer.from_checkpoint(restored, ring_size=12)
    expect = [ProducerState(J, A, 0, a1.begin), ProducerState(J, B, 0, b1.begin), ProducerState(J, C, 1, -1)]
    assert sorted_states(states) == expect == sorted_states(seq2.checkpoint(0)[1])
    assert offsets == {J: z1.end} and not seq2.has_pending()

    # Same output from here, though seq2 must replay what seq1 holds in its ring.
    assert queue(seq1, b3ack) == [Q.ACK_COMMIT_RING]
    assert queue(seq2, b3ack) == [Q.ACK_COMMIT_REPLAY]
    expect_replay(seq2, b1.begin, b3ack.begin, b1, b2, c1ack)
    expect_deque(seq1, b1, b2, b3ack)
    expect_deque(seq2, b1, b2, b3ack)
    for seq in (seq1, seq2):
        assert queue(seq, c2, c1rollback) == [Q.CONTINUE_BEGIN_SPAN, Q.ACK_ROLLBACK]
        assert seq.step() is False
    assert queue(seq1, a3ack) == [Q.ACK_COMMIT_RING]
    assert queue(seq2, a3ack) == [Q.ACK_COMMIT_REPLAY]
    expect_replay(seq2, a1.begin, a3ack.begin, a1, a2, b1, b2, c1ack)
    expect_deque(seq1, a1, a2, a3ack)
    expect_deque(seq2, a1, a2, a3ack)


def test_checkpoint_during_dequeue_resumes_after_the_last_processed_message():
    seq1, gen = Sequencer(ring_size=12), Gen()
    a1, a2, a3ack, a4, a5, a6ack = (gen(A, 1, CONT), gen(A, 2, CONT), gen(A, 3, ACK),
                                    gen(A, 4, CONT), gen(A, 5, CONT), gen(A, 6, ACK))
    assert queue(seq1, a1, a2, a3ack) == [Q.CONTINUE_BEGIN_SPAN, Q.CONTINUE_EXTEND_SPAN, Q.ACK_COMMIT_RING]
    assert seq1.step() and seq1.dequeued == a1  # Crash before a1 is processed.
    offsets, states = seq1.checkpoint(0)
    assert offsets == {J: a2.end} and states == [ProducerState(J, A, 0, a1.begin)]
    seq2 = Sequencer(offsets, states, 12)
    assert queue(seq2, a3ack) == [Q.ACK_COMMIT_REPLAY]
    expect_replay(seq2, a1.begin, a3ack.begin, a1, a2)
    assert seq1.step() and seq1.step() and not seq1.step()
    expect_deque(seq2, a1, a2, a3ack)

    assert queue(seq1, a4, a5, a6ack) == [Q.CONTINUE_BEGIN_SPAN, Q.CONTINUE_EXTEND_SPAN, Q.ACK_COMMIT_RING]
    assert seq1.step() and seq1.step() and seq1.dequeued == a5  # a4 processed; crash.
    offsets, states = seq1.checkpoint(0)
    assert offsets == {J: a5.end} and states == [ProducerState(J, A, 4, a5.begin)]
    seq2 = Sequencer(offsets, states, 12)
    assert queue(seq2, a6ack) == [Q.ACK_COMMIT_REPLAY]
    expect_replay(seq2, a5.begin, a6ack.begin, a5)
    expect_deque(seq2, a5, a6ack)


def test_duplicates_straddling_a_checkpoint_are_dequeued_once():
    seq1, gen = Sequencer(ring_size=12), Gen()
    a1, a2, a3 = gen(A, 1, CONT), gen(A, 2, CONT), gen(A, 3, CONT)
    dups, a4ack = [gen(A, n, CONT) for n in (1, 2, 3)], gen(A, 4, ACK)
    queue(seq1, a1, a2, a3)
    seq2 = Sequencer(*seq1.checkpoint(0), 12)
    assert queue(seq1, *dups, a4ack) == [Q.CONTINUE_TXN_CLOCK_LARGER] * 3 + [Q.ACK_COMMIT_RING]
    assert queue(seq2, *dups, a4ack) == [Q.CONTINUE_EXTEND_SPAN] * 3 + [Q.ACK_COMMIT_REPLAY]
    expect_replay(seq2, a1.begin, dups[0].begin, a1, a2, a3)
    expect_deque(seq1, a1, a2, a3, a4ack)
    expect_deque(seq2, a1, a2, a3, a4ack)


def test_checkpoint_prunes_producers_older_than_the_horizon():
    seq, gen = Sequencer(ring_size=12), Gen()
    a_cont, b_cont, b_ack, c_cont = gen(A, 10 << 4, CONT), gen(B, 19 << 4, CONT), gen(B, 20 << 4, ACK), gen(C, 30 << 4, CONT)
    assert queue(seq, a_cont, b_cont, b_ack) == [Q.CONTINUE_BEGIN_SPAN, Q.CONTINUE_BEGIN_SPAN, Q.ACK_COMMIT_RING]
    expect_deque(seq, b_cont, b_ack)
    assert queue(seq, c_cont) == [Q.CONTINUE_BEGIN_SPAN]
    a = ProducerState(J, A, (10 << 4) - 1, a_cont.begin)
    b = ProducerState(J, B, 20 << 4, -1)
    c = ProducerState(J, C, (30 << 4) - 1, c_cont.begin)
    assert seq.checkpoint(duration_to_clock(20 * 100))[1] == [a, b, c]
    assert seq.checkpoint(duration_to_clock(19 * 100))[1] == [b, c]
    assert seq.checkpoint(1)[1] == [c]  # Gazette: 1 ns (a zero-tick horizon that is still "on").
    assert seq.statistics()["producers"] == 1


def replay_case(mutate):
    seq, gen = Sequencer(ring_size=0), Gen()
    b1, a2, a3ack = gen(B, 1, CONT), gen(A, 2, CONT), gen(A, 3, ACK)
    assert queue(seq, b1, a2, a3ack) == [Q.CONTINUE_BEGIN_SPAN, Q.CONTINUE_BEGIN_SPAN, Q.ACK_COMMIT_REPLAY]
    assert seq.replay_range() == (J, a2.begin, a3ack.begin)
    seq.start_replay([mutate(a2)])
    return seq


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda e: Envelope("wrong/journal", e.begin, e.end, e.uuid, e.value), r"wrong journal \(wrong/journal; expected test/journal\)"),
        (lambda e: Envelope(e.journal, e.begin - 1, e.end, e.uuid, e.value), r"wrong begin \(101; expected >= 102\)"),
        (lambda e: Envelope(e.journal, e.begin, e.end + 100, e.uuid, e.value), r"wrong end \(302; expected <= 204\)"),
    ],
)
def test_replay_outside_the_range_is_an_error(mutate, message):
    with pytest.raises(ReplayError, match=message):
        replay_case(mutate).step()


def test_replay_inside_the_range_dequeues():
    seq = replay_case(lambda e: e)
    assert seq.step() and seq.dequeued.value == b"2"


def test_misuse_is_refused():
    seq, gen = Sequencer(ring_size=0), Gen()
    a1, a2ack = gen(A, 1, CONT), gen(A, 2, ACK)
    with pytest.raises(RuntimeError):
        seq.replay_range()
    queue(seq, a1, a2ack)
    with pytest.raises(RuntimeError, match="start_replay"):
        seq.step()
    with pytest.raises(RuntimeError, match="remain to dequeue"):
        seq.queue_uncommitted(gen(B, 1, OUT))


def test_checkpoint_from_dict_names_the_bad_field():
    from herald.protocol.errors import ValidationError

    good = {"offsets": {J: 5}, "states": [{"journal": J, "producer": A.hex(), "last_ack": 1, "begin": -1}]}
    assert Checkpoint.from_dict(good).to_dict() == good
    bad = {"offsets": {J: 5}, "states": [good["states"][0] | {"producer": "xyz"}]}
    with pytest.raises(ValidationError) as exc:
        Checkpoint.from_dict(bad)
    assert exc.value.field == "checkpoint.states[0].producer"
    with pytest.raises(ValidationError) as exc:
        Checkpoint.from_dict({"offsets": {J: -2}})
    assert exc.value.field == "checkpoint.offsets[test/journal]"


def test_outcome_labels_match_gazette_metrics():
    assert [o.label for o in Q] == [
        "outsideAlreadyAcked", "outsideCommit", "continueAlreadyAcked", "continueRingClockLarger",
        "continueBeginSpan", "continueExtendSpan", "ackRollback", "ackEmpty", "ackCommitRing", "ackCommitReplay"]
    assert {o for o in Q if o.is_commit} == {Q.OUTSIDE_COMMIT, Q.ACK_EMPTY, Q.ACK_COMMIT_RING, Q.ACK_COMMIT_REPLAY}
