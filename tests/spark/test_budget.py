"""A micro-batch's budget (`herald.spark.budget`): bytes and rows shared fairly
across journals, row budgets exact where the sample holds them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from herald.spark.budget import SAMPLE_BYTES, row_budget_ends, share_bytes, water_fill


def sampler(data: dict[str, bytes]):
    return lambda journal, lo, hi: data[journal][lo:hi]


@given(st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 1000)), st.integers(0, 5000))
def test_water_fill_grants_the_budget_or_everything_and_never_more_than_available(avail, budget):
    grant = water_fill(avail, budget)
    assert all(0 <= grant[k] <= avail[k] for k in avail)
    assert sum(grant.values()) == min(budget, sum(avail.values()))
    # Fair: a journal that got less than its share could not use more.
    for k in avail:
        if grant[k] < avail[k]:
            assert all(grant[k] >= grant[o] - 1 for o in avail if o != k) or sum(grant.values()) == budget


def test_no_byte_budget_reads_to_the_heads():
    assert share_bytes({"a": 5, "b": 0}, {"a": 9, "b": 3}, None) == {"a": 9, "b": 3}
    assert share_bytes({"a": 5, "b": 0}, {"a": 9, "b": 3}, 4) == {"a": 7, "b": 2}


@given(st.lists(st.integers(1, 40), min_size=1, max_size=200), st.integers(0, 50), st.integers(1, 300))
def test_a_row_budget_within_the_sample_ends_exactly_after_that_many_messages(sizes, skip, rows):
    lines = [b"x" * (n - 1) + b"\n" for n in sizes]
    data = b"".join(lines)
    skip = min(skip, len(lines))
    begin = sum(map(len, lines[:skip]))
    [end] = row_budget_ends({"j": begin}, {"j": len(data)}, rows, sampler({"j": data})).values()
    assert data[begin:end].count(b"\n") == min(rows, len(lines) - skip)
    assert end == len(data) or data[end - 1:end] == b"\n"


def test_beyond_the_sample_a_row_budget_is_extrapolated_and_bounded_by_the_head():
    data = b"".join(b"%09d\n" % i for i in range(3 * SAMPLE_BYTES // 10))
    [end] = row_budget_ends({"j": 0}, {"j": len(data)}, 2 * SAMPLE_BYTES // 10, sampler({"j": data})).values()
    assert end == 2 * SAMPLE_BYTES // 10 * 10  # Uniform messages: the estimate is exact.
    [end] = row_budget_ends({"j": 0}, {"j": len(data)}, 10 ** 9, sampler({"j": data})).values()
    assert end == len(data)


def test_rows_are_shared_across_journals_and_idle_journals_keep_their_offsets():
    data = {"a": b"1\n" * 10, "b": b"22\n" * 10, "c": b""}
    ends = row_budget_ends({"a": 0, "b": 0, "c": 0}, {"a": 20, "b": 30, "c": 0}, 6, sampler(data))
    assert ends == {"a": 6, "b": 9, "c": 0}


def test_a_message_longer_than_the_sample_counts_as_one_row():
    data = {"j": b"y" * (2 * SAMPLE_BYTES)}
    assert row_budget_ends({"j": 0}, {"j": len(data["j"])}, 1, sampler(data)) == {"j": len(data["j"])}
