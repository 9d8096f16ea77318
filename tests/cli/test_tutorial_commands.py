"""Every ``gazctl journals`` command of the seed tutorial ("Gazctl", "JournalSpecs",
"Labels and Selectors"), run as ``herald journals`` against a real broker, with the
tutorial's results."""

from __future__ import annotations

import json

import pytest
import yaml

from herald.testing.tutorial import TUTORIAL_SPEC_YAML, TUTORIAL_TREE_YAML
from tests.cli.cli_helpers import herald, names, ok, table

EXAMPLE_YAML = TUTORIAL_SPEC_YAML + "  retention: 1h0m0s\n  flush_interval: 1m0s\n"

FOOBAR_YAML = TUTORIAL_TREE_YAML


@pytest.fixture
def url(broker):
    ok(broker.url, "apply", input=EXAMPLE_YAML)
    return broker.url


def revision_of(url: str, journal: str) -> int:
    return json.loads(ok(url, "list", "-l", f"name={journal}", "-o", "json"))[0]["mod_revision"]


def primary_of(url: str) -> str:
    route = json.loads(ok(url, "list", "-o", "json"))[0]["route"]
    return route["members"][route["primary"]]["suffix"]


def test_list_primary_shows_the_journal_and_its_broker(url):
    primary = primary_of(url)
    assert primary
    assert table(ok(url, "list", "--primary")) == [["NAME", "PRIMARY"], ["example/journal", primary]]


def test_list_format_yaml_prints_the_spec_with_its_revision(url):
    doc = yaml.safe_load(ok(url, "list", "--format", "yaml"))
    expected = yaml.safe_load(EXAMPLE_YAML)
    assert doc == {**expected, "revision": revision_of(url, "example/journal")}


def test_apply_with_the_listed_revision_switches_to_gzip_and_a_stale_one_fails(url):
    revision = revision_of(url, "example/journal")
    modified = EXAMPLE_YAML.replace("131072", "131073").replace("SNAPPY", "GZIP") + f"revision: {revision}\n"
    out = ok(url, "apply", input=modified)
    assert out.startswith("successfully applied revision=")
    new_revision = int(out.strip().split("=")[1])
    assert new_revision > revision == revision_of(url, "example/journal") - (new_revision - revision)
    spec = json.loads(ok(url, "list", "-o", "json"))[0]["spec"]
    assert spec["fragment"]["compression_codec"] == "GZIP" and spec["fragment"]["length"] == 131073

    stale = herald(url, "apply", input=modified)
    assert stale.exit_code == 1
    assert stale.exception.field == "changes[0].expect_mod_revision"
    assert revision_of(url, "example/journal") == new_revision


def test_apply_dry_run_validates_and_changes_nothing(url):
    out = ok(url, "apply", "--dry-run", input=FOOBAR_YAML)
    doc = yaml.safe_load(out)
    assert [c["upsert"]["name"] for c in doc["changes"]] == [f"foobar/part-00{i}" for i in range(3)]
    assert names(ok(url, "list")) == ["example/journal"]
    bad = herald(url, "apply", "--dry-run", input=FOOBAR_YAML.replace("4096", "12"))
    assert bad.exit_code == 1 and "children[0].fragment.length" in str(bad.exception) + bad.exception.field


def test_apply_hierarchical_children_creates_the_journals(url, tmp_path):
    specs = tmp_path / "foobar.yaml"
    specs.write_text(FOOBAR_YAML)
    assert ok(url, "apply", "-f", str(specs)).startswith("successfully applied revision=")
    primary = primary_of(url)
    assert table(ok(url, "list", "--primary")) == [
        ["NAME", "PRIMARY"], ["example/journal", primary], ["foobar/part-000", primary],
        ["foobar/part-001", primary], ["foobar/part-002", primary]]
    spec = json.loads(ok(url, "list", "-l", "name=foobar/part-001", "-o", "json"))[0]["spec"]
    assert spec["labels"] == [{"name": "content-type", "value": "application/x-ndjson"}, {"name": "my-label"}]
    assert spec["fragment"]["length"] == 4096


@pytest.mark.parametrize("selector, expected", [
    ("prefix=example/", ["example/journal"]),
    ("prefix=foobar/", ["foobar/part-000", "foobar/part-001", "foobar/part-002"]),
    ("app.gazette.dev/message-type=TestMessage", ["example/journal"]),
    ("my-label", ["foobar/part-000", "foobar/part-001", "foobar/part-002"]),
    ("name in (example/journal, foobar/part-001)", ["example/journal", "foobar/part-001"]),
    ("prefix=foobar/, name not in (foobar/part-001)", ["foobar/part-000", "foobar/part-002"]),
])
def test_selector_examples_select_the_tutorial_journal_sets(url, selector, expected):
    ok(url, "apply", input=FOOBAR_YAML)
    out = ok(url, "list", "-l", selector)
    assert table(out)[0] == ["NAME"]
    assert names(out) == expected


def test_list_yaml_round_trips_through_apply(url):
    ok(url, "apply", input=FOOBAR_YAML)
    listed = ok(url, "list", "-o", "yaml")
    tree = yaml.safe_load(listed)
    assert [c["name"] for c in tree["children"]] == ["example/journal", "foobar/"]  # hoisted
    before = json.loads(ok(url, "list", "-o", "json"))
    ok(url, "apply", input=listed)
    after = json.loads(ok(url, "list", "-o", "json"))
    assert [j["spec"] for j in after] == [j["spec"] for j in before]
    assert all(a["mod_revision"] > b["mod_revision"] for a, b in zip(after, before))
    again = herald(url, "apply", input=listed)  # the revisions in it are now stale.
    assert again.exit_code == 1


BIKE_SHARE = [
    ("examples/bike-share/cycles/part-000", "bike_share.Cycle", "application/x-ndjson"),
    ("examples/bike-share/cycles/part-001", "bike_share.Cycle", "application/x-ndjson"),
    ("examples/bike-share/recovery-logs/cycles-part-002", None, "application/x-gazette-recoverylog"),
    ("examples/bike-share/recovery-logs/cycles-part-003", None, "application/x-gazette-recoverylog"),
    ("examples/bike-share/rides/part-000", "bike_share.Ride", "text/csv"),
    ("examples/bike-share/rides/part-001", "bike_share.Ride", "text/csv"),
    ("examples/bike-share/rides/part-002", "bike_share.Ride", "text/csv"),
    ("examples/bike-share/rides/part-003", "bike_share.Ride", "text/csv"),
]


def bike_share_yaml() -> str:
    docs = []
    for name, message_type, content_type in BIKE_SHARE:
        labels = [{"name": "content-type", "value": content_type},
                  {"name": "example-name", "value": "bike-share"}]
        if message_type:
            labels.append({"name": "app.gazette.dev/message-type", "value": message_type})
        docs.append({"name": name, "labels": labels,
                     "fragment": {"length": 1 << 20, "stores": ["file:///"], "refresh_interval": "1m0s"}})
    return yaml.safe_dump_all(docs)


def test_list_label_columns_as_in_the_bike_share_example(url):
    ok(url, "apply", input=bike_share_yaml())
    out = ok(url, "list", "-l", "example-name=bike-share", "-L", "app.gazette.dev/message-type",
             "-L", "content-type")
    assert table(out) == [["NAME", "APP GAZETTE DEV/MESSAGE-TYPE", "CONTENT-TYPE"]] + [
        [name, message_type or "<none>", content_type] for name, message_type, content_type in BIKE_SHARE]


def test_edit_applies_what_the_editor_saved(url):
    revision = revision_of(url, "example/journal")
    out = ok(url, "edit", "-l", "name=example/journal",
             env={"VISUAL": "", "EDITOR": "sed -i -e 's/compression_codec: SNAPPY/compression_codec: GZIP/'"})
    assert out.startswith("successfully applied revision=")
    spec = json.loads(ok(url, "list", "-o", "json"))[0]
    assert spec["spec"]["fragment"]["compression_codec"] == "GZIP" and spec["mod_revision"] > revision
    unchanged = ok(url, "edit", "-l", "name=example/journal", env={"VISUAL": "", "EDITOR": "true"})
    assert unchanged.strip() == "Edit cancelled, no changes made."


def test_commands_need_a_selector_that_matches(url):
    result = herald(url, "read", "-l", "prefix=nothing/")
    assert result.exit_code == 1 and "matched no journals" in str(result.exception)
