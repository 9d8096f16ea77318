"""LabelSelector: Gazette's grammar, canonical printing, and matching semantics."""

import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from herald.protocol import (
    JournalSpec,
    Label,
    LabelSelector,
    LabelSet,
    ValidationError,
    journal_meta_labels,
    rewrite_prefix_selector,
)

# The seed tutorial's journals (gazette-docs.txt "Labels and Selectors").
TUTORIAL = {
    "example/journal": LabelSet.of(
        "app.gazette.dev/message-type", "TestMessage",
        "app.gazette.dev/region", "local",
        "app.gazette.dev/tag", "demo",
        "content-type", "application/x-ndjson",
    ),
    **{
        f"foobar/part-00{i}": LabelSet.of("content-type", "application/x-ndjson", "my-label", "")
        for i in range(3)
    },
}


def select(text):
    sel = rewrite_prefix_selector(LabelSelector.parse(text))
    return [name for name, labels in TUTORIAL.items() if sel.matches(journal_meta_labels(labels, name))]


@pytest.mark.parametrize(
    ("text", "journals"),
    [
        ("prefix=example/", ["example/journal"]),
        ("prefix=foobar/", ["foobar/part-000", "foobar/part-001", "foobar/part-002"]),
        ("app.gazette.dev/message-type=TestMessage", ["example/journal"]),
        ("my-label", ["foobar/part-000", "foobar/part-001", "foobar/part-002"]),
        ("name in (example/journal, foobar/part-001)", ["example/journal", "foobar/part-001"]),
        ("prefix=foobar/, name not in (foobar/part-001)", ["foobar/part-000", "foobar/part-002"]),
    ],
)
def test_seed_tutorial_selectors_pick_the_same_journals(text, journals):
    assert select(text) == journals


def test_meta_labels_come_from_the_spec():
    spec = JournalSpec("foobar/part-000", labels=TUTORIAL["foobar/part-000"])
    assert spec.meta_labels().value_of("name") == "foobar/part-000"
    assert LabelSelector.parse("name=foobar/part-000").matches(spec.meta_labels())


@pytest.mark.parametrize(
    ("text", "include", "exclude"),
    [
        ("aa=1", [("aa", "1")], []),
        ("aa==1", [("aa", "1")], []),
        ("aa = 1", [("aa", "1")], []),
        ("aa!=1", [], [("aa", "1")]),
        ("aa in (1,2)", [("aa", "1"), ("aa", "2")], []),
        ("aa in ( 1 , 2 )", [("aa", "1"), ("aa", "2")], []),
        ("aa notin (1,2)", [], [("aa", "1"), ("aa", "2")]),
        ("aa not in (1, 2)", [], [("aa", "1"), ("aa", "2")]),
        ("aa", [("aa", "")], []),
        ("aa=", [("aa", "")], []),
        ("!aa", [], [("aa", "")]),
        ("! aa", [], [("aa", "")]),
        ("bb=2,aa=1,", [("aa", "1"), ("bb", "2")], []),
        ("", [], []),
    ],
)
def test_parse_grammar(text, include, exclude):
    sel = LabelSelector.parse(text)
    assert sel.include == LabelSet.from_pairs(include)
    assert sel.exclude == LabelSet.from_pairs(exclude)


def test_prefix_suffix_sets_the_prefix_flag():
    sel = LabelSelector.parse("name:prefix=a/b/, tag:prefix in (x,y), !zz:prefix")
    assert Label("name", "a/b/", prefix=True) in sel.include
    assert Label("tag", "y", prefix=True) in sel.include
    assert Label("zz", "", prefix=True) in sel.exclude


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("zz=1, aa in (2,1), !cc, bb", "aa in (1,2),bb,zz=1,!cc"),
        ("aa not in (x), bb!=y, cc notin (1,2)", "aa!=x,bb!=y,cc notin (1,2)"),
        ("name:prefix=a/, name=b", "name=b,name:prefix=a/"),
    ],
)
def test_canonical_string_is_sorted_and_shortest(text, canonical):
    assert str(LabelSelector.parse(text)) == canonical


@pytest.mark.parametrize(
    "text",
    ["aa=1 bb=2", "aa in (1,", "a=1", "aa in ()", "aa=b c", "aa in (x,,y)", "aa:suffix=1", "aa,,bb"],
)
def test_parse_errors_name_the_offending_term(text):
    with pytest.raises(ValidationError) as info:
        LabelSelector.parse(text)
    assert info.value.field == "selector"
    assert "'" in info.value.message  # the term is quoted in the message


def test_empty_and_nonempty_values_of_one_name_are_rejected():
    with pytest.raises(ValidationError):
        LabelSelector.parse("aa, aa=1")


def test_prefix_rewrite_requires_a_trailing_slash():
    with pytest.raises(ValidationError) as info:
        rewrite_prefix_selector(LabelSelector.parse("prefix=foobar"))
    assert "prefix" in info.value.field
    rewritten = rewrite_prefix_selector(LabelSelector.parse("prefix!=a/"))
    assert rewritten.exclude == LabelSet((Label("name", "a/", prefix=True),))


# -- properties ----------------------------------------------------------------

NAMES = st.sampled_from(["aa", "bb", "name", "app.gazette.dev/tag", "réglé"])
VALUES = st.sampled_from(["", "1", "2", "a/", "a/b", "x=y%2"])
labels_st = st.builds(Label, NAMES, VALUES, st.booleans())


def _valid(include, exclude):
    sel = LabelSelector(LabelSet(tuple(include)), LabelSet(tuple(exclude)))
    try:
        sel.validate()
    except ValidationError:
        assume(False)
    return sel


selectors = st.builds(_valid, st.lists(labels_st, max_size=5), st.lists(labels_st, max_size=5))
sets = st.lists(st.tuples(NAMES, VALUES.filter(bool)), max_size=6).map(LabelSet.from_pairs)


@given(selectors)
def test_print_then_parse_is_identity(sel):
    text = str(sel)
    assert LabelSelector.parse(text) == sel
    assert str(LabelSelector.parse(text)) == text


@given(selectors)
def test_parse_tolerates_extra_spaces(sel):
    spaced = re.sub(r",", ", ", str(sel)).replace(" notin ", " not in ")
    assert LabelSelector.parse(spaced) == sel


@given(sets)
def test_selector_of_a_sets_own_labels_matches_it(labels):
    assert LabelSelector(include=labels).matches(labels)
    assert LabelSelector().matches(labels)


@given(sets, st.data())
def test_excluding_any_present_label_rejects(labels, data):
    assume(len(labels))
    label = data.draw(st.sampled_from(labels.labels))
    assert not LabelSelector(exclude=LabelSet((label,))).matches(labels)
    assert not LabelSelector(exclude=LabelSet((Label(label.name),))).matches(labels)


@given(selectors, labels_st, sets)
def test_adding_an_include_term_never_widens_the_match(sel, term, labels):
    include = LabelSet(sel.include.labels + (term,))
    narrower = LabelSelector(include, sel.exclude)
    try:
        narrower.validate()
    except ValidationError:
        assume(False)
    # Only holds when the term introduces a new name: a value of an existing name is OR'd.
    assume(term.name not in sel.include.names())
    if narrower.matches(labels):
        assert sel.matches(labels)


@given(sets, NAMES)
def test_existence_terms_follow_name_presence(labels, name):
    has = name in labels.names()
    assert LabelSelector.parse(name).matches(labels) == has
    assert LabelSelector.parse("!" + name).matches(labels) == (not has)


@given(sets, NAMES, VALUES.filter(bool), st.text("ab/", max_size=3))
def test_prefix_terms_match_by_string_prefix(labels, name, value, suffix):
    with_value = labels.adding(name, value + suffix)
    assert LabelSelector(LabelSet((Label(name, value, prefix=True),))).matches(with_value)
    exact = LabelSelector(LabelSet((Label(name, value),)))
    assert exact.matches(with_value) == (value in with_value.values_of(name))
