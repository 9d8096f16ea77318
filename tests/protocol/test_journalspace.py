"""Hierarchical journal specs: push_down (flatten with inheritance) and hoist."""

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from herald.protocol import (
    CompressionCodec,
    FragmentSpec,
    JournalFlags,
    JournalSpec,
    JournalSuspend,
    LabelSet,
    SuspendLevel,
    ValidationError,
    hoist,
    push_down,
)
from herald.testing.tutorial import TUTORIAL_TREE_YAML

# The seed tutorial's hierarchical example (gazette-docs.txt, "children:").
TUTORIAL_TREE = TUTORIAL_TREE_YAML


def test_tutorial_tree_flattens_to_three_fully_specified_journals():
    flat = push_down(yaml.safe_load(TUTORIAL_TREE))
    assert [(spec.name, rev, delete) for spec, rev, delete in flat] == [
        ("foobar/part-000", 0, False), ("foobar/part-001", 0, False), ("foobar/part-002", 0, False),
    ]
    for spec, _, _ in flat:
        assert spec.labels == LabelSet.of("content-type", "application/x-ndjson", "my-label", "")
        assert spec.fragment == FragmentSpec(4096, CompressionCodec.GZIP, ("file:///",), 60.0, 0.0, 60.0)


def test_hoisting_the_tutorial_journals_gives_back_the_tutorial_tree():
    tree = yaml.safe_load(TUTORIAL_TREE)
    flat = push_down(tree)
    assert hoist([(spec, rev) for spec, rev, _ in flat]) == tree


def test_children_override_fields_and_labels_per_name():
    tree = {
        "name": "a/",
        "replication": 3,
        "labels": [{"name": "app.gazette.dev/tag", "value": "x"}, {"name": "app.gazette.dev/tag", "value": "y"},
                   {"name": "owner", "value": "team"}],
        "fragment": {"length": 4096, "flush_interval": "1h"},
        "children": [
            {"name": "a/one", "replication": 2, "labels": [{"name": "app.gazette.dev/tag", "value": "z"}]},
            {"name": "a/two", "fragment": {"length": 8192}, "revision": 7},
        ],
    }
    (one, _, _), (two, rev, _) = push_down(tree)
    assert one.replication == 2 and two.replication == 3
    assert one.labels == LabelSet.of("app.gazette.dev/tag", "z", "owner", "team")
    assert two.labels.values_of("app.gazette.dev/tag") == ("x", "y")
    assert (one.fragment.length, two.fragment.length) == (4096, 8192)
    assert one.fragment.flush_interval_s == two.fragment.flush_interval_s == 3600
    assert rev == 7


def test_suspend_is_not_inherited():
    tree = {
        "name": "a/",
        "suspend": {"level": "FULL", "offset": 10},
        "children": [{"name": "a/one"}, {"name": "a/two", "suspend": {"level": "PARTIAL"}}],
    }
    (one, _, _), (two, _, _) = push_down(tree)
    assert one.suspend == JournalSuspend()
    assert two.suspend == JournalSuspend(SuspendLevel.PARTIAL, 0)


def test_delete_on_a_directory_applies_to_its_subtree_unless_overridden():
    tree = {
        "name": "a/",
        "delete": True,
        "children": [
            {"name": "a/b/", "children": [{"name": "a/b/c"}, {"name": "a/b/d", "delete": False}]},
            {"name": "a/eee"},
        ],
    }
    assert [(s.name, d) for s, _, d in push_down(tree)] == [("a/b/c", True), ("a/b/d", False), ("a/eee", True)]


def test_a_plain_spec_document_is_a_single_journal():
    doc = yaml.safe_load(TUTORIAL_TREE.replace("foobar/", "foobar/x", 1).split("children:")[0])
    doc["revision"] = 5
    ((spec, rev, delete),) = push_down(doc)
    assert (spec.name, rev, delete) == ("foobar/x", 5, False)
    assert hoist([(spec, 5)]) == doc
    assert push_down({}) == [] and hoist([]) == {}


@pytest.mark.parametrize(
    ("tree", "field"),
    [
        ({"name": "a/", "revision": 3, "children": [{"name": "a/b/c"}]}, "revision"),
        ({"name": "a/", "children": []}, "children"),
        ({"name": "a/b/c", "children": [{"name": "a/b/c/d"}]}, "children"),
        ({"name": "a/", "children": [{"name": "b/c/d"}]}, "children[0].name"),
        ({"name": "a/", "children": [{"name": "a/y/z"}, {"name": "a/x/z"}]}, "children[1].name"),
        ({"name": "a/", "children": [{"name": "a/x/z"}, {"name": "a/x/z"}]}, "children[1].name"),
        ({"name": "a/", "children": [{"name": "a/b/", "children": [{"name": "a/b/c", "fragment": {"length": 1}}]}]},
         "children[0].children[0].fragment.length"),
        ({"name": "a/", "fragment": {"bogus": 1}, "children": [{"name": "a/b/c"}]}, "fragment.bogus"),
        ({"name": "a/", "children": [{"name": "a/../x"}]}, "children[0].name"),
        ({"name": "a/", "delete": "yes", "children": [{"name": "a/b/c"}]}, "delete"),
    ],
)
def test_tree_rules_name_the_offending_node(tree, field):
    with pytest.raises(ValidationError) as info:
        push_down(tree)
    assert info.value.field == field


def test_hoist_groups_by_shared_directory_prefixes():
    specs = [(JournalSpec(n), 0) for n in ["root/foo/bar", "root/foo/baz", "root/bing", "other/x1"]]
    tree = hoist(specs)
    assert "name" not in tree  # the root of unrelated prefixes is the empty directory
    assert [c["name"] for c in tree["children"]] == ["other/x1", "root/"]
    root = tree["children"][1]
    assert [c["name"] for c in root["children"]] == ["root/bing", "root/foo/"]
    assert [c["name"] for c in root["children"][1]["children"]] == ["root/foo/bar", "root/foo/baz"]
    # Shared defaults are lifted to the very top, leaving leaves with only a name.
    assert tree["replication"] == 1 and root["children"][0] == {"name": "root/bing"}


def test_hoist_rejects_duplicate_names():
    with pytest.raises(ValidationError):
        hoist([(JournalSpec("a/b/c"), 1), (JournalSpec("a/b/c"), 2)])


# -- property: push_down(hoist(x)) == x -----------------------------------------

names = st.lists(
    st.lists(st.sampled_from(["aa", "ab", "b", "c=1", "d%2"]), min_size=1, max_size=4).map("/".join),
    min_size=1, max_size=8, unique=True,
).filter(lambda ns: all(len(n) >= 4 for n in ns))


@st.composite
def spec_lists(draw):
    out = []
    for name in sorted(draw(names)):
        label_pairs = draw(st.lists(st.tuples(st.sampled_from(["aa", "bb", "my-label"]),
                                              st.sampled_from(["x", "y"])), max_size=3))
        spec = JournalSpec(
            name,
            replication=draw(st.sampled_from([1, 3])),
            labels=LabelSet.from_pairs(label_pairs),
            fragment=FragmentSpec(
                length=draw(st.sampled_from([4096, 1 << 20])),
                compression_codec=draw(st.sampled_from([CompressionCodec.GZIP, CompressionCodec.SNAPPY])),
                stores=draw(st.sampled_from([(), ("file:///",), ("s3://b/p/", "file:///")])),
                refresh_interval_s=draw(st.sampled_from([60.0, 300.0])),
                retention_s=draw(st.sampled_from([0.0, 3600.0])),
                flush_interval_s=draw(st.sampled_from([0.0, 60.0])),
            ),
            flags=draw(st.sampled_from([JournalFlags.NOT_SPECIFIED, JournalFlags.O_RDONLY])),
            max_append_rate=draw(st.sampled_from([0, 1000])),
            suspend=draw(st.sampled_from([JournalSuspend(), JournalSuspend(SuspendLevel.FULL, 9)])),
        )
        out.append((spec, draw(st.integers(0, 3)), draw(st.booleans())))
    return out


@given(spec_lists())
def test_push_down_inverts_hoist(specs):
    tree = hoist(specs)
    assert push_down(tree) == specs
    assert push_down(yaml.safe_load(yaml.safe_dump(tree))) == specs


@given(spec_lists())
def test_hoist_is_idempotent_through_push_down(specs):
    tree = hoist(specs)
    assert hoist(push_down(tree)) == tree
