"""The vectorised Sequencer (`sequence_block`) against the per-message one.

Same histories as test_sequencer_exactly_once (transactions, duplicates,
rollbacks, zombies, producers whose clocks start behind others), scanned into
blocks of any size: both paths must yield the same envelopes in the same order
and leave the same checkpoint, and the bulk path alone must keep [I-SEQ-1].
"""

from __future__ import annotations

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from herald.message import ACK_TXN, Checkpoint, Envelope, NDJSONFraming, Sequencer, get_flags, sequence
from herald.message.columnar import Columns, scan_ndjson, uuid_fields
from herald.message.sequencing import plan_bulk, sequence_block
from tests.message.test_sequencer_exactly_once import History, J, actions, envelopes

NDJSON = NDJSONFraming()
common = st.lists(st.tuples(st.sampled_from(["cont", "ack", "out"]), st.integers(0, 2), st.integers(1, 3)),
                  max_size=45)
# "mixed": a committed message while the producer's transaction is open (a misuse
# the Sequencer logs and resolves by dropping the open span).
misuse = st.lists(st.tuples(st.sampled_from(["cont", "ack", "out", "mixed", "dup"]), st.integers(0, 2),
                            st.integers(1, 3)), max_size=45)


def replayer(envs: list[Envelope]):
    def replay(journal: str, begin: int, end: int):
        return [e for e in envs if e.begin >= begin and e.end <= end]
    return replay


def exact(envs: list[Envelope], ring_size: int, include_acks: bool) -> tuple[list[Envelope], Sequencer]:
    seq = Sequencer(ring_size=ring_size)
    return list(sequence(envs, seq, replayer(envs), include_acks)), seq


def blocks(journal: bytes, cuts: list[int]) -> list[Columns]:
    """The journal scanned in blocks cut after the given line numbers."""
    out, base, lines = [], 0, journal.splitlines(keepends=True)
    for lo, hi in zip([0, *sorted(set(cuts))], [*sorted(set(cuts)), len(lines)]):
        chunk = b"".join(lines[lo:hi])
        if chunk:
            cols, used = scan_ndjson(chunk, base, NDJSON)
            assert used == len(chunk)
            out.append(cols)
            base += used
    return out


def bulk(journal: bytes, cuts: list[int], ring_size: int, include_acks: bool,
         envs: list[Envelope]) -> tuple[list[Envelope], Sequencer]:
    seq, out = Sequencer(ring_size=ring_size), []
    for cols in blocks(journal, cuts):
        for item in sequence_block(J, cols, seq, replayer(envs), include_acks):
            out += [cols.envelope(J, int(i)) for i in item] if isinstance(item, np.ndarray) else [item]
    return out, seq


def history(steps) -> tuple[History, bytes]:
    h = History()
    for kind, slot, count in steps:
        if kind == "mixed":
            h.appends.append(h.cores[slot].stamp_committed(J, NDJSON, {"m": "mixed"}))
        else:
            h.apply(kind, slot, count)
    return h, b"".join(h.appends)


def checkpoint(seq: Sequencer) -> dict:
    offsets, states = seq.checkpoint(0)
    return Checkpoint(offsets, tuple(states)).to_dict()


@settings(max_examples=400, deadline=None)
@given(st.one_of(actions, common, misuse), st.integers(1, 6), st.lists(st.integers(0, 120), max_size=4),
       st.booleans())
def test_bulk_and_per_message_paths_yield_the_same_envelopes_and_checkpoint(steps, ring_size, cuts, include_acks):
    _, journal = history(steps)
    envs = envelopes(journal)
    want, want_seq = exact(envs, ring_size, include_acks)
    got, got_seq = bulk(journal, cuts, ring_size, include_acks, envs)
    assert got == want
    assert checkpoint(got_seq) == checkpoint(want_seq)


@settings(max_examples=300, deadline=None)
@given(st.one_of(actions, common), st.integers(1, 6), st.lists(st.integers(0, 120), max_size=4))
def test_bulk_path_yields_each_committed_message_once_in_producer_order(steps, ring_size, cuts):
    h, journal = history(steps)
    out, _ = bulk(journal, cuts, ring_size, True, envelopes(journal))
    got = [orjson.loads(e.value)["m"] for e in out if get_flags(e.uuid) != ACK_TXN]
    assert sorted(got) == sorted(h.committed)
    for slot in range(3):
        for gen in range(h.gen[slot] + 1):
            mine = f"s{slot}g{gen}m"
            assert [m for m in got if m.startswith(mine)] == [m for m in h.committed if m.startswith(mine)]


def test_common_case_is_decided_in_bulk_up_to_the_last_commit():
    """Guard against a vacuous property: transactions and committed messages are
    planned in bulk; a span still open at the block's end is left to the Sequencer."""
    _, journal = history([("cont", 0, 3), ("out", 1, 2), ("cont", 2, 2), ("ack", 0, 1), ("ack", 2, 1),
                          ("cont", 1, 1), ("ack", 1, 1), ("cont", 0, 2)])
    cols, _ = scan_ndjson(journal, 0, NDJSON)
    producers, clocks, flags = uuid_fields(cols.uuids)
    plan = plan_bulk(producers, clocks, flags, cols.has_uuid, lambda p: None)
    assert plan.prefix == len(cols) - 2  # The open span at the end waits for its ACK.
    want, _ = exact(envelopes(journal)[:plan.prefix], 8, True)
    assert [cols.envelope(J, int(i)) for i in plan.order] == want
