"""stream-sum's pure parts: the running digest's state round trip, chunk parsing
(hostile input named by field), and the verifier's judgement of sums."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herald.examples.stream_sum.digest import RunningDigest, file_digest
from herald.examples.stream_sum.messages import Chunk, Reject, Sum, chunk_body, parse_chunk, parse_output
from herald.examples.stream_sum.verify import Verifier, percentile

chunk_lists = st.lists(st.binary(min_size=0, max_size=64), max_size=12)


@given(chunk_lists, st.data())
def test_a_digest_restored_from_its_state_at_any_chunk_ends_with_the_same_sum(chunks, data):
    cut = data.draw(st.integers(0, len(chunks)))
    digest = RunningDigest.start("file-1")
    for chunk in chunks[:cut]:
        digest = digest.fold(chunk)
    # What the state store keeps, through JSON as a checkpoint would carry it.
    restored = RunningDigest.from_state(*json.loads(json.dumps(digest.state())))
    for chunk in chunks[cut:]:
        restored = restored.fold(chunk)
    assert restored.hexdigest() == file_digest("file-1", chunks)
    assert restored.chunks == len(chunks)


@given(st.lists(st.binary(min_size=1, max_size=16), min_size=2, max_size=8, unique=True))
def test_a_lost_repeated_or_reordered_chunk_changes_the_sum(chunks):
    right = file_digest("f", chunks)
    assert file_digest("f", chunks[1:]) != right
    assert file_digest("f", [*chunks, chunks[-1]]) != right
    assert file_digest("f", [chunks[1], chunks[0], *chunks[2:]]) != right
    assert file_digest("g", chunks) != right  # a sum cannot pass for another file's
    assert file_digest("f", [chunks[0] + chunks[1], *chunks[2:]]) != right  # nor another cut


@pytest.mark.parametrize("state", [("00" * 31, 1), ("zz" * 32, 1), ("00" * 32, -1)])
def test_a_state_that_is_not_a_digest_is_refused(state):
    with pytest.raises(ValueError):
        RunningDigest.from_state(*state)


def test_a_chunk_round_trips():
    assert parse_chunk(chunk_body("f", 2, b"\x00\xffdata", False)) == Chunk("f", 2, b"\x00\xffdata", False)


@pytest.mark.parametrize(("value", "field"), [
    (b"[1, 2]", "not a JSON object"),
    (b"{not json", "not JSON"),
    (b'{"seq": 0, "data": "", "end": true}', "id:"),
    (b'{"id": 7, "seq": 0, "data": "", "end": true}', "id:"),
    (b'{"id": "f", "seq": "0", "data": "", "end": true}', "seq:"),
    (b'{"id": "f", "seq": -1, "data": "", "end": true}', "seq:"),
    (b'{"id": "f", "seq": 0, "data": "", "end": "yes"}', "end:"),
    (b'{"id": "f", "seq": 0, "data": "!!", "end": false}', "data:"),
    (b'{"id": "f", "seq": 0, "data": 12, "end": false}', "data:"),
])
def test_a_malformed_chunk_is_named_by_its_field(value, field):
    reason = parse_chunk(value)
    assert isinstance(reason, str) and reason.startswith(field)


def test_the_summers_messages_parse():
    assert parse_output(b'{"id": "f", "sum": "ab", "chunks": 2}') == Sum("f", "ab", 2)
    assert parse_output(b'{"rejected": "data: x", "journal": "j", "offset": 9}') == Reject("data: x", "j", 9)
    assert parse_output(b'{"something": "else"}') is None


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _verifier(clock: Clock, reports: list[str]) -> Verifier:
    """A verifier not reading any journal: its sums are fed by the test."""
    return Verifier(client=None, sums=[], nonce="n-", sum_timeout_s=10, report=reports.append,  # type: ignore[arg-type]
                    clock=clock)


def test_the_verifier_flags_duplicate_wrong_unknown_and_late_sums_and_times_the_right_one():
    clock, reports = Clock(), []
    v = _verifier(clock, reports)
    for name in ("n-a", "n-b", "n-c"):
        v.expect(name, file_digest(name, [b"x"]), 1)
        v.acked(name)
    clock.now += 2
    v._observe("sums", 0, Sum("n-a", file_digest("n-a", [b"x"]), 1))
    v._observe("sums", 10, Sum("n-a", file_digest("n-a", [b"x"]), 1))   # again
    v._observe("sums", 20, Sum("n-b", file_digest("n-b", [b"y"]), 1))   # wrong
    v._observe("sums", 30, Sum("n-z", "00", 0))                         # never ended
    v._observe("sums", 40, Sum("other-run", "00", 0))                   # another run's: ignored
    v._observe("sums", 50, Reject("data: not valid base64", "chunks/part-001", 77, "n-q"))
    clock.now += 20
    v.check_timeouts()
    v.check_timeouts()  # a file times out once
    v._observe("sums", 60, Sum("n-c", file_digest("n-c", [b"x"]), 1))   # after its timeout: no second violation
    v.expect("n-d", file_digest("n-d", [b"x"]), 1)
    v.acked("n-d")
    clock.now += 11
    v._observe("sums", 70, Sum("n-d", file_digest("n-d", [b"x"]), 1))   # late, before any timeout check
    figures = v.figures()
    assert [x.split(":")[0] for x in figures.violations] == ["n-a", "n-b", "n-z", "n-b", "n-c", "n-d"]
    assert "over 10s" in figures.violations[-1]
    assert any(r.startswith("late sum: n-c") for r in reports)
    assert "second sum" in figures.violations[0] and "wrong sum" in figures.violations[1]
    assert "at sums offset 10" in figures.violations[0]
    assert (figures.files_ended, figures.files_verified, figures.rejected) == (4, 3, 1)
    assert (figures.p50_s, figures.p99_s) == (11.0, 22.0)  # of 2, 22 and 11 s
    assert "rejected chunk: chunks/part-001 offset 77: data: not valid base64" in reports


def test_percentile_is_nearest_rank():
    assert percentile([], 99) == 0.0
    assert percentile([float(i) for i in range(1, 101)], 99) == 99.0
    assert percentile([1.0, 2.0], 50) == 1.0
