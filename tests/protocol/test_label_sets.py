"""LabelSet: a sorted, validated multi-map with Gazette's union/intersect/subtract."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herald.protocol import Label, LabelSet, ValidationError

NAMES = st.sampled_from(["aa", "bb", "cc", "author", "app.gazette.dev/tag"])
VALUES = st.sampled_from(["", "1", "2", "x/y", "v=w%20"])


@st.composite
def label_sets(draw):
    pairs = draw(st.lists(st.tuples(NAMES, VALUES), max_size=8))
    # Drop empty values of names that also have non-empty ones (invalid sets).
    valued = {n for n, v in pairs if v}
    return LabelSet.from_pairs([(n, v) for n, v in pairs if v or n not in valued])


def test_labels_are_sorted_and_unique():
    s = LabelSet.of("bb", "2", "aa", "1", "bb", "1", "bb", "2")
    assert [(lb.name, lb.value) for lb in s] == [("aa", "1"), ("bb", "1"), ("bb", "2")]


def test_of_accepts_keywords_and_pairs():
    assert LabelSet.of(region="eu") == LabelSet.from_pairs([("region", "eu")])


def test_values_of_and_value_of():
    s = LabelSet.of("tag", "b", "tag", "a", "owner", "x")
    assert s.values_of("tag") == ("a", "b")
    assert s.value_of("tag") == "a"
    assert s.values_of("missing") == ()
    assert s.value_of("missing") is None


def test_with_value_replaces_every_value_of_a_name():
    s = LabelSet.of("tag", "a", "tag", "b", "zz", "1")
    assert s.with_value("tag", "c") == LabelSet.of("tag", "c", "zz", "1")


def test_adding_keeps_other_values_and_without_removes_the_name():
    s = LabelSet.of("tag", "a").adding("tag", "b")
    assert s.values_of("tag") == ("a", "b")
    assert s.without("tag") == LabelSet()


def test_union_prefers_all_values_of_the_left_side_per_name():
    # This is what makes a register hand-off `union {author: new}` replace the old author.
    lhs = LabelSet.of("author", "new", "aa", "1")
    rhs = LabelSet.of("author", "old1", "author", "old2", "bb", "2")
    assert lhs.union(rhs) == LabelSet.of("author", "new", "aa", "1", "bb", "2")


def test_intersect_and_subtract_compare_whole_value_lists():
    a = LabelSet.of("tag", "x", "tag", "y", "aa", "1", "bb", "2")
    b = LabelSet.of("tag", "x", "aa", "1", "bb", "3")
    assert a.intersect(b) == LabelSet.of("aa", "1")
    assert a.subtract(b) == LabelSet.of("tag", "x", "tag", "y", "bb", "2")


@given(label_sets(), label_sets())
def test_subtract_then_union_with_intersection_restores_the_set(a, b):
    assert a.subtract(b).union(a.intersect(b)) == a


@given(label_sets(), label_sets())
def test_algebra_laws(a, b):
    assert a.union(a) == a
    assert a.intersect(b) == b.intersect(a)
    assert a.subtract(a) == LabelSet()
    assert set(a.union(b).names()) == set(a.names()) | set(b.names())
    for name in a.names():
        assert a.union(b).values_of(name) == a.values_of(name)


@given(label_sets())
def test_text_and_list_forms_round_trip(s):
    assert LabelSet.parse(str(s)) == s
    assert LabelSet.from_list(s.to_list()) == s


def test_header_form_parses_with_spaces_and_empty_values():
    assert LabelSet.parse("owner=a, xx=1,flag") == LabelSet.of("owner", "a", "xx", "1", "flag", "")
    assert str(LabelSet.of("owner", "a", "xx", "1")) == "owner=a,xx=1"
    assert LabelSet.parse("") == LabelSet()


def test_from_list_accepts_missing_value_as_in_gazette_yaml():
    assert LabelSet.from_list([{"name": "my-label"}]) == LabelSet.of("my-label", "")


@pytest.mark.parametrize(
    ("items", "field"),
    [
        ([{"name": "a"}], "[0].name"),  # too short
        ([{"name": "ok"}, {"name": "x" * 65}], "[1].name"),
        ([{"name": "has space"}], "[0].name"),
        ([{"name": "a#b"}], "[0].name"),
        ([{"name": "aa", "value": "v" * 1025}], "[0].value"),
        ([{"name": "aa", "value": "no,comma"}], "[0].value"),
        ([{"name": "aa", "bogus": 1}], "[0].bogus"),
        ([{"name": "aa"}, {"name": "aa", "value": "1"}], "[1]"),  # empty and non-empty
        (5, None),  # not a list at all (was a TypeError, a 500 at apply)
        (True, None),
    ],
)
def test_invalid_labels_name_their_field(items, field):
    with pytest.raises(ValidationError) as info:
        LabelSet.from_list(items)
    assert info.value.field == field


def test_label_charset_allows_unicode_letters_and_value_symbols():
    Label("région/ü", "a=b%2F+-_.").validate()
    Label("aa", "").validate()
    with pytest.raises(ValidationError):
        Label("a=b", "x").validate()  # `=` only in values


def test_yaml_numbers_as_values_are_read_as_strings():
    assert LabelSet.from_list([{"name": "aa", "value": 0}, {"name": "bb", "value": 1.5}]) == LabelSet.of(
        "aa", "0", "bb", "1.5"
    )
