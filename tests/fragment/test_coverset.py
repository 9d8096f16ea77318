"""CoverSet and the index query rule (gazette-facts §4.7)."""

from __future__ import annotations

import ast
import inspect

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herald.fragment import coverset
from herald.fragment.coverset import OFFSET_JUMP_AGE_S, CoverSet, query
from herald.protocol.fragment import EMPTY_SUM, Fragment
from herald.protocol.journal import CompressionCodec

JOURNAL = "a/journal"
NOW = 1_800_000_000.0


def frag(begin: int, end: int, store: str = "", mod_time: float = 0) -> Fragment:
    return Fragment(JOURNAL, begin, end, EMPTY_SUM, CompressionCodec.NONE, store, mod_time)


def ranges(s: CoverSet) -> list[tuple[int, int]]:
    return [(f.begin, f.end) for f in s]


def build(*pairs: tuple[int, int]) -> CoverSet:
    s = CoverSet()
    for begin, end in pairs:
        assert s.add(frag(begin, end))
    return s


@pytest.mark.parametrize(
    ("adds", "expected"),
    [
        # Insert at end, at beginning, in the middle at exact and close boundaries.
        ([(100, 200), (200, 300), (201, 301)], [(100, 200), (200, 300), (201, 301)]),
        ([(200, 300), (300, 400), (199, 200)], [(199, 200), (200, 300), (300, 400)]),
        ([(100, 200), (300, 400), (200, 300)], [(100, 200), (200, 300), (300, 400)]),
        ([(100, 200), (300, 400), (201, 299)], [(100, 200), (201, 299), (300, 400)]),
        # Replace a range / one fragment at the end, in the middle, at the beginning.
        ([(100, 200), (200, 300), (300, 400), (400, 500), (150, 500)], [(100, 200), (150, 500)]),
        ([(100, 200), (200, 300), (199, 300)], [(100, 200), (199, 300)]),
        ([(100, 200), (200, 300), (200, 301)], [(100, 200), (200, 301)]),
        ([(100, 200), (200, 300), (300, 400), (400, 500), (150, 450)], [(100, 200), (150, 450), (400, 500)]),
        ([(100, 200), (200, 300), (300, 400), (150, 350)], [(100, 200), (150, 350), (300, 400)]),
        ([(100, 200), (200, 300), (300, 400), (100, 300)], [(100, 300), (300, 400)]),
        ([(100, 200), (200, 300), (300, 400), (99, 200)], [(99, 200), (200, 300), (300, 400)]),
        # Overlapping ranges: larger fragments win, partial overlaps stay.
        (
            [(100, 150), (149, 201), (200, 250), (250, 300), (299, 351), (350, 400),
             (200, 300), (300, 400), (100, 200)],
            [(100, 200), (149, 201), (200, 300), (299, 351), (300, 400)],
        ),
    ],
)
def test_add_keeps_the_largest_fragments(adds: list[tuple[int, int]], expected: list[tuple[int, int]]) -> None:
    assert ranges(build(*adds)) == expected


def test_add_ignores_covered_and_empty_fragments_but_replaces_equal_ranges() -> None:
    s = build((100, 200), (200, 300), (300, 400))
    for begin, end in [(101, 200), (100, 199), (201, 300), (200, 299), (301, 400), (250, 250)]:
        assert not s.add(frag(begin, end))
    remote = frag(200, 300, store="file:///", mod_time=5)
    assert s.add(remote)  # A store copy replaces the local copy of the same range.
    assert ranges(s) == [(100, 200), (200, 300), (300, 400)] and s[1] == remote


def test_begin_and_end_offsets() -> None:
    s = CoverSet()
    assert (s.begin_offset, s.end_offset) == (0, 0)
    s.add(frag(100, 150))
    s.add(frag(140, 250))
    s.add(frag(50, 100))
    assert (s.begin_offset, s.end_offset) == (50, 250)


@pytest.mark.parametrize(
    ("offset", "index", "found"),
    [(0, 0, False), (100, 0, True), (148, 0, True), (149, 1, True), (199, 1, True), (200, 2, True),
     (298, 2, True), (299, 3, True), (300, 4, True), (399, 4, True), (400, 5, False), (499, 5, False),
     (500, 5, True), (599, 5, True), (600, 6, False)],
)
def test_longest_overlapping(offset: int, index: int, found: bool) -> None:
    s = build((100, 200), (149, 201), (200, 300), (299, 351), (300, 400), (500, 600))
    assert s.longest_overlapping(offset) == (index, found)


def test_difference_drops_fragments_covered_by_the_union_of_the_other() -> None:
    b = build((100, 200), (150, 225), (225, 250), (250, 300), (301, 400))
    a = build((99, 105), (100, 110), (110, 120), (130, 210), (150, 225), (151, 300), (152, 301),
              (300, 350), (301, 360), (360, 401), (400, 450))
    assert ranges(a.difference(b)) == [(99, 105), (152, 301), (300, 350), (360, 401), (400, 450)]


spans = st.tuples(st.integers(0, 60), st.integers(0, 20)).map(lambda t: (t[0], t[0] + t[1]))


def covered(s: CoverSet) -> set[int]:
    return {o for f in s for o in range(f.begin, f.end)}


@given(st.lists(spans, max_size=25))
def test_no_fragment_contains_another_and_order_is_strict(adds: list[tuple[int, int]]) -> None:
    s = CoverSet()
    for begin, end in adds:
        s.add(frag(begin, end))
    for prev, nxt in zip(s, list(s)[1:]):
        assert prev.begin < nxt.begin and prev.end < nxt.end
    assert all(f.begin < f.end for f in s)


@given(st.lists(spans, max_size=25))
def test_coverage_never_shrinks_and_includes_each_added_fragment(adds: list[tuple[int, int]]) -> None:
    s = CoverSet()
    for begin, end in adds:
        before = covered(s)
        s.add(frag(begin, end))
        assert before | set(range(begin, end)) == covered(s)


@given(st.lists(spans, max_size=25), spans)
def test_grow_last_does_what_add_does_when_it_applies(adds: list[tuple[int, int]], grown: tuple[int, int]) -> None:
    by_add, by_grow = CoverSet(), CoverSet()
    for begin, end in adds:
        by_add.add(frag(begin, end))
        by_grow.add(frag(begin, end))
    if by_grow.grow_last(frag(*grown)):
        assert by_add.add(frag(*grown))
    assert ranges(by_grow) == ranges(by_add)


@given(st.lists(spans, max_size=15), st.lists(spans, max_size=15))
def test_difference_keeps_exactly_the_fragments_not_covered(a_adds: list, b_adds: list) -> None:
    a, b = CoverSet(frag(*p) for p in a_adds), CoverSet(frag(*p) for p in b_adds)
    kept = a.difference(b)
    assert [f for f in a if not set(range(f.begin, f.end)) <= covered(b)] == list(kept)


# --- query ------------------------------------------------------------------------

OLD = NOW - OFFSET_JUMP_AGE_S - 1
YOUNG = NOW - OFFSET_JUMP_AGE_S + 60


def test_query_finds_the_covering_fragment_and_resolves_the_write_head() -> None:
    s = CoverSet([frag(0, 100, "file:///", OLD), frag(100, 200)])
    hit = query(s, 150, NOW)
    assert (hit.offset, hit.write_head, hit.fragment) == (150, 200, s[1])
    head = query(s, -1, NOW)
    assert (head.offset, head.fragment) == (200, None)


def test_query_jumps_over_a_hole_to_an_old_persisted_fragment() -> None:
    s = CoverSet([frag(0, 100, "file:///", OLD), frag(200, 300, "file:///", OLD)])
    result = query(s, 150, NOW)
    assert (result.offset, result.fragment) == (200, s[1])


def test_query_waits_at_a_hole_before_a_young_fragment() -> None:
    # A young fragment may sit just past an upload this index does not know of yet.
    s = CoverSet([frag(0, 100, "file:///", OLD), frag(200, 300, "file:///", YOUNG)])
    result = query(s, 150, NOW)
    assert (result.offset, result.fragment, result.is_found) == (150, None, False)


def test_query_before_the_first_fragment_jumps_to_it_however_young() -> None:
    # Gazette tests the fragment's place (`ind == 0`), not the asked offset.
    s = CoverSet([frag(500, 600, "file:///", YOUNG), frag(700, 800, "file:///", YOUNG)])
    assert query(s, 0, NOW).offset == 500
    assert (query(s, 10, NOW).offset, query(s, 10, NOW).fragment) == (500, s[0])
    assert query(s, 650, NOW).fragment is None  # a hole before a young second fragment


def test_query_never_jumps_to_a_local_fragment() -> None:
    s = CoverSet([frag(500, 600)])
    assert query(s, 0, NOW).fragment is None


def test_query_skips_fragments_older_than_begin_mod_time() -> None:
    s = CoverSet([frag(0, 100, "file:///", 10), frag(100, 200, "file:///", 20), frag(200, 300)])
    result = query(s, 0, NOW, begin_mod_time=15)
    assert (result.offset, result.fragment) == (100, s[1])
    assert query(s, 0, NOW, begin_mod_time=25).fragment == s[2]  # Local: never skipped.


def test_coverset_module_is_pure() -> None:
    tree = ast.parse(inspect.getsource(coverset))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert all(m == "__future__" or m.startswith("herald.protocol") or m in {"bisect", "collections.abc",
               "dataclasses"} for m in imported), imported
