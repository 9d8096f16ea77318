"""Mappings (gazette-facts §3.1): FNV-1a 32, modulo, rendezvous, random."""

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herald.message.mapping import NoJournalsError, fnv1a32, modulo_mapping, random_mapping, rendezvous_mapping

JOURNALS = [f"events/part-{i:03d}" for i in range(8)]


@pytest.mark.parametrize(
    "data, expect", [(b"", 0x811C9DC5), (b"a", 0xE40C292C), (b"foobar", 0xBF9CF968)]
)
def test_fnv1a32_matches_reference_vectors(data, expect):
    assert fnv1a32(data) == expect


def test_modulo_picks_hash_mod_len():
    key = b"user-42"
    assert modulo_mapping(key, JOURNALS) == JOURNALS[fnv1a32(key) % len(JOURNALS)]


@given(st.binary(max_size=20))
def test_rendezvous_picks_max_of_key_hash_xor_name_hash_first_on_ties(key):
    scores = [fnv1a32(key) ^ fnv1a32(j.encode()) for j in JOURNALS]
    assert rendezvous_mapping(key, JOURNALS) == JOURNALS[scores.index(max(scores))]


def test_rendezvous_keeps_index_0_when_no_score_beats_zero():
    # Same name twice: equal scores, the first wins.
    assert rendezvous_mapping(b"k", ["a/x", "a/x"]) == "a/x"
    name = "a/only"
    key_equal_to_name_hash = fnv1a32(name.encode())
    # A single journal is always chosen, whatever its score.
    assert rendezvous_mapping(key_equal_to_name_hash.to_bytes(4, "big"), [name]) == name


@given(st.lists(st.binary(min_size=1, max_size=12), min_size=1, max_size=50, unique=True))
def test_rendezvous_adding_a_journal_only_moves_keys_onto_it(keys):
    grown = JOURNALS + ["events/part-new"]
    for key in keys:
        before, after = rendezvous_mapping(key, JOURNALS), rendezvous_mapping(key, grown)
        assert after in (before, "events/part-new")


def test_random_uses_the_callers_generator():
    picks = {random_mapping(JOURNALS, random.Random(seed)) for seed in range(200)}
    assert picks == set(JOURNALS)
    assert random_mapping(JOURNALS, random.Random(7)) == random_mapping(JOURNALS, random.Random(7))


@pytest.mark.parametrize(
    "call",
    [lambda: modulo_mapping(b"k", []), lambda: rendezvous_mapping(b"k", []), lambda: random_mapping([], random.Random())],
)
def test_empty_journal_list_is_a_selector_error(call):
    with pytest.raises(NoJournalsError, match="selector matched no journals"):
        call()
